// The CUDA emulation's own tests: thread indices, barriers that really order threads (a kernel
// that lacks one gives a wrong result), warp shuffles and votes, atomics across blocks, launch
// errors, deadlock detection, emulated device memory and the cuBLAS stand-in against plain loops.
//
// Dimensions: M, N, K GEMM sizes (column-major), N also element counts.
#define TANDEM_CUDA_EMULATION 1
#include "cuda/cuda_compat.cuh"

#include <QTest>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace tandem::cuda_emulated {
namespace {

// out (gridDim * blockDim, 6): every thread writes its indices at its global linear id.
__global__ void indexKernel(int* out) {
    const int threadLinear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int blockLinear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int id = blockLinear * blockDim.x * blockDim.y * blockDim.z + threadLinear;
    int* row = out + 6 * id;
    row[0] = threadIdx.x;
    row[1] = threadIdx.y;
    row[2] = threadIdx.z;
    row[3] = blockIdx.x;
    row[4] = blockIdx.y;
    row[5] = blockIdx.z;
}

// sums (gridDim.x) = sum of inp over each block of 128; correct: barrier before thread 0 reads.
__global__ void blockSumKernel(float* sums, const float* inp, int withBarrier) {
    __shared__ float values[128];
    values[threadIdx.x] = inp[blockIdx.x * blockDim.x + threadIdx.x];
    if (withBarrier)
        __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (unsigned i = 0; i < blockDim.x; ++i)
            s += values[i];
        sums[blockIdx.x] = s;
    }
}

// Tree reduction in shared memory; withBarrier = 0 drops the barrier inside the loop (a race).
__global__ void treeSumKernel(float* sums, const float* inp, int withBarrier) {
    __shared__ float values[128];
    values[threadIdx.x] = inp[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            values[threadIdx.x] += values[threadIdx.x + stride];
        if (withBarrier)
            __syncthreads();
    }
    if (threadIdx.x == 0)
        sums[blockIdx.x] = values[0];
}

// out (blockDim.x, 5): per thread the results of down, up, xor, idx shuffles and a warp sum.
__global__ void shuffleKernel(float* out, int width) {
    const float v = static_cast<float>(threadIdx.x);
    float* row = out + 5 * threadIdx.x;
    row[0] = __shfl_down_sync(0xffffffffu, v, 3, width);
    row[1] = __shfl_up_sync(0xffffffffu, v, 2, width);
    row[2] = __shfl_xor_sync(0xffffffffu, v, 5, width);
    row[3] = __shfl_sync(0xffffffffu, v, 7, width);
    float s = v;
    for (int offset = 16; offset > 0; offset /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, offset);
    row[4] = s;
}

// out (blockDim.x, 3): ballot of odd lanes, all(lane < 40), any(lane == 5).
__global__ void voteKernel(unsigned* out) {
    const unsigned lane = threadIdx.x % 32;
    out[3 * threadIdx.x + 0] = __ballot_sync(0xffffffffu, lane % 2 == 1);
    out[3 * threadIdx.x + 1] = __all_sync(0xffffffffu, lane < 40);
    out[3 * threadIdx.x + 2] = __any_sync(0xffffffffu, lane == 5);
}

__global__ void atomicKernel(int* counter, float* total, double* totalDouble) {
    atomicAdd(counter, 1);
    atomicAdd(total, 0.5f);
    atomicAdd(totalDouble, 0.25);
}

// Lanes 0-15 wait at a warp shuffle that lanes 16-31 never reach, since those wait at
// __syncthreads, which lanes 0-15 never reach: the block can never complete.
__global__ void deadlockKernel(float* out) {
    if (threadIdx.x < 16) {
        out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
    } else {
        __syncthreads();
    }
}

std::vector<float> iota(int n) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i)
        v[i] = static_cast<float>(i % 7) - 3.0f;
    return v;
}

// Plain-loop GEMM on column-major matrices, in double: the oracle for the cuBLAS stand-in.
void referenceGemm(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& A,
                   int lda, const std::vector<float>& B, int ldb, float beta, std::vector<float>& C,
                   int ldc) {
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
            double acc = 0;
            for (int p = 0; p < k; ++p) {
                const double a = ta ? A[p + i * lda] : A[i + p * lda];
                const double b = tb ? B[j + p * ldb] : B[p + j * ldb];
                acc += a * b;
            }
            float& c = C[i + j * ldc];
            c = static_cast<float>(alpha * acc + (beta == 0 ? 0.0 : beta * c));
        }
    }
}

}  // namespace
}  // namespace tandem::cuda_emulated

