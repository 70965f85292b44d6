// The CUDA op set against the CPU reference: every op forward and backward, the optimizer ops,
// the fp16 encoder bit for bit, error reporting, the memory check, and 20 whole training steps.
// Built twice: test_cuda_ops runs the kernels through the CUDA emulation (every test run);
// test_cuda_device runs the same tests on GPU 0 and reports SKIPPED (exit code 77) without one.
//
// Dimensions: B batch, T sequence, C channels, OC output channels, NH heads, V vocab, N elements.
#include "cpu_reference/reference_ops.hpp"
#include "cuda/cuda_backend.hpp"
#include "gpt_backend.hpp"
#include "model.hpp"
#if !TANDEM_TEST_ON_DEVICE
#include "cuda/emulation/cuda_emulation.hpp"
#endif

#include <QTest>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace tandem;

namespace {

Expected<std::unique_ptr<Ops>> makeOpsUnderTest() {
#if TANDEM_TEST_ON_DEVICE
    return makeCudaOps(0);
#else
    return makeEmulatedCudaOps();
#endif
}
Expected<std::unique_ptr<Backend>> makeBackendUnderTest() {
#if TANDEM_TEST_ON_DEVICE
    return makeCudaBackend(0);
#else
    return makeEmulatedCudaBackend();
#endif
}

std::vector<float> randomVector(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v)
        x = dist(rng);
    return v;
}

std::vector<int32_t> randomTokens(size_t n, int vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v)
        x = dist(rng);
    if (n > 1)
        v.back() = v.front();  // a repeated token: its gradient rows accumulate
    return v;
}

// Empty when every |got - want| <= atol + rtol |want|; else the worst element.
QString compare(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                float atol, float rtol) {
    if (got.size() != want.size())
        return QString("%1: size %2 vs %3").arg(what).arg(got.size()).arg(want.size());
    double worst = 0;
    size_t worstAt = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double excess =
            std::abs(double{got[i]} - want[i]) - (atol + rtol * std::abs(want[i]));
        if (!(excess <= worst)) {  // NaN counts as a failure
            worst = std::isnan(excess) ? INFINITY : excess;
            worstAt = i;
        }
    }
    if (worst <= 0)
        return {};
    return QString("%1[%2]: got %3, reference %4")
        .arg(what)
        .arg(worstAt)
        .arg(got[worstAt], 0, 'g', 9)
        .arg(want[worstAt], 0, 'g', 9);
}

#define COMPARE_CLOSE(what, got, want, atol, rtol)                    \
    do {                                                              \
        const QString problem = compare(what, got, want, atol, rtol); \
        QVERIFY2(problem.isEmpty(), qPrintable(problem));             \
    } while (0)

}  // namespace

class TestCudaOps : public QObject {
    Q_OBJECT

  public:
    bool deviceMissing = false;

  private:
    std::unique_ptr<Ops> m_dev;
    ReferenceOps m_ref;
    std::vector<void*> m_buffers;

    float* upload(const std::vector<float>& host) {
        float* p = m_dev->allocateFloats(host.size());
        m_buffers.push_back(p);
        m_dev->copyIn(p, host.data(), host.size());
        return p;
    }
    int32_t* upload(const std::vector<int32_t>& host) {
        int32_t* p = m_dev->allocateInts(host.size());
        m_buffers.push_back(p);
        m_dev->copyInInts(p, host.data(), host.size());
        return p;
    }
    std::vector<float> download(const float* p, size_t n) {
        std::vector<float> host(n);
        m_dev->copyOut(host.data(), p, n);
        return host;
    }
    // A buffer of garbage: forward outputs and attention scratch must be overwritten.
    static std::vector<float> garbage(size_t n) { return std::vector<float>(n, NAN); }

  private slots:
    void initTestCase() {
        auto ops = makeOpsUnderTest();
        if (!ops) {
            deviceMissing = true;
            QSKIP(qPrintable("SKIPPED: no usable CUDA device: " +
                             QString::fromStdString(ops.error().message)));
        }
        m_dev = std::move(ops.value());
        qInfo("op set under test: %s", m_dev->name().c_str());
    }
    void cleanup() {
        for (void* p : m_buffers)
            m_dev->release(p);
        m_buffers.clear();
        const Status s = m_dev->error();
        QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    }

