#include "thread_pool.hpp"

#include <algorithm>

namespace tandem {

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0)
        threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < threads; ++i)
        m_workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    for (auto& w : m_workers)
        w.join();
}

void ThreadPool::runTasks() {
    // Tasks are handed out one at a time; which thread runs a task does not change its result.
    for (;;) {
        int task;
        {
            std::lock_guard lock(m_mutex);
            if (m_nextTask >= m_tasks)
                return;
            task = m_nextTask++;
        }
        m_call(m_fn, task);
        std::lock_guard lock(m_mutex);
        if (--m_pending == 0)
            m_done.notify_all();
    }
}

void ThreadPool::dispatch(int tasks, void* fn, Trampoline call) {
    {
        std::lock_guard lock(m_mutex);
        m_fn = fn;
        m_call = call;
        m_tasks = tasks;
        m_nextTask = 0;
        m_pending = tasks;
        ++m_generation;
    }
    m_wake.notify_all();
    runTasks();
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [this] { return m_pending == 0; });
}

void ThreadPool::workerLoop(int) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
            if (m_stop)
                return;
            seen = m_generation;
        }
        runTasks();
    }
}

}  // namespace tandem