using namespace tandem::cuda_emulated;
namespace emu = tandem::emu;

class TestCudaEmulation : public QObject {
    Q_OBJECT

  private slots:
    void cleanup() {
        emu::setSchedule(emu::Schedule::Forward);
        QCOMPARE(emu::cudaGetLastError(), emu::cudaSuccess);
    }

    void threadAndBlockIndices() {
        const emu::dim3 grid(3, 2, 2), block(4, 3, 2);
        const int threads = 3 * 2 * 2 * 4 * 3 * 2;
        std::vector<int> out(6 * threads, -1);
        launchKernel(indexKernel, grid, block, nullptr, out.data());
        for (int id = 0; id < threads; ++id) {
            const int t = id % 24, b = id / 24;
            const int* row = out.data() + 6 * id;
            QCOMPARE(row[0], t % 4);
            QCOMPARE(row[1], t / 4 % 3);
            QCOMPARE(row[2], t / 12);
            QCOMPARE(row[3], b % 3);
            QCOMPARE(row[4], b / 3 % 2);
            QCOMPARE(row[5], b / 6);
        }
    }

    void barrierMakesBlockSumCorrectInEverySchedule() {
        const int blocks = 6;
        const auto inp = iota(blocks * 128);
        for (auto s : {emu::Schedule::Forward, emu::Schedule::Reverse, emu::Schedule::Shuffled}) {
            emu::setSchedule(s, 42);
            std::vector<float> sums(blocks, -1), treeSums(blocks, -1);
            launchKernel(blockSumKernel, emu::dim3(blocks), emu::dim3(128), nullptr, sums.data(),
                         inp.data(), 1);
            launchKernel(treeSumKernel, emu::dim3(blocks), emu::dim3(128), nullptr, treeSums.data(),
                         inp.data(), 1);
            for (int b = 0; b < blocks; ++b) {
                float expected = 0;
                for (int i = 0; i < 128; ++i)
                    expected += inp[b * 128 + i];
                QCOMPARE(sums[b], expected);
                QCOMPARE(treeSums[b], expected);
            }
        }
    }

    // The point of fibers: a kernel that lacks a barrier reads values other threads have not
    // written yet, and the result is wrong, as it may be on a GPU.
    void missingBarrierGivesWrongResult() {
        // Shared memory keeps what the previous block on the same OS thread left there (on a GPU
        // it is undefined), so every block sums different values.
        const int blocks = 4;
        std::vector<float> inp(blocks * 128);
        for (int i = 0; i < blocks * 128; ++i)
            inp[i] = static_cast<float>(i / 128 + 1);
        std::vector<float> sums(blocks, -1), treeSums(blocks, -1);
        launchKernel(blockSumKernel, emu::dim3(blocks), emu::dim3(128), nullptr, sums.data(),
                     inp.data(), 0);
        launchKernel(treeSumKernel, emu::dim3(blocks), emu::dim3(128), nullptr, treeSums.data(),
                     inp.data(), 0);
        for (int b = 0; b < blocks; ++b) {
            const float expected = 128.0f * static_cast<float>(b + 1);
            QVERIFY2(sums[b] != expected, "a block sum without __syncthreads came out right");
            QVERIFY2(treeSums[b] != expected, "a racy tree reduction came out right");
        }
    }

    void shufflesFollowCudaSemantics() {
        for (int width : {32, 8}) {
            const int threads = 48;  // one full warp and a partial one of 16 lanes
            std::vector<float> out(5 * threads, -1);
            launchKernel(shuffleKernel, emu::dim3(1), emu::dim3(threads), nullptr, out.data(),
                         width);
            for (int t = 0; t < threads; ++t) {
                const int lane = t % 32, warpBase = t - lane;
                const int lanesInWarp = t < 32 ? 32 : 16;
                const int segment = lane / width * width;
                const float* row = out.data() + 5 * t;
                const int down =
                    lane + 3 < segment + width && lane + 3 < lanesInWarp ? lane + 3 : lane;
                QCOMPARE(row[0], float(warpBase + down));
                const int up = lane - 2 >= segment ? lane - 2 : lane;
                QCOMPARE(row[1], float(warpBase + up));
                const int x = lane ^ 5;
                const int xr = x < segment + width && x < lanesInWarp ? x : lane;
                QCOMPARE(row[2], float(warpBase + xr));
                const int idx = segment + 7 % width;
                QCOMPARE(row[3], float(warpBase + (idx < lanesInWarp ? idx : lane)));
            }
            // A full warp's xor-butterfly sum: every lane holds 0 + 1 + ... + 31.
            for (int t = 0; t < 32; ++t)
                QCOMPARE(out[5 * t + 4], 496.0f);
        }
    }

