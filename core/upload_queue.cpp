// The upload queue's thread: the front job, one at a time, until stopped.
#include "upload_queue.hpp"

#include <algorithm>
#include <chrono>

namespace tandem::core {

UploadQueue::UploadQueue(std::mutex& mu, std::condition_variable& cv,
                         std::function<int64_t()> nowMs, int64_t pollMs)
    : m_mu(mu), m_cv(cv), m_nowMs(std::move(nowMs)), m_pollMs(std::max<int64_t>(1, pollMs)) {}

UploadQueue::~UploadQueue() {
    stop();
}

void UploadQueue::start(Runner runner) {
    if (m_thread.joinable())
        return;
    m_runner = std::move(runner);
    m_thread = std::thread([this] { run(); });
}

void UploadQueue::stop() {
    {
        std::lock_guard lock(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable() && m_thread.get_id() != std::this_thread::get_id())
        m_thread.join();
}

void UploadQueue::push(PendingResult job) {
    {
        std::lock_guard lock(m_mu);
        pushLocked(std::move(job));
    }
    m_cv.notify_all();
}

void UploadQueue::pushLocked(PendingResult job) {
    m_jobs.push_back(std::move(job));
}

PendingResult* UploadQueue::frontLocked(int64_t workUnitId) {
    if (m_jobs.empty() || m_jobs.front().workUnitId != workUnitId)
        return nullptr;
    return &m_jobs.front();
}

void UploadQueue::popLocked(int64_t workUnitId) {
    if (frontLocked(workUnitId))
        m_jobs.pop_front();
}

void UploadQueue::run() {
    const auto poll = std::chrono::milliseconds(m_pollMs);
    for (;;) {
        PendingResult job;
        {
            std::unique_lock lock(m_mu);
            if (m_stop)
                return;
            if (m_jobs.empty() || m_nowMs() < m_notBeforeMs) {
                m_cv.wait_for(lock, poll);
                continue;
            }
            job = m_jobs.front();
        }
        const Verdict v = m_runner(job);
        switch (v.next) {
            case Verdict::Next::Now:
                m_notBeforeMs = 0;
                break;
            case Verdict::Next::RetryAt:
                m_notBeforeMs = v.atMs;
                break;
            case Verdict::Next::Hold: {
                std::unique_lock lock(m_mu);
                m_cv.wait_for(lock, poll);
                break;
            }
            case Verdict::Next::Stop:
                return;
        }
    }
}

}  // namespace tandem::core
