// The CUDA emulation runtime: fibers for the threads of a block, barriers, warp exchange, the
// block scheduler, emulated device memory and the cuBLAS stand-in. See cuda_emulation.hpp.
//
// Dimensions: M, N, K matrix sizes of a GEMM (column-major).
#include "cuda_emulation.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tandem::emu {

namespace {

constexpr size_t kFiberStackBytes = 128 * 1024;

// Fiber switches: on x86-64 a few instructions of our own (callee-saved registers, the stack
// pointer, the FP control words), announced to ASan; elsewhere, and under TSan, ucontext.
// glibc's swapcontext makes a signal-mask system call per switch, which was most of the
// emulation's time.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define TANDEM_EMU_FAST_SWITCH 1
#else
#define TANDEM_EMU_FAST_SWITCH 0
#endif
#if defined(__SANITIZE_ADDRESS__) && TANDEM_EMU_FAST_SWITCH
#define TANDEM_EMU_ASAN_FIBERS 1
#else
#define TANDEM_EMU_ASAN_FIBERS 0
#endif
constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridY = 65535, kMaxGridZ = 65535;

struct Barrier {
    int arrived = 0;
    uint64_t generation = 0;
    int live = 0;  // threads of the group that have not exited
};

struct Fiber {
    ucontext_t context;
    void* sp = nullptr;  // saved stack pointer (fast switch)
    const void* stackBottom = nullptr;
    void* asanFakeStack = nullptr;
    ThreadContext thread;
    Barrier* waitingOn = nullptr;
    uint64_t waitGeneration = 0;
    bool done = false;
};

// ---- errors -------------------------------------------------------------------------------------
std::mutex gErrorMutex;
cudaError_t gLastError = cudaSuccess;

void recordError(cudaError_t error) {
    std::lock_guard lock(gErrorMutex);
    if (gLastError == cudaSuccess)
        gLastError = error;
}

std::atomic<int> gSchedule{static_cast<int>(Schedule::Forward)};
std::atomic<uint64_t> gScheduleSeed{0};

}  // namespace

class BlockRuntime {
  public:
    std::vector<Fiber> fibers;
    Barrier blockBarrier;
    std::vector<Barrier> warpBarriers;
    std::vector<uint64_t> slots;
    int threads = 0;

    int lanesInWarp(int warp) const {
        return std::min(warpSizeValue, threads - warp * warpSizeValue);
    }
};

namespace {

// One per OS thread that runs blocks: the fiber stacks and the scheduler context.
struct Worker {
    std::vector<char*> stacks;
    BlockRuntime block;
    ucontext_t scheduler;
    void* schedulerSp = nullptr;
    void* schedulerFakeStack = nullptr;  // ASan's bookkeeping of the scheduler's stack
    const void* schedulerBottom = nullptr;
    size_t schedulerSize = 0;
    Fiber* running = nullptr;
    const std::function<void()>* body = nullptr;