    void votes() {
        const int threads = 40;  // the second warp has 8 lanes
        std::vector<unsigned> out(3 * threads, 7);
        launchKernel(voteKernel, emu::dim3(1), emu::dim3(threads), nullptr, out.data());
        for (int t = 0; t < threads; ++t) {
            const unsigned* row = out.data() + 3 * t;
            QCOMPARE(row[0], t < 32 ? 0xaaaaaaaau : 0xaau);
            QCOMPARE(row[1], 1u);
            QCOMPARE(row[2], 1u);
        }
    }

    void atomicsAcrossBlocks() {
        emu::setWorkerThreads(4);  // blocks really run on several OS threads
        int counter = 0;
        float total = 0;
        double totalDouble = 0;
        launchKernel(atomicKernel, emu::dim3(64), emu::dim3(64), nullptr, &counter, &total,
                     &totalDouble);
        emu::setWorkerThreads(2);
        QCOMPARE(counter, 64 * 64);
        QCOMPARE(total, 64 * 64 * 0.5f);  // exact: every partial sum is representable
        QCOMPARE(totalDouble, 64 * 64 * 0.25);
    }

    void badLaunchShapeIsAnError() {
        std::vector<int> out(6 * 2048);
        launchKernel(indexKernel, emu::dim3(1), emu::dim3(1025), nullptr, out.data());
        QCOMPARE(emu::cudaGetLastError(), emu::cudaErrorInvalidConfiguration);
        launchKernel(indexKernel, emu::dim3(0), emu::dim3(32), nullptr, out.data());
        QCOMPARE(emu::cudaGetLastError(), emu::cudaErrorInvalidConfiguration);
        QCOMPARE(emu::cudaGetLastError(), emu::cudaSuccess);  // reading clears it
    }

    void deadlockIsReportedNotHung() {
        std::vector<float> out(64);
        launchKernel(deadlockKernel, emu::dim3(2), emu::dim3(64), nullptr, out.data());
        QCOMPARE(emu::cudaGetLastError(), emu::cudaErrorLaunchFailure);
        QVERIFY(
            std::string(emu::cudaGetErrorString(emu::cudaErrorLaunchFailure)).find("deadlock") !=
            std::string::npos);
    }

    void deviceMemory() {
        const size_t capacity = emu::deviceMemoryCapacity();
        emu::setDeviceMemoryCapacity(1 << 20);
        size_t freeBytes = 0, totalBytes = 0;
        QCOMPARE(emu::cudaMemGetInfo(&freeBytes, &totalBytes), emu::cudaSuccess);
        QCOMPARE(totalBytes, size_t{1} << 20);
        float* p = nullptr;
        QCOMPARE(emu::cudaMalloc(&p, 1000 * sizeof(float)), emu::cudaSuccess);
        QVERIFY(std::isnan(p[0]) && std::isnan(p[999]));  // fresh memory is garbage, not zero
        QCOMPARE(emu::cudaMemGetInfo(&freeBytes, &totalBytes), emu::cudaSuccess);
        QCOMPARE(freeBytes, (size_t{1} << 20) - 4096);
        float* big = nullptr;
        QCOMPARE(emu::cudaMalloc(&big, size_t{1} << 20), emu::cudaErrorMemoryAllocation);
        QVERIFY(big == nullptr);
        QCOMPARE(emu::cudaFree(p), emu::cudaSuccess);
        QCOMPARE(emu::cudaFree(p), emu::cudaErrorInvalidDevicePointer);
        QCOMPARE(emu::deviceMemoryInUse(), size_t{0});
        emu::setDeviceMemoryCapacity(capacity);
    }

