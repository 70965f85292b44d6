// The results waiting for their receipt, and the thread that sends them: one job at a time from
// the front, in order, so a result is never overtaken by a later one (the shape of qBittorrent's
// resume-data storage: a worker thread with a job queue behind a small interface). What a job
// does is the runner's business (core/result_uploader.hpp); the queue only says when the front
// job runs again: at once, after one poll interval, or not before an instant of the clock.
//
// The jobs live under a mutex the owner shares (the engine's one mutex), so that the owner's
// snapshot and the queue's length are read together; methods named ...Locked expect it held.
// Internal to core/.
#pragma once

#include "unit_files.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::core {

class UploadQueue {
  public:
    // What became of the front job after one run.
    struct Verdict {
        enum class Next {
            Now,      // look at the front again at once (the runner removed a settled job itself)
            RetryAt,  // keep it; run it again once the clock reaches atMs
            Hold,     // keep it; run it again after one poll interval
            Stop,     // end the thread; the job stays
        };
        Next next = Next::Now;
        int64_t atMs = 0;

        static Verdict now() { return {Next::Now, 0}; }
        static Verdict retryAt(int64_t atMs) { return {Next::RetryAt, atMs}; }
        static Verdict hold() { return {Next::Hold, 0}; }
        static Verdict stop() { return {Next::Stop, 0}; }
    };
    // Runs on the queue's thread, without the mutex, with a copy of the front job.
    using Runner = std::function<Verdict(const PendingResult& front)>;

    // nowMs: the clock that RetryAt is read against; pollMs: the longest wait between looks.
    UploadQueue(std::mutex& mu, std::condition_variable& cv, std::function<int64_t()> nowMs,
                int64_t pollMs);
    ~UploadQueue();  // stop()
    UploadQueue(const UploadQueue&) = delete;
    UploadQueue& operator=(const UploadQueue&) = delete;

    void start(Runner runner);
    // Asks the thread to end once the job it runs returns, and joins it. Jobs not run stay.
    void stop();

    // Adds a job at the back and wakes the thread.
    void push(PendingResult job);

    // With the mutex held.
    void pushLocked(PendingResult job);  // the caller wakes the thread (cv) after unlocking
    size_t sizeLocked() const { return m_jobs.size(); }
    const std::deque<PendingResult>& jobsLocked() const { return m_jobs; }
    bool stopRequestedLocked() const { return m_stop; }
    // The front job when it is still workUnitId's, else null.
    PendingResult* frontLocked(int64_t workUnitId);
    // Removes the front job when it is workUnitId's: how a runner settles it.
    void popLocked(int64_t workUnitId);

  private:
    void run();

    std::mutex& m_mu;
    std::condition_variable& m_cv;
    const std::function<int64_t()> m_nowMs;
    const int64_t m_pollMs;
    Runner m_runner;
    std::thread m_thread;
    // Guarded by m_mu.
    std::deque<PendingResult> m_jobs;
    bool m_stop = false;
    // Queue thread only.
    int64_t m_notBeforeMs = 0;
};

}  // namespace tandem::core