    // Shapes: partial warps (T, C not multiples of 32), several lanes per row (C, T > 32).
    void encoder_data() { shapes(); }
    void encoder() {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, C);
        const int V = 256, maxT = T + 3;
        auto inp = randomTokens(size_t(B) * T, 7, 1);  // few distinct tokens: many atomics collide
        auto wte = randomVector(size_t(V) * C, 2), wpe = randomVector(size_t(maxT) * C, 3);
        std::vector<float> want(size_t(B) * T * C);
        m_ref.encoderForward(want.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
        float* out = upload(garbage(want.size()));
        int32_t* dinp = upload(inp);
        m_dev->encoderForward(out, dinp, upload(wte), upload(wpe), B, T, C);
        COMPARE_CLOSE("encoder out", download(out, want.size()), want, 0, 0);

        auto dout = randomVector(want.size(), 4);
        auto dwte = randomVector(wte.size(), 5), dwpe = randomVector(wpe.size(), 6);
        float* ddwte = upload(dwte);
        float* ddwpe = upload(dwpe);
        m_ref.encoderBackward(dwte.data(), dwpe.data(), dout.data(), inp.data(), B, T, C);
        m_dev->encoderBackward(ddwte, ddwpe, upload(dout), dinp, B, T, C);
        COMPARE_CLOSE("dwte", download(ddwte, dwte.size()), dwte, 1e-5f, 1e-5f);
        COMPARE_CLOSE("dwpe", download(ddwpe, dwpe.size()), dwpe, 1e-5f, 1e-5f);
    }

