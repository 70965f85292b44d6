#include "round_aggregator.hpp"

#include "payload_file.hpp"

namespace tandem::coord {

RoundAggregator::RoundAggregator(std::span<float> sum, uint32_t encoding, ThreadPool* pool,
                                 bool withThread)
    : m_sum(sum), m_encoding(encoding), m_pool(pool) {
    if (withThread)
        m_thread = std::thread([this] { run(); });
}

RoundAggregator::~RoundAggregator() {
    {
        std::lock_guard lock(m_mu);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
}

void RoundAggregator::addNow(const Job& job) {
    auto st = accumulatePayload(m_sum, job.payload, m_encoding, job.weight, std::nullopt, m_pool);
    std::lock_guard lock(m_mu);
    if (!st && m_failure)
        m_failure = makeError("adding " + job.payload.string() +
                              " to the round sum: " + st.error().message);
}

void RoundAggregator::add(std::filesystem::path payload, float weight) {
    Job job{std::move(payload), weight};
    if (!m_thread.joinable())
        return addNow(job);
    {
        std::lock_guard lock(m_mu);
        m_jobs.push_back(std::move(job));
    }
    m_wake.notify_one();
}

Status RoundAggregator::drain() {
    std::unique_lock lock(m_mu);
    m_idle.wait(lock, [&] { return m_stop || (m_jobs.empty() && !m_busy); });
    if (!m_jobs.empty() || m_busy)
        return makeError("the aggregator stopped before the round sum was complete");
    return m_failure;
}

int64_t RoundAggregator::queued() const {
    std::lock_guard lock(m_mu);
    return static_cast<int64_t>(m_jobs.size()) + (m_busy ? 1 : 0);
}

void RoundAggregator::run() {
    std::unique_lock lock(m_mu);
    for (;;) {
        m_wake.wait(lock, [&] { return m_stop || !m_jobs.empty(); });
        if (m_stop)
            break;
        Job job = std::move(m_jobs.front());
        m_jobs.pop_front();
        m_busy = true;
        lock.unlock();
        addNow(job);
        lock.lock();
        m_busy = false;
        if (m_jobs.empty())
            m_idle.notify_all();
    }
    m_idle.notify_all();
}

}  // namespace tandem::coord
