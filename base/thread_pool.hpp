// A fixed pool of worker threads for data-parallel loops. Work is split statically (task i of n
// always covers the same range), so results are identical run after run for a given thread
// count. run() does not allocate.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
  public:
    // threads <= 0 means one per hardware thread. The calling thread is one of them.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int threads() const { return static_cast<int>(m_workers.size()) + 1; }

    // Calls fn(task) for task in [0, tasks), spread over the threads; returns when all are done.
    template <class Fn>
    void run(int tasks, Fn&& fn) {
        if (tasks <= 0)
            return;
        if (tasks == 1 || m_workers.empty()) {
            for (int i = 0; i < tasks; ++i)
                fn(i);
            return;
        }
        dispatch(tasks, &fn, [](void* f, int task) { (*static_cast<Fn*>(f))(task); });
    }

    // Calls fn(begin, end) on contiguous pieces of [0, count), one piece per thread at most,
    // each at least minChunk long.
    template <class Fn>
    void parallelFor(int64_t count, int64_t minChunk, Fn&& fn) {
        if (count <= 0)
            return;
        const int64_t maxPieces = (count + minChunk - 1) / std::max<int64_t>(minChunk, 1);
        const int pieces = static_cast<int>(std::min<int64_t>(threads(), maxPieces));
        run(pieces, [&](int piece) {
            const int64_t begin = count * piece / pieces;
            const int64_t end = count * (piece + 1) / pieces;
            fn(begin, end);
        });
    }

  private:
    using Trampoline = void (*)(void*, int);
    void dispatch(int tasks, void* fn, Trampoline call);
    void workerLoop(int index);
    void runTasks();

    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    uint64_t m_generation = 0;
    bool m_stop = false;
    void* m_fn = nullptr;
    Trampoline m_call = nullptr;
    int m_tasks = 0;
    int m_nextTask = 0;
    int m_pending = 0;
};

}  // namespace tandem