    void layernorm_data() { shapes(); }
    void layernorm() {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, C);
        const size_t n = size_t(B) * T * C, rows = size_t(B) * T;
        auto inp = randomVector(n, 11, 2.0f);
        for (size_t i = 0; i < n; ++i)
            inp[i] += 0.5f;  // a mean to subtract
        auto weight = randomVector(C, 12), bias = randomVector(C, 13);
        std::vector<float> out(n), mean(rows), rstd(rows);
        m_ref.layernormForward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                               bias.data(), B, T, C);
        float* dout_ = upload(garbage(n));
        float* dmean = upload(garbage(rows));
        float* drstd = upload(garbage(rows));
        float* dinpBuf = upload(inp);
        float* dweightBuf = upload(weight);
        m_dev->layernormForward(dout_, dmean, drstd, dinpBuf, dweightBuf, upload(bias), B, T, C);
        COMPARE_CLOSE("layernorm out", download(dout_, n), out, 1e-5f, 1e-5f);
        COMPARE_CLOSE("layernorm mean", download(dmean, rows), mean, 1e-6f, 1e-5f);
        COMPARE_CLOSE("layernorm rstd", download(drstd, rows), rstd, 1e-6f, 1e-5f);

        auto dout = randomVector(n, 14);
        auto dinp = randomVector(n, 15), dweight = randomVector(C, 16), dbias = randomVector(C, 17);
        float* gi = upload(dinp);
        float* gw = upload(dweight);
        float* gb = upload(dbias);
        m_ref.layernormBackward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                                weight.data(), mean.data(), rstd.data(), B, T, C);
        m_dev->layernormBackward(gi, gw, gb, upload(dout), dinpBuf, dweightBuf, upload(mean),
                                 upload(rstd), B, T, C);
        COMPARE_CLOSE("layernorm dinp", download(gi, n), dinp, 1e-4f, 1e-4f);
        COMPARE_CLOSE("layernorm dweight", download(gw, C), dweight, 1e-4f, 1e-4f);
        COMPARE_CLOSE("layernorm dbias", download(gb, C), dbias, 1e-4f, 1e-4f);
    }

    void matmul_data() { shapes(); }
    void matmul() {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, C);
        for (bool withBias : {true, false}) {
            const int OC = C + 9;
            const size_t BT = size_t(B) * T;
            auto inp = randomVector(BT * C, 21), weight = randomVector(size_t(OC) * C, 22, 0.2f);
            auto bias = randomVector(OC, 23);
            std::vector<float> out(BT * OC);
            m_ref.matmulForward(out.data(), inp.data(), weight.data(),
                                withBias ? bias.data() : nullptr, B, T, C, OC);
            float* o = upload(garbage(out.size()));
            float* di = upload(inp);
            float* dw = upload(weight);
            m_dev->matmulForward(o, di, dw, withBias ? upload(bias) : nullptr, B, T, C, OC);
            COMPARE_CLOSE("matmul out", download(o, out.size()), out, 1e-5f, 1e-5f);

            auto dout = randomVector(out.size(), 24);
            auto dinp = randomVector(inp.size(), 25), dweight = randomVector(weight.size(), 26);
            auto dbias = randomVector(OC, 27);
            float* gi = upload(dinp);
            float* gw = upload(dweight);
            float* gb = upload(dbias);
            m_ref.matmulBackward(dinp.data(), dweight.data(), withBias ? dbias.data() : nullptr,
                                 dout.data(), inp.data(), weight.data(), B, T, C, OC);
            m_dev->matmulBackward(gi, gw, withBias ? gb : nullptr, upload(dout), di, dw, B, T, C,
                                  OC);
            COMPARE_CLOSE("matmul dinp", download(gi, dinp.size()), dinp, 1e-4f, 1e-4f);
            COMPARE_CLOSE("matmul dweight", download(gw, dweight.size()), dweight, 1e-4f, 1e-4f);
            COMPARE_CLOSE("matmul dbias", download(gb, OC), dbias, 1e-4f, 1e-4f);
        }
    }

    void attention_data() { shapes(); }
    void attention() {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, C);
        const int NH = C % 3 == 0 ? 3 : 4;
        const size_t BT = size_t(B) * T, tt = size_t(B) * NH * T * T;
        auto inp = randomVector(BT * 3 * C, 31);
        std::vector<float> out(BT * C), preatt(tt), att(tt);
        m_ref.attentionForward(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH);
        float* o = upload(garbage(out.size()));
        float* p = upload(garbage(tt));
        float* a = upload(garbage(tt));
        float* di = upload(inp);
        m_dev->attentionForward(o, p, a, di, B, T, C, NH);
        COMPARE_CLOSE("attention out", download(o, out.size()), out, 1e-5f, 1e-4f);
        COMPARE_CLOSE("preatt", download(p, tt), preatt, 1e-5f, 1e-5f);
        COMPARE_CLOSE("att", download(a, tt), att, 1e-6f, 1e-4f);

        auto dout = randomVector(out.size(), 32);
        auto dinp = randomVector(inp.size(), 33);
        std::vector<float> dpreatt(tt, 7.0f), datt(tt, -3.0f);  // scratch: overwritten
        float* gi = upload(dinp);
        float* gp = upload(dpreatt);
        float* ga = upload(datt);
        m_ref.attentionBackward(dinp.data(), dpreatt.data(), datt.data(), dout.data(), inp.data(),
                                att.data(), B, T, C, NH);
        m_dev->attentionBackward(gi, gp, ga, upload(dout), di, a, B, T, C, NH);
        COMPARE_CLOSE("attention dinp", download(gi, dinp.size()), dinp, 1e-4f, 1e-4f);
        COMPARE_CLOSE("dpreatt", download(gp, tt), dpreatt, 1e-5f, 1e-4f);
        COMPARE_CLOSE("datt", download(ga, tt), datt, 1e-5f, 1e-4f);
    }

    void elementwise() {
        const int64_t N = 3000;  // not a multiple of the block size
        auto inp = randomVector(N, 41, 2.0f), inp2 = randomVector(N, 42);
        std::vector<float> out(N), out2(N);
        m_ref.geluForward(out.data(), inp.data(), N);
        m_ref.residualForward(out2.data(), inp.data(), inp2.data(), N);
        float* o = upload(garbage(N));
        float* o2 = upload(garbage(N));
        float* di = upload(inp);
        m_dev->geluForward(o, di, N);
        m_dev->residualForward(o2, di, upload(inp2), N);
        COMPARE_CLOSE("gelu", download(o, N), out, 1e-6f, 1e-5f);
        COMPARE_CLOSE("residual", download(o2, N), out2, 0, 0);

        auto dout = randomVector(N, 43);
        auto dinp = randomVector(N, 44);
        float* g1 = upload(dinp);
        float* dd = upload(dout);
        m_ref.geluBackward(dinp.data(), inp.data(), dout.data(), N);
        m_dev->geluBackward(g1, di, dd, N);
        COMPARE_CLOSE("gelu dinp", download(g1, N), dinp, 1e-5f, 1e-5f);
    }

    void crossEntropy() {  // byte vocabulary, then padded rows (V 300 -> 320, 50257 -> 50304)
        for (const auto& [V, Vp] : {std::pair{256, 256}, {300, 320}, {50257, 50304}}) {
            const int B = 3, T = 7;
            const size_t rows = size_t(B) * T;
            auto logits = randomVector(rows * Vp, 51, 3.0f);
            logits[5] = 80.0f;  // a dominant logit: probabilities of the others underflow
            auto targets = randomTokens(rows, V, 52);
            std::vector<float> losses(rows), probs(rows * Vp);
            m_ref.softmaxCrossEntropyForward(losses.data(), probs.data(), logits.data(),
                                             targets.data(), B, T, V, Vp);
            float* l = upload(garbage(rows));
            float* p = upload(garbage(probs.size()));
            int32_t* dt = upload(targets);
            m_dev->softmaxCrossEntropyForward(l, p, upload(logits), dt, B, T, V, Vp);
            COMPARE_CLOSE("losses", download(l, rows), losses, 1e-5f, 1e-5f);
            COMPARE_CLOSE("probs", download(p, probs.size()), probs, 1e-7f, 1e-5f);

            auto dlosses = randomVector(rows, 53), dlogits = randomVector(probs.size(), 54);
            float* g = upload(dlogits);
            m_ref.crossEntropySoftmaxBackward(dlogits.data(), dlosses.data(), probs.data(),
                                              targets.data(), B, T, V, Vp);
            m_dev->crossEntropySoftmaxBackward(g, upload(dlosses), p, dt, B, T, V, Vp);
            COMPARE_CLOSE("dlogits", download(g, dlogits.size()), dlogits, 1e-6f, 1e-5f);
        }
    }

    void sumSquaresAndAdamw() {
        const int64_t N = 5001;
        auto x = randomVector(N, 61);
        const double want = m_ref.sumSquares(x.data(), N);
        float* dx = upload(x);
        const double got = m_dev->sumSquares(dx, N);
        QVERIFY2(std::abs(got - want) <= 1e-9 * want,
                 qPrintable(QString("%1 vs %2").arg(got).arg(want)));
        QCOMPARE(m_dev->sumSquares(dx, 0), 0.0);

        auto params = randomVector(N, 62), grads = randomVector(N, 63);
        auto m = randomVector(N, 64, 0.1f), v = randomVector(N, 65, 0.1f);
        for (auto& e : v)
            e = e * e;  // second moments are non-negative
        float* dp = upload(params);
        float* dm = upload(m);
        float* dv = upload(v);
        float* dg = upload(grads);
        for (int64_t t : {1, 2, 17}) {
            m_ref.adamwUpdate(params.data(), grads.data(), m.data(), v.data(), N, 1e-3f, 0.9f,
                              0.95f, 1e-8f, 0.1f, 0.5f, t);
            m_dev->adamwUpdate(dp, dg, dm, dv, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
        }
        COMPARE_CLOSE("adamw params", download(dp, N), params, 1e-6f, 1e-5f);
        COMPARE_CLOSE("adamw m", download(dm, N), m, 1e-7f, 1e-5f);
        COMPARE_CLOSE("adamw v", download(dv, N), v, 1e-7f, 1e-5f);
    }

    // Bit for bit: ties, subnormals, the saturation edge, Inf and NaN, and random values.
    void encodeFp16() {
        std::vector<float> deltas = {
            0.0f,           -0.0f,          1.0f,   -1.0f,          65504.0f,       65505.0f,
            65519.0f,       65520.0f,       -1e9f,  6.1035156e-05f, 6.0975552e-05f, 5.9604645e-08f,
            2.9802322e-08f, 2.9802326e-08f, 1e-10f, 1.00048828125f, 1.00146484375f, 3.14159f,
            INFINITY,       -INFINITY,      NAN};
        auto random = randomVector(70000, 71, 100.0f);  // more than one emulated chunk
        deltas.insert(deltas.end(), random.begin(), random.end());
        for (int e = -30; e <= 17; ++e)
            deltas.push_back(std::ldexp(1.37f, e));
        const int64_t N = static_cast<int64_t>(deltas.size());
        auto current = randomVector(N, 72);
        std::vector<float> start(N);
        for (int64_t i = 0; i < N; ++i)
            start[i] = deltas[i] + current[i];
        // Recompute exactly what the encoder sees: start - current in float.
        std::vector<uint16_t> want(N), got(N, 0xdead);
        const EncodeStats ws = m_ref.encodeDeltaFp16(want.data(), start.data(), current.data(), N);
        const EncodeStats gs =
            m_dev->encodeDeltaFp16(got.data(), upload(start), upload(current), N);
        // A NaN delta needs only to stay a NaN (it refuses the result anyway): a GPU's arithmetic
        // gives the canonical NaN 0x7fffffff where x86 keeps the operand's payload and sign.
        const auto isNanHalf = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); };
        for (int64_t i = 0; i < N; ++i) {
            if (isNanHalf(want[i]) && isNanHalf(got[i]))
                continue;
            QVERIFY2(got[i] == want[i], qPrintable(QString("element %1 (delta %2): 0x%3 vs 0x%4")
                                                       .arg(i)
                                                       .arg(start[i] - current[i], 0, 'g', 9)
                                                       .arg(got[i], 4, 16)
                                                       .arg(want[i], 4, 16)));
        }
        QCOMPARE(gs.saturated, ws.saturated);
        QCOMPARE(gs.nonFinite, ws.nonFinite);
        QVERIFY(ws.saturated >= 3 && ws.nonFinite >= 3);
    }

    // A failing device call becomes an error with file, line and call, and fails the work unit.
    void errorsAreReportedNotAborted() {
        auto backend = makeBackendUnderTest();
        QVERIFY(backend.ok());
        auto config = ModelConfig::parse("L=1,NH=2,C=32,T=8");
        QVERIFY(config.ok());
        QVERIFY((*backend)->allocate(*config, 1, 8).ok());
        auto& gpt = static_cast<GptBackend&>(**backend);
        std::vector<int32_t> tokens(8, 1);
        QVERIFY(gpt.forward(tokens, tokens, 1, 8).ok());
        // K = 0 makes lda = 0 invalid for cuBLAS: CUBLAS_STATUS_INVALID_VALUE.
        float* scratch = gpt.ops().allocateFloats(64);
        gpt.ops().matmulForward(scratch, scratch, scratch, nullptr, 1, 1, 0, 4);
        const Status s = gpt.ops().error();
        QVERIFY(!s.ok());
        const std::string message = s.error().message;
        qInfo("%s", message.c_str());
        QVERIFY(message.find("cuBLAS error") != std::string::npos);
        QVERIFY(message.find("cuda_ops.cu:") != std::string::npos);
        QVERIFY(message.find("cublasSgemm") != std::string::npos);
        auto loss = gpt.forward(tokens, tokens, 1, 8);
        QVERIFY(!loss.ok());
        QCOMPARE(loss.error().message, message);
        QVERIFY(!gpt.backward().ok());
        QVERIFY(!gpt.adamwStep(AdamWConfig{}, 1e-3f).ok());
        gpt.ops().release(scratch);
        // This backend is spent; the test's own op set is untouched.
        QVERIFY(m_dev->error().ok());
    }

