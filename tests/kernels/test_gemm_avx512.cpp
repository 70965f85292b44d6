// The own AVX-512 GEMM (kernels/cpu/gemm_avx512.hpp) against two oracles: a product in double
// (the error bound) and a scalar std::fma chain in k order (the bits: every element of C is one
// such chain, which is why any split of rows or columns among threads gives the same result).
// Shapes cross every blocking edge: the 6 x 64 tile, 96 packed rows, a depth of 256 and 1024
// packed columns, with all four transpose cases, padded strides, and accumulate on and off.
// SKIPPED on a CPU without AVX-512F, where CpuOps never calls it.
#include "cpu/gemm_avx512.hpp"
#include "cpu_test_support.hpp"

#include <QtTest>

#include <cmath>
#include <vector>

using namespace tandem;
using namespace tandem::testing;

namespace {

struct Case {
    bool transA, transB;
    int M, N, K;
    bool accumulate;
    int pad;  // extra elements at the end of every row of A, B and C
};

struct Operands {
    Floats A, B, C;
    int lda, ldb, ldc;
};

Operands makeOperands(const Case& c, uint64_t seed) {
    Rng rng(seed);
    auto fill = [&](size_t n) {
        Floats v(n);
        for (float& x : v)
            x = 2.0f * rng.uniform() - 1.0f;
        return v;
    };
    Operands o;
    o.lda = (c.transA ? c.M : c.K) + c.pad;
    o.ldb = (c.transB ? c.K : c.N) + c.pad;
    o.ldc = c.N + c.pad;
    o.A = fill(size_t(c.transA ? c.K : c.M) * o.lda);
    o.B = fill(size_t(c.transB ? c.N : c.K) * o.ldb);
    o.C = fill(size_t(c.M) * o.ldc);
    return o;
}

float elementA(const Case& c, const Operands& o, int i, int k) {
    return c.transA ? o.A[size_t(k) * o.lda + i] : o.A[size_t(i) * o.lda + k];
}
float elementB(const Case& c, const Operands& o, int k, int j) {
    return c.transB ? o.B[size_t(j) * o.ldb + k] : o.B[size_t(k) * o.ldb + j];
}

void addCases() {
    QTest::addColumn<bool>("transA");
    QTest::addColumn<bool>("transB");
    QTest::addColumn<int>("M");
    QTest::addColumn<int>("N");
    QTest::addColumn<int>("K");
    const struct {
        const char* name;
        int M, N, K;
    } shapes[] = {
        {"one element", 1, 1, 1},           {"one tile", 6, 64, 16},
        {"partial tiles", 7, 65, 33},       {"over one A block and one depth", 97, 130, 257},
        {"over one B block", 13, 1100, 40}, {"small qkv, a quarter of the rows", 256, 768, 256},
        {"deep (dweight)", 50, 36, 1030},
    };
    for (const auto& s : shapes) {
        for (int t = 0; t < 4; ++t) {
            QTest::newRow(qPrintable(QStringLiteral("%1, A%2 B%3")
                                         .arg(s.name)
                                         .arg(t & 1 ? "^T" : "")
                                         .arg(t & 2 ? "^T" : "")))
                << bool(t & 1) << bool(t & 2) << s.M << s.N << s.K;
        }
    }
}

}  // namespace

class TestGemmAvx512 : public QObject {
    Q_OBJECT
  private slots:
    void init() {
        if (!gemmAvx512Available())
            QSKIP("this CPU has no AVX-512F: CpuOps multiplies on OpenBLAS here");
    }

    void matchesFmaChain_data() { addCases(); }
    void matchesFmaChain() {
        QFETCH(bool, transA);
        QFETCH(bool, transB);
        QFETCH(int, M);
        QFETCH(int, N);
        QFETCH(int, K);
        for (bool accumulate : {false, true}) {
            for (int pad : {0, 3}) {
                const Case c{transA, transB, M, N, K, accumulate, pad};
                Operands o = makeOperands(c, 1000 + M + N + K + pad);
                const Floats before = o.C;
                gemmAvx512(transA, transB, M, N, K, o.A.data(), o.lda, o.B.data(), o.ldb,
                           accumulate, o.C.data(), o.ldc);
                double maxError = 0.0;
                size_t differentBits = 0;
                for (int i = 0; i < M; ++i) {
                    for (int j = 0; j < N; ++j) {
                        const size_t at = size_t(i) * o.ldc + j;
                        float chain = accumulate ? before[at] : 0.0f;
                        double exact = chain;
                        for (int k = 0; k < K; ++k) {
                            chain = std::fma(elementA(c, o, i, k), elementB(c, o, k, j), chain);
                            exact += double{elementA(c, o, i, k)} * elementB(c, o, k, j);
                        }
                        differentBits += chain != o.C[at];
                        maxError = std::max(maxError, std::fabs(o.C[at] - exact));
                    }
                    // The padding past each row of C is never written.
                    for (int j = N; j < o.ldc; ++j)
                        QCOMPARE(o.C[size_t(i) * o.ldc + j], before[size_t(i) * o.ldc + j]);
                }
                QCOMPARE(differentBits, size_t{0});
                // |a b| <= 1 per term: float's rounding over K terms stays far below this.
                QVERIFY2(maxError < 1e-5 * (K + 1), qPrintable(QString::number(maxError)));
            }
        }
    }

    // Rows and columns multiplied in pieces (as the thread pool splits them) give the bits of
    // one call over everything.
    void splitKeepsBits() {
        const Case c{false, true, 203, 300, 280, true, 0};
        const Operands o = makeOperands(c, 7);
        Floats whole = o.C, pieces = o.C;
        gemmAvx512(false, true, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, true,
                   whole.data(), o.ldc);
        const int rowCut = 101, columnCut = 77;
        for (int r0 : {0, rowCut}) {
            const int rows = r0 == 0 ? rowCut : c.M - rowCut;
            for (int c0 : {0, columnCut}) {
                const int cols = c0 == 0 ? columnCut : c.N - columnCut;
                gemmAvx512(false, true, rows, cols, c.K, o.A.data() + size_t(r0) * o.lda, o.lda,
                           o.B.data() + size_t(c0) * o.ldb, o.ldb, true,
                           pieces.data() + size_t(r0) * o.ldc + c0, o.ldc);
            }
        }
        QVERIFY(whole == pieces);
    }

    // Non-finite inputs reach the output as IEEE arithmetic says (the step's NaN checks rely on
    // it): a NaN in A poisons its row, an infinity in B its column.
    void nonFinitePropagates() {
        const Case c{false, false, 12, 70, 20, false, 0};
        Operands o = makeOperands(c, 9);
        o.A[size_t(4) * o.lda + 3] = std::nanf("");
        o.B[size_t(5) * o.ldb + 66] = INFINITY;
        gemmAvx512(false, false, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, false,
                   o.C.data(), o.ldc);
        for (int j = 0; j < c.N; ++j)
            QVERIFY(std::isnan(o.C[size_t(4) * o.ldc + j]));
        for (int i = 0; i < c.M; ++i) {
            if (i != 4)
                QVERIFY(!std::isfinite(o.C[size_t(i) * o.ldc + 66]));
        }
        QVERIFY(std::isfinite(o.C[0]));
    }
};

QTEST_APPLESS_MAIN(TestGemmAvx512)
#include "test_gemm_avx512.moc"