    void gemmMatchesPlainLoops_data() {
        QTest::addColumn<bool>("ta");
        QTest::addColumn<bool>("tb");
        QTest::addColumn<float>("beta");
        for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
                for (float beta : {0.0f, 0.5f}) {
                    QTest::addRow("%s%s beta=%g", ta ? "T" : "N", tb ? "T" : "N", beta)
                        << ta << tb << beta;
                }
            }
        }
    }
    void gemmMatchesPlainLoops() {
        QFETCH(bool, ta);
        QFETCH(bool, tb);
        QFETCH(float, beta);
        const int m = 13, n = 7, k = 19, batch = 3;
        // Leading dimensions larger than the rows, so a stand-in that ignores them fails.
        const int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 2, ldc = m + 5;
        const long long strideA = lda * (ta ? m : k) + 11, strideB = ldb * (tb ? k : n) + 4;
        const long long strideC = ldc * n + 6;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> dist(-1, 1);
        std::vector<float> A(strideA * batch), B(strideB * batch), C(strideC * batch);
        for (auto& x : A)
            x = dist(rng);
        for (auto& x : B)
            x = dist(rng);
        for (auto& x : C)
            x = beta == 0 ? NAN : dist(rng);  // beta 0: C must not be read
        auto expected = C;
        const float alpha = 1.5f;
        emu::cublasHandle_t handle = nullptr;
        QCOMPARE(emu::cublasCreate(&handle), emu::CUBLAS_STATUS_SUCCESS);
        const auto opA = ta ? emu::CUBLAS_OP_T : emu::CUBLAS_OP_N;
        const auto opB = tb ? emu::CUBLAS_OP_T : emu::CUBLAS_OP_N;
        // One plain Sgemm on the first matrices, then the strided batch on all of them.
        auto single = C;
        QCOMPARE(emu::cublasSgemm(handle, opA, opB, m, n, k, &alpha, A.data(), lda, B.data(), ldb,
                                  &beta, single.data(), ldc),
                 emu::CUBLAS_STATUS_SUCCESS);
        QCOMPARE(emu::cublasSgemmStridedBatched(handle, opA, opB, m, n, k, &alpha, A.data(), lda,
                                                strideA, B.data(), ldb, strideB, &beta, C.data(),
                                                ldc, strideC, batch),
                 emu::CUBLAS_STATUS_SUCCESS);
        for (int b = 0; b < batch; ++b) {
            std::vector<float> a(A.begin() + b * strideA, A.begin() + (b + 1) * strideA);
            std::vector<float> bb(B.begin() + b * strideB, B.begin() + (b + 1) * strideB);
            std::vector<float> c(expected.begin() + b * strideC,
                                 expected.begin() + (b + 1) * strideC);
            referenceGemm(ta, tb, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc);
            std::copy(c.begin(), c.end(), expected.begin() + b * strideC);
        }
        for (int b = 0; b < batch; ++b) {
            for (int j = 0; j < n; ++j) {
                for (int i = 0; i < ldc; ++i) {
                    const long long at = b * strideC + i + j * ldc;
                    if (i >= m) {  // padding rows stay untouched
                        QVERIFY(std::isnan(C[at]) == std::isnan(expected[at]));
                        continue;
                    }
                    QVERIFY2(std::abs(C[at] - expected[at]) < 1e-5f,
                             qPrintable(QString("C(%1,%2) batch %3: %4 vs %5")
                                            .arg(i)
                                            .arg(j)
                                            .arg(b)
                                            .arg(C[at])
                                            .arg(expected[at])));
                    if (b == 0)
                        QCOMPARE(single[at], C[at]);
                }
            }
        }
        QCOMPARE(emu::cublasDestroy(handle), emu::CUBLAS_STATUS_SUCCESS);
    }

    void gemmRejectsBadArguments() {
        emu::cublasHandle_t handle = nullptr;
        QCOMPARE(emu::cublasCreate(&handle), emu::CUBLAS_STATUS_SUCCESS);
        std::vector<float> A(100), B(100), C(100);
        const float one = 1, zero = 0;
        // lda smaller than the rows of A (op N: m).
        QCOMPARE(emu::cublasSgemm(handle, emu::CUBLAS_OP_N, emu::CUBLAS_OP_N, 5, 3, 4, &one,
                                  A.data(), 4, B.data(), 4, &zero, C.data(), 5),
                 emu::CUBLAS_STATUS_INVALID_VALUE);
        // ldc smaller than m.
        QCOMPARE(emu::cublasSgemm(handle, emu::CUBLAS_OP_T, emu::CUBLAS_OP_N, 5, 3, 4, &one,
                                  A.data(), 4, B.data(), 4, &zero, C.data(), 4),
                 emu::CUBLAS_STATUS_INVALID_VALUE);
        QCOMPARE(emu::cublasSgemm(nullptr, emu::CUBLAS_OP_N, emu::CUBLAS_OP_N, 1, 1, 1, &one,
                                  A.data(), 1, B.data(), 1, &zero, C.data(), 1),
                 emu::CUBLAS_STATUS_NOT_INITIALIZED);
        QCOMPARE(emu::cublasDestroy(handle), emu::CUBLAS_STATUS_SUCCESS);
    }
};

QTEST_APPLESS_MAIN(TestCudaEmulation)
#include "test_cuda_emulation.moc"