    ~Worker() {
        for (char* s : stacks)
            munmap(s, kFiberStackBytes + pageBytes());
    }
    static size_t pageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
    bool ensureStacks(int count) {
        while (static_cast<int>(stacks.size()) < count) {
            // A guard page below each stack turns an overflow into a fault, not corruption.
            void* p = mmap(nullptr, kFiberStackBytes + pageBytes(), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED)
                return false;
            mprotect(p, pageBytes(), PROT_NONE);
            stacks.push_back(static_cast<char*>(p));
        }
        return true;
    }
};

thread_local Worker tWorker;
thread_local ThreadContext* tCurrent = nullptr;

#if TANDEM_EMU_FAST_SWITCH
// Saves the callee-saved registers and FP control words on the current stack, stores the stack
// pointer in *save, switches to the stack `load` and restores what was saved there.
extern "C" void tandemEmuSwitch(void** save, void* load);
asm(R"(
    .text
    .p2align 4
    .globl tandemEmuSwitch
    .hidden tandemEmuSwitch
    .type tandemEmuSwitch, @function
tandemEmuSwitch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    fnstcw (%rsp)
    stmxcsr 8(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    fldcw (%rsp)
    ldmxcsr 8(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tandemEmuSwitch, .-tandemEmuSwitch
)");

[[noreturn]] void fiberTrampoline();

// A fresh fiber's stack as tandemEmuSwitch leaves a suspended one: FP control words, six zero
// registers, then the trampoline as the return address, placed so the trampoline starts with the
// stack alignment of a called function.
void* prepareStack(char* stackTop) {
    auto* p = reinterpret_cast<uint64_t*>(stackTop);  // 16-byte aligned
    *--p = 0;                                         // the trampoline's own return address
    *--p = reinterpret_cast<uint64_t>(&fiberTrampoline);
    for (int i = 0; i < 6; ++i)
        *--p = 0;  // rbp rbx r12 r13 r14 r15
    uint32_t mxcsr = 0;
    uint16_t fpcw = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpcw));
    *--p = mxcsr;
    *--p = fpcw;
    return p;
}
#endif

// ASan must be told about every switch to another stack (no-ops without ASan).
inline void asanStartSwitch([[maybe_unused]] void** fakeStackSave,
                            [[maybe_unused]] const void* bottom, [[maybe_unused]] size_t size) {
#if TANDEM_EMU_ASAN_FIBERS
    __sanitizer_start_switch_fiber(fakeStackSave, bottom, size);
#endif
}
inline void asanFinishSwitch([[maybe_unused]] void* fakeStack,
                             [[maybe_unused]] const void** bottomOld,
                             [[maybe_unused]] size_t* sizeOld) {
#if TANDEM_EMU_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(fakeStack, bottomOld, sizeOld);
#endif
}

void fiberEntry() {
    Worker& w = tWorker;
    (*w.body)();
    w.running->done = true;
    // Returning resumes uc_link: the scheduler.
}

void yieldToScheduler() {
    Worker& w = tWorker;
#if TANDEM_EMU_FAST_SWITCH
    Fiber& self = *w.running;
    asanStartSwitch(&self.asanFakeStack, w.schedulerBottom, w.schedulerSize);
    tandemEmuSwitch(&self.sp, w.schedulerSp);
    asanFinishSwitch(self.asanFakeStack, nullptr, nullptr);
#else
    swapcontext(&w.running->context, &w.scheduler);
#endif
}

#if TANDEM_EMU_FAST_SWITCH
void fiberTrampoline() {
    {
        Worker& w = tWorker;
        asanFinishSwitch(nullptr, &w.schedulerBottom, &w.schedulerSize);
    }
    fiberEntry();
    Worker& w = tWorker;
    asanStartSwitch(nullptr, w.schedulerBottom, w.schedulerSize);  // this stack is finished
    tandemEmuSwitch(&w.running->sp, w.schedulerSp);  // never resumed: the fiber is done
    std::abort();
}
#endif

void release(Barrier& bar) {
    bar.arrived = 0;
    ++bar.generation;
}

void arrive(Barrier& bar) {
    Fiber& self = *tWorker.running;
    const uint64_t generation = bar.generation;
    if (++bar.arrived >= bar.live)
        release(bar);
    self.waitingOn = &bar;
    self.waitGeneration = generation;
    // Always yield, even when this thread released the barrier: the others run first.
    yieldToScheduler();
}

void leave(Barrier& bar) {
    --bar.live;
    if (bar.arrived > 0 && bar.arrived >= bar.live)
        release(bar);
}

// Runs every thread of one block to completion; false when they deadlocked.
bool runBlock(Worker& w, dim3 grid, dim3 block, uint3 blockIndex,
              const std::function<void()>& body) {
    const int n = static_cast<int>(block.x * block.y * block.z);
    if (!w.ensureStacks(n)) {
        recordError(cudaErrorMemoryAllocation);
        return false;
    }
    BlockRuntime& b = w.block;
    b.threads = n;
    b.fibers.resize(n);
    b.slots.assign(n, 0);
    b.blockBarrier = Barrier{0, 0, n};
    const int warps = (n + warpSizeValue - 1) / warpSizeValue;
    b.warpBarriers.assign(warps, Barrier{});
    for (int i = 0; i < warps; ++i)
        b.warpBarriers[i].live = b.lanesInWarp(i);
    w.body = &body;
    for (int i = 0; i < n; ++i) {
        Fiber& f = b.fibers[i];
        f.done = false;
        f.waitingOn = nullptr;
        f.thread.threadIndex =
            uint3{static_cast<unsigned>(i) % block.x, static_cast<unsigned>(i) / block.x % block.y,
                  static_cast<unsigned>(i) / (block.x * block.y)};
        f.thread.blockIndex = blockIndex;
        f.thread.blockDims = block;
        f.thread.gridDims = grid;
        f.thread.linear = i;
        f.thread.block = &b;
#if TANDEM_EMU_FAST_SWITCH
        f.sp = prepareStack(w.stacks[i] + Worker::pageBytes() + kFiberStackBytes);
        f.stackBottom = w.stacks[i] + Worker::pageBytes();
        f.asanFakeStack = nullptr;
#else
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = w.stacks[i] + Worker::pageBytes();
        f.context.uc_stack.ss_size = kFiberStackBytes;
        f.context.uc_link = &w.scheduler;
        makecontext(&f.context, fiberEntry, 0);
#endif
    }

    std::vector<int> order(n);
    for (int i = 0; i < n; ++i)
        order[i] = i;
    const auto sched = static_cast<Schedule>(gSchedule.load());
    if (sched == Schedule::Reverse)
        std::reverse(order.begin(), order.end());
    std::mt19937_64 rng(gScheduleSeed.load() ^ (uint64_t{blockIndex.x} * 0x9e3779b97f4a7c15ull) ^
                        (uint64_t{blockIndex.y} << 32) ^ blockIndex.z);

    int remaining = n;
    while (remaining > 0) {
        if (sched == Schedule::Shuffled)
            std::shuffle(order.begin(), order.end(), rng);
        bool progressed = false;
        for (int i : order) {
            Fiber& f = b.fibers[i];
            if (f.done)
                continue;
            if (f.waitingOn && f.waitingOn->generation == f.waitGeneration)
                continue;
            f.waitingOn = nullptr;
            w.running = &f;
            tCurrent = &f.thread;
#if TANDEM_EMU_FAST_SWITCH
            asanStartSwitch(&w.schedulerFakeStack, f.stackBottom, kFiberStackBytes);
            tandemEmuSwitch(&w.schedulerSp, f.sp);
            asanFinishSwitch(w.schedulerFakeStack, nullptr, nullptr);
#else
            swapcontext(&w.scheduler, &f.context);
#endif
            progressed = true;
            if (f.done) {
                --remaining;
                leave(b.blockBarrier);
                leave(b.warpBarriers[i / warpSizeValue]);
            }
        }
        if (!progressed) {
            // Every live thread waits at a barrier that can never open.
            recordError(cudaErrorLaunchFailure);
            tCurrent = nullptr;
            return false;
        }
    }
    tCurrent = nullptr;
    return true;
}

// ---- the block pool -----------------------------------------------------------------------------
class Pool {
  public:
    explicit Pool(int threads) { resize(threads); }
    ~Pool() { stop(); }

