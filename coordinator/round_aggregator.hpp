// The one aggregator of the open round: accepted results are added into the round sum from
// their stored payload files (rounds/N/<wu>.f16, in the run's encoding), one at a time and in the
// order they were accepted, so the sum's float rounding is the same in every run and after a
// restart (which re-adds the stored files in the same order). Commits only queue a file (a few
// microseconds under the coordinator's lock); this thread reads it back in 1 MiB chunks
// (payload_file.hpp), so no upload holds P floats. A round close drains the queue before its outer
// step.
//
// Dimensions: P parameters.
#pragma once

#include "expected.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <span>
#include <thread>

namespace tandem {
class ThreadPool;
}

namespace tandem::coord {

class RoundAggregator {
  public:
    // sum: (P) the round sum, touched only by this aggregator between drain()s; encoding: the
    // run's result encoding (net/result_format.hpp) of every payload added. withThread false:
    // add() does the work at once (tests drive the coordinator without threads).
    RoundAggregator(std::span<float> sum, uint32_t encoding, ThreadPool* pool, bool withThread);
    ~RoundAggregator();  // stops; what is still queued is not added (a restart re-adds it)
    RoundAggregator(const RoundAggregator&) = delete;
    RoundAggregator& operator=(const RoundAggregator&) = delete;

    // sum += weight * decode(payload), after everything added before.
    void add(std::filesystem::path payload, float weight);
    // Waits until every added payload is in the sum. The first failure (a file that cannot be
    // read back) stays: the sum is then incomplete until a restart rebuilds it.
    Status drain();
    int64_t queued() const;  // payloads not yet in the sum

  private:
    struct Job {
        std::filesystem::path payload;
        float weight = 0;
    };
    void run();
    void addNow(const Job& job);

    std::span<float> m_sum;
    uint32_t m_encoding;
    ThreadPool* m_pool;
    mutable std::mutex m_mu;
    std::condition_variable m_wake, m_idle;
    std::deque<Job> m_jobs;
    bool m_busy = false, m_stop = false;
    Status m_failure;
    std::thread m_thread;
};

}  // namespace tandem::coord