#if !TANDEM_TEST_ON_DEVICE
    // The kernels' barriers are complete: the emulated threads of a block may run in any order
    // and the results stay bit for bit the same (one OS thread, so atomics add in one order).
    void resultsDoNotDependOnThreadOrder() {
        const int B = 2, T = 37, C = 72, NH = 3;
        const size_t n = size_t(B) * T * C, tt = size_t(B) * NH * T * T;
        auto inp = randomVector(n, 81), weight = randomVector(C, 82), bias = randomVector(C, 83);
        auto qkv = randomVector(3 * n, 84), dout = randomVector(n, 85);
        auto run = [&] {
            std::vector<float> result;
            float* out = upload(garbage(n));
            float* mean = upload(garbage(size_t(B) * T));
            float* rstd = upload(garbage(size_t(B) * T));
            float* x = upload(inp);
            float* w = upload(weight);
            m_dev->layernormForward(out, mean, rstd, x, w, upload(bias), B, T, C);
            float* dinp = upload(std::vector<float>(n, 0.0f));
            float* dw = upload(std::vector<float>(C, 0.0f));
            float* db = upload(std::vector<float>(C, 0.0f));
            float* dy = upload(dout);
            m_dev->layernormBackward(dinp, dw, db, dy, x, w, mean, rstd, B, T, C);
            float* y = upload(garbage(n));
            float* pre = upload(garbage(tt));
            float* att = upload(garbage(tt));
            float* q = upload(qkv);
            m_dev->attentionForward(y, pre, att, q, B, T, C, NH);
            float* dq = upload(std::vector<float>(3 * n, 0.0f));
            m_dev->attentionBackward(dq, upload(garbage(tt)), upload(garbage(tt)), dy, q, att, B, T,
                                     C, NH);
            for (auto [p, count] : {std::pair{out, n},
                                    {dinp, n},
                                    {dw, size_t(C)},
                                    {db, size_t(C)},
                                    {y, n},
                                    {att, tt},
                                    { dq,
                                      3 * n }}) {
                auto host = download(p, count);
                result.insert(result.end(), host.begin(), host.end());
            }
            result.push_back(static_cast<float>(m_dev->sumSquares(dq, int64_t(3 * n))));
            return result;
        };
        emu::setWorkerThreads(1);
        const auto forward = run();
        emu::setSchedule(emu::Schedule::Reverse);
        const auto reverse = run();
        emu::setSchedule(emu::Schedule::Shuffled, 99);
        const auto shuffled = run();
        emu::setSchedule(emu::Schedule::Forward);
        emu::setWorkerThreads(2);
        QVERIFY(std::memcmp(forward.data(), reverse.data(), forward.size() * sizeof(float)) == 0);
        QVERIFY(std::memcmp(forward.data(), shuffled.data(), forward.size() * sizeof(float)) == 0);
    }