    void resize(int threads) {
        stop();
        uint64_t generation = 0;
        {
            std::lock_guard lock(m_mutex);
            m_stopping = false;
            generation = m_generation;
        }
        for (int i = 1; i < threads; ++i) {
            m_threads.emplace_back([this, generation] { workerLoop(generation); });
        }
    }

    void run(dim3 grid, dim3 block, const std::function<void()>& body) {
        std::lock_guard launchLock(m_launchMutex);
        const int64_t total = int64_t{grid.x} * grid.y * grid.z;
        {
            std::lock_guard lock(m_mutex);
            m_grid = grid;
            m_block = block;
            m_body = &body;
            m_total = total;
            m_next = 0;
            m_active = static_cast<int>(m_threads.size());
            ++m_generation;
        }
        m_wake.notify_all();
        work();
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [this] { return m_active == 0; });
    }

  private:
    void stop() {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
            ++m_generation;
        }
        m_wake.notify_all();
        for (auto& t : m_threads)
            t.join();
        m_threads.clear();
    }

    void work() {
        for (;;) {
            const int64_t index = m_next.fetch_add(1);
            if (index >= m_total)
                return;
            const uint3 blockIndex{static_cast<unsigned>(index % m_grid.x),
                                   static_cast<unsigned>(index / m_grid.x % m_grid.y),
                                   static_cast<unsigned>(index / (int64_t{m_grid.x} * m_grid.y))};
            if (!runBlock(tWorker, m_grid, m_block, blockIndex, *m_body)) {
                m_next.store(m_total);  // the launch failed: stop handing out blocks
                return;
            }
        }
    }

    // seen: the generation when the thread was made, so a launch that starts before the thread
    // first waits is not missed.
    void workerLoop(uint64_t seen) {
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_wake.wait(lock, [&] { return m_generation != seen; });
                seen = m_generation;
                if (m_stopping)
                    return;
            }
            work();
            std::lock_guard lock(m_mutex);
            if (--m_active == 0)
                m_done.notify_all();
        }
    }

    std::mutex m_launchMutex;
    std::mutex m_mutex;
    std::condition_variable m_wake, m_done;
    std::vector<std::thread> m_threads;
    bool m_stopping = false;
    uint64_t m_generation = 0;
    int m_active = 0;
    dim3 m_grid, m_block;
    const std::function<void()>* m_body = nullptr;
    int64_t m_total = 0;
    std::atomic<int64_t> m_next{0};
};

