// The CUDA emulation's kernel side: fibers for the threads of a block, barriers, warp exchange,
// the block scheduler and launches. The runtime API is in emulated_runtime.cpp, the cuBLAS
// stand-in in emulated_cublas.cpp. See cuda_emulation.hpp.
#include "cuda_emulation.hpp"
#include "emulation_internal.hpp"

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

Pool& pool() {
    static Pool instance(defaultWorkers());
    return instance;
}

}  // namespace

int defaultWorkers() {
    return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

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

}  // namespace tandem::emu