#endif

    // canRun refuses a work unit that does not fit, giving both numbers; allocate refuses too.
    void refusesWorkUnitThatDoesNotFit() {
#if TANDEM_TEST_ON_DEVICE
        const int hugeBatch = 4096;  // GPT-2 XL at 4096 x 1024: terabytes of activations
        auto config = ModelConfig::parse("L=48,NH=25,C=1600,T=1024");
#else
        const int hugeBatch = 16;
        const size_t capacity = emu::deviceMemoryCapacity();
        emu::setDeviceMemoryCapacity(size_t{200} << 20);
        auto config = ModelConfig::parse("L=4,NH=4,C=256,T=256");
#endif
        QVERIFY(config.ok());
        auto backend = makeBackendUnderTest();
        QVERIFY(backend.ok());
        const Status s = (*backend)->canRun(*config, hugeBatch, config->maxSeqLen);
        const Status a = (*backend)->allocate(*config, hugeBatch, config->maxSeqLen);
        const Status small = (*backend)->canRun(*config, 1, 16);
#if !TANDEM_TEST_ON_DEVICE
        emu::setDeviceMemoryCapacity(capacity);
#endif
        QVERIFY(!s.ok());
        qInfo("%s", s.error().message.c_str());
        QVERIFY(s.error().message.find("needs") != std::string::npos);
        QVERIFY(s.error().message.find("only") != std::string::npos);
        QVERIFY(!a.ok());
        QVERIFY(small.ok());
    }

    // 20 AdamW steps of a small GPT: losses, gradients and weights follow the CPU reference.
    void twentyTrainingSteps() {
        auto config = ModelConfig::parse("L=2,NH=4,C=32,T=16");
        QVERIFY(config.ok());
        const int B = 2, T = 16;
        auto dev = makeBackendUnderTest();
        auto ref = makeCpuBackend("cpu-reference", 1);
        QVERIFY(dev.ok() && ref.ok());
        QVERIFY((*dev)->allocate(*config, B, T).ok());
        QVERIFY((*ref)->allocate(*config, B, T).ok());
        ParameterLayout layout(*config);
        std::vector<float> params(layout.parameterCount());
        initParameters(layout, params, 1234);
        QVERIFY((*dev)->loadParameters(params).ok());
        QVERIFY((*ref)->loadParameters(params).ok());
        AdamWConfig adam;
        std::vector<float> gradDev(params.size()), gradRef(params.size());
        for (int step = 0; step < 20; ++step) {
            // A learnable pattern, so the loss falls: next byte = byte + 1.
            std::vector<int32_t> inputs(B * T), targets(B * T);
            for (int i = 0; i < B * T; ++i) {
                inputs[i] = (i * 7 + step * 3) % 64;
                targets[i] = (inputs[i] + 1) % 64;
            }
            auto lossDev = (*dev)->forward(inputs, targets, B, T);
            auto lossRef = (*ref)->forward(inputs, targets, B, T);
            QVERIFY2(lossDev.ok(), lossDev.ok() ? "" : lossDev.error().message.c_str());
            QVERIFY(lossRef.ok());
            QVERIFY2(std::abs(*lossDev - *lossRef) <= 1e-4f * *lossRef,
                     qPrintable(
                         QString("step %1: loss %2 vs %3").arg(step).arg(*lossDev).arg(*lossRef)));
            QVERIFY((*dev)->backward().ok());
            QVERIFY((*ref)->backward().ok());
            if (step == 0 || step == 19) {
                QVERIFY((*dev)->storeGradients(gradDev).ok());
                QVERIFY((*ref)->storeGradients(gradRef).ok());
                COMPARE_CLOSE("gradients", gradDev, gradRef, 2e-5f, 1e-3f);
            }
            auto sd = (*dev)->adamwStep(adam, 3e-3f);
            auto sr = (*ref)->adamwStep(adam, 3e-3f);
            QVERIFY(sd.ok() && sr.ok());
            QVERIFY(std::abs(sd->gradNorm - sr->gradNorm) <= 1e-4f * sr->gradNorm);
            if (step == 19) {
                QVERIFY2(*lossRef < 5.0f, "the reference did not learn");  // ln 256 = 5.55
            }
        }
        std::vector<float> pd(params.size()), pr(params.size());
        QVERIFY((*dev)->storeParameters(pd).ok());
        QVERIFY((*ref)->storeParameters(pr).ok());
        // Adam normalises each update, so rounding differences in tiny gradients may move a weight
        // by up to about one learning rate; the bulk must agree far better.
        COMPARE_CLOSE("parameters after 20 steps", pd, pr, 3e-3f, 0);
        double diff = 0, norm = 0;
        for (size_t i = 0; i < pd.size(); ++i) {
            diff += (double{pd[i]} - pr[i]) * (double{pd[i]} - pr[i]);
            norm += double{pr[i]} * pr[i];
        }
        QVERIFY2(
            std::sqrt(diff / norm) < 1e-4,
            qPrintable(QString("relative parameter difference %1").arg(std::sqrt(diff / norm))));
        std::vector<float> start(params);
        std::vector<uint16_t> half(params.size());
        QVERIFY((*dev)->encodePseudoGradient(start, half).ok());
    }

  private:
    static void shapes() {
        QTest::addColumn<int>("B");
        QTest::addColumn<int>("T");
        QTest::addColumn<int>("C");
        QTest::newRow("B2 T5 C24") << 2 << 5 << 24;
        QTest::newRow("B1 T37 C72") << 1 << 37 << 72;
    }
};

int main(int argc, char** argv) {
    TestCudaOps test;
    const int result = QTest::qExec(&test, argc, argv);
    if (result == 0 && test.deviceMissing)
        return 77;  // CTest reports SKIPPED
    return result;
}

#include "test_cuda_ops.moc"