int defaultWorkers() {
    return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

Pool& pool() {
    static Pool instance(defaultWorkers());
    return instance;
}

// ---- device memory ------------------------------------------------------------------------------
std::mutex gMemoryMutex;
std::unordered_map<void*, size_t> gAllocations;
size_t gCapacity = size_t{4} << 30;
size_t gInUse = 0;

struct EmulatedCublasState {
    cudaStream_t stream = nullptr;
};

}  // namespace

struct EmulatedStream {};
struct EmulatedCublas : EmulatedCublasState {};

// ---- the kernel language ------------------------------------------------------------------------
ThreadContext& currentThread() {
    // Host code that touches threadIdx outside a kernel is a bug.
    if (!tCurrent)
        std::abort();
    return *tCurrent;
}

void syncThreads() {
    arrive(currentThread().block->blockBarrier);
}

void syncWarp() {
    ThreadContext& t = currentThread();
    arrive(t.block->warpBarriers[t.linear / warpSizeValue]);
}

int laneId() {
    return currentThread().linear % warpSizeValue;
}

uint64_t warpExchange(uint64_t mine, int srcLane) {
    ThreadContext& t = currentThread();
    BlockRuntime& b = *t.block;
    const int warp = t.linear / warpSizeValue;
    b.slots[t.linear] = mine;
    arrive(b.warpBarriers[warp]);  // every lane has published
    const bool valid = srcLane >= 0 && srcLane < b.lanesInWarp(warp);
    const uint64_t result = valid ? b.slots[warp * warpSizeValue + srcLane] : mine;
    arrive(b.warpBarriers[warp]);  // every lane has read before anyone publishes again
    return result;
}

unsigned activeLaneMask() {
    ThreadContext& t = currentThread();
    BlockRuntime& b = *t.block;
    const int warp = t.linear / warpSizeValue;
    unsigned mask = 0;
    for (int lane = 0; lane < b.lanesInWarp(warp); ++lane) {
        if (!b.fibers[warp * warpSizeValue + lane].done)
            mask |= 1u << lane;
    }
    return mask;
}

