// The heartbeat thread: reports due for the training unit and the queued results.
#include "heartbeat_sender.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace tandem::core {

namespace {
// After a failed report: try again soon, still well inside any heartbeat timeout.
constexpr int64_t kRetryMs = 5000;
}  // namespace

int64_t heartbeatPeriodMs(int heartbeatSeconds) {
    return std::max<int64_t>(1000, int64_t{heartbeatSeconds} * 1000 / 2);
}

HeartbeatSender::HeartbeatSender(CoordinatorApi* api, const Clock* clock, int64_t pollMs)
    : m_api(api), m_clock(clock), m_pollMs(std::max<int64_t>(1, pollMs)) {}

HeartbeatSender::~HeartbeatSender() {
    stop();
}

void HeartbeatSender::start(ListQueued queued, Log log, std::function<bool()> stopped) {
    if (m_thread.joinable())
        return;
    m_queued = std::move(queued);
    m_log = std::move(log);
    m_stopped = std::move(stopped);
    {
        std::lock_guard lock(m_mu);
        m_stop = false;
    }
    m_thread = std::thread([this] { run(); });
}

void HeartbeatSender::stop() {
    {
        std::lock_guard lock(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable() && m_thread.get_id() != std::this_thread::get_id())
        m_thread.join();
}

void HeartbeatSender::setTraining(const HeartbeatTarget& target) {
    bool isNew;
    {
        std::lock_guard lock(m_mu);
        isNew = !m_training || m_training->workUnitId != target.workUnitId;
        m_training = target;
    }
    if (isNew)
        m_cv.notify_all();
}

void HeartbeatSender::clearTraining() {
    std::lock_guard lock(m_mu);
    m_training.reset();
}

std::optional<std::string> HeartbeatSender::abandonReason(int64_t workUnitId) const {
    std::lock_guard lock(m_mu);
    const auto it = m_units.find(workUnitId);
    return it == m_units.end() ? std::nullopt : it->second.abandoned;
}

std::optional<int> HeartbeatSender::minSteps(int64_t workUnitId) const {
    std::lock_guard lock(m_mu);
    const auto it = m_minSteps.find(workUnitId);
    return it == m_minSteps.end() ? std::nullopt : std::optional<int>(it->second);
}

void HeartbeatSender::noteMinSteps(int64_t workUnitId, int minSteps) {
    if (minSteps <= 0)
        return;
    std::lock_guard lock(m_mu);
    m_minSteps[workUnitId] = minSteps;
    while (m_minSteps.size() > 8)  // ids grow: the oldest units go first
        m_minSteps.erase(m_minSteps.begin());
}

void HeartbeatSender::mergeLocked(const std::vector<HeartbeatTarget>& queued, int64_t nowMs) {
    std::set<int64_t> live;
    auto upsert = [&](const HeartbeatTarget& t) {
        if (!live.insert(t.workUnitId).second)
            return;  // the unit just trained is both; its training entry came first
        auto [it, fresh] = m_units.try_emplace(t.workUnitId);
        if (fresh)
            it->second.dueMs = nowMs;
        it->second.periodMs = t.periodMs;
        it->second.report = t.report;
    };
    if (m_training)
        upsert(*m_training);
    for (const auto& q : queued)
        upsert(q);
    std::erase_if(m_units, [&](const auto& kv) { return !live.count(kv.first); });
}

void HeartbeatSender::send(const HeartbeatTarget& t) {
    auto reply = m_api->reportProgress(t.workUnitId, t.report);
    if (reply)
        noteMinSteps(t.workUnitId, reply->minSteps);
    const int64_t now = m_clock->nowMs();
    {
        std::lock_guard lock(m_mu);
        const auto it = m_units.find(t.workUnitId);
        if (it != m_units.end()) {
            if (!reply)
                it->second.dueMs = now + std::min(t.periodMs, kRetryMs);
            else if (reply->action == "abandon")
                it->second.abandoned =
                    reply->reason.empty() ? "the coordinator abandoned it" : reply->reason;
            else
                it->second.dueMs = now + t.periodMs;
        }
    }
    if (!reply && m_log)
        m_log(EventLevel::Warning, "heartbeat of work unit " + std::to_string(t.workUnitId) +
                                       " failed: " + reply.error().message);
}

void HeartbeatSender::run() {
    for (;;) {
        const std::vector<HeartbeatTarget> queued =
            m_queued ? m_queued() : std::vector<HeartbeatTarget>{};
        std::vector<HeartbeatTarget> due;
        {
            std::unique_lock lock(m_mu);
            if (m_stop)
                return;
            const int64_t now = m_clock->nowMs();
            mergeLocked(queued, now);
            for (const auto& [id, u] : m_units)
                if (!u.abandoned && u.dueMs <= now)
                    due.push_back({id, u.periodMs, u.report});
        }
        for (const auto& t : due) {
            if (m_stopped && m_stopped())
                return;
            {
                std::lock_guard lock(m_mu);
                if (m_stop)
                    return;
            }
            send(t);
        }
        std::unique_lock lock(m_mu);
        if (m_stop)
            return;
        m_cv.wait_for(lock, std::chrono::milliseconds(m_pollMs));
    }
}

}  // namespace tandem::core