unsigned warpBallot(int predicate) {
    ThreadContext& t = currentThread();
    BlockRuntime& b = *t.block;
    const int warp = t.linear / warpSizeValue;
    b.slots[t.linear] = predicate != 0 ? 1 : 0;
    arrive(b.warpBarriers[warp]);
    unsigned mask = 0;
    for (int lane = 0; lane < b.lanesInWarp(warp); ++lane) {
        const int i = warp * warpSizeValue + lane;
        if (!b.fibers[i].done && b.slots[i] != 0)
            mask |= 1u << lane;
    }
    arrive(b.warpBarriers[warp]);
    return mask;
}

void launch(dim3 grid, dim3 block, cudaStream_t /*stream*/, const std::function<void()>& body) {
    const uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 ||
        threads > kMaxThreadsPerBlock || block.z > 64 || grid.y > kMaxGridY || grid.z > kMaxGridZ) {
        recordError(cudaErrorInvalidConfiguration);
        return;
    }
    if (tCurrent)
        std::abort();  // no launches from inside a kernel
    pool().run(grid, block, body);
}

void setSchedule(Schedule s, uint64_t seed) {
    gSchedule.store(static_cast<int>(s));
    gScheduleSeed.store(seed);
}
Schedule schedule() {
    return static_cast<Schedule>(gSchedule.load());
}

void setWorkerThreads(int threads) {
    pool().resize(std::clamp(threads, 1, 64));
}

void setDeviceMemoryCapacity(size_t bytes) {
    std::lock_guard lock(gMemoryMutex);
    gCapacity = bytes;
}
size_t deviceMemoryCapacity() {
    std::lock_guard lock(gMemoryMutex);
    return gCapacity;
}
size_t deviceMemoryInUse() {
    std::lock_guard lock(gMemoryMutex);
    return gInUse;
}

// ---- the runtime API ----------------------------------------------------------------------------
const char* cudaGetErrorName(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer:
            return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection:
            return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorNoDevice:
            return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorLaunchFailure:
            return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer:
            return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection:
            return "invalid copy direction for memcpy";
        case cudaErrorNoDevice:
            return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorLaunchFailure:
            return "unspecified launch failure (emulation: the threads of a block deadlocked at "
                   "barriers)";
    }
    return "unknown error";
}

cudaError_t cudaGetLastError() {
    std::lock_guard lock(gErrorMutex);
    const cudaError_t e = gLastError;
    gLastError = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError() {
    std::lock_guard lock(gErrorMutex);
    return gLastError;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
    if (!pointer)
        return cudaErrorInvalidValue;
    *pointer = nullptr;
    const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    {
        std::lock_guard lock(gMemoryMutex);
        if (gInUse + rounded > gCapacity)
            return cudaErrorMemoryAllocation;
        gInUse += rounded;
    }
    // Exactly the bytes asked for (256-byte aligned, like cudaMalloc), so ASan sees a kernel that
    // reads past the end; the accounting counts whole 256-byte granules.
    void* p = nullptr;
    if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0) {
        std::lock_guard lock(gMemoryMutex);
        gInUse -= rounded;
        return cudaErrorMemoryAllocation;
    }
    // Fresh device memory holds garbage: all-ones bytes are NaN floats and -1 ints, so code that
    // reads memory it never wrote shows it.
    std::memset(p, 0xff, std::max<size_t>(bytes, 1));
    std::lock_guard lock(gMemoryMutex);
    gAllocations[p] = rounded;
    *pointer = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
    if (!pointer)
        return cudaSuccess;
    {
        std::lock_guard lock(gMemoryMutex);
        auto it = gAllocations.find(pointer);
        if (it == gAllocations.end())
            return cudaErrorInvalidDevicePointer;
        gInUse -= it->second;
        gAllocations.erase(it);
    }
    std::free(pointer);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return cudaErrorInvalidMemcpyDirection;
    }
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
    if (bytes == 0)
        return cudaSuccess;
    if (!dst)
        return cudaErrorInvalidValue;
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
    return cudaMemset(dst, value, bytes);
}

cudaError_t cudaMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
    std::lock_guard lock(gMemoryMutex);
    if (freeBytes)
        *freeBytes = gCapacity > gInUse ? gCapacity - gInUse : 0;
    if (totalBytes)
        *totalBytes = gCapacity;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
    if (!stream)
        return cudaErrorInvalidValue;
    *stream = new EmulatedStream;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    return cudaPeekAtLastError();
}
cudaError_t cudaDeviceSynchronize() {
    return cudaPeekAtLastError();
}
cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaGetDevice(int* device) {
    if (!device)
        return cudaErrorInvalidValue;
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
    if (!count)
        return cudaErrorInvalidValue;
    *count = 1;
    return cudaSuccess;
}

// ---- cuBLAS -------------------------------------------------------------------------------------
cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new EmulatedCublas;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS:
            return "the operation completed successfully";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "the GPU program failed to execute";
    }
    return "unknown cuBLAS status";
}

namespace {

bool validOp(cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// op(X) as a dense row-major copy: rows x cols, element (r, c) at r * cols + c.
void gather(std::vector<float>& out, const float* X, int ld, bool transposed, int rows, int cols) {
    out.resize(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            // Column-major X: untransposed element (r, c) at r + c*ld; transposed at c + r*ld.
            out[static_cast<size_t>(r) * cols + c] = transposed
                                                         ? X[c + static_cast<int64_t>(r) * ld]
                                                         : X[r + static_cast<int64_t>(c) * ld];
        }
    }
}

// C = alpha op(A) op(B) + beta C for one matrix.
void gemmOne(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) {
    if (m == 0 || n == 0)
        return;
    std::vector<float> a, bt;
    gather(a, A, lda, ta, m, k);  // op(A): m x k, row i contiguous over p
    // op(B)^T: n x k, row j contiguous over p. op(B)^T of B is "B with the other transpose".
    gather(bt, B, ldb, !tb, n, k);
    auto columns = [&](int j0, int j1) {
        for (int j = j0; j < j1; ++j) {
            const float* bj = bt.data() + static_cast<size_t>(j) * k;
            for (int i = 0; i < m; ++i) {
                const float* ai = a.data() + static_cast<size_t>(i) * k;
                float acc[8] = {};
                int p = 0;
                for (; p + 8 <= k; p += 8) {
                    for (int q = 0; q < 8; ++q)
                        acc[q] += ai[p + q] * bj[p + q];
                }
                float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                            ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                for (; p < k; ++p)
                    sum += ai[p] * bj[p];
                float& c = C[i + static_cast<int64_t>(j) * ldc];
                c = beta == 0.0f ? alpha * sum : alpha * sum + beta * c;
            }
        }
    };
    const int64_t work = int64_t{m} * n * k;
    const int threads = work > (int64_t{1} << 22) ? defaultWorkers() : 1;
    if (threads <= 1) {
        columns(0, n);
        return;
    }
    std::vector<std::thread> pieces;
    for (int t = 0; t < threads; ++t) {
        const int j0 = static_cast<int>(int64_t{n} * t / threads);
        const int j1 = static_cast<int>(int64_t{n} * (t + 1) / threads);
        pieces.emplace_back(columns, j0, j1);
    }
    for (auto& p : pieces)
        p.join();
}

cublasStatus_t checkGemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                         int m, int n, int k, const float* alpha, const float* beta, int lda,
                         int ldb, int ldc) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!validOp(transa) || !validOp(transb) || m < 0 || n < 0 || k < 0 || !alpha || !beta) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int rowsA = transa == CUBLAS_OP_N ? m : k;
    const int rowsB = transb == CUBLAS_OP_N ? k : n;
    if (lda < std::max(1, rowsA) || ldb < std::max(1, rowsB) || ldc < std::max(1, m)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
    if (auto s = checkGemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc);
        s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    gemmOne(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A, lda, B, ldb, *beta, C,
            ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount) {
    if (auto s = checkGemm(handle, transa, transb, m, n, k, alpha, beta, lda, ldb, ldc);
        s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    if (batchCount < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < batchCount; ++i) {
        gemmOne(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A + i * strideA, lda,
                B + i * strideB, ldb, *beta, C + i * strideC, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace tandem::emu
