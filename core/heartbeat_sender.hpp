// The engine's heartbeats, on a thread of their own: for the unit in training (its step loop only
// records its progress here) and for every result waiting in the upload queue, so that a result
// queued behind a slow upload is not abandoned by the coordinator's heartbeat timeout while its
// worker is alive and uploading. Each unit is reported every half of its manifest's
// heartbeat_seconds; the reports that fall due together go out back to back, so they share one
// connection (the server keeps an idle one open for 5 s only, less than any period: a thread per
// idle connection is what the server cannot spare). A coordinator's "abandon" is kept per unit:
// the step loop stops the unit, and a queued result is asked again just before its upload
// (ResultUploader), which settles it. Internal to core/.
#pragma once

#include "clock.hpp"
#include "coordinator_api.hpp"
#include "ledger.hpp"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tandem::core {

// Half the heartbeat period a manifest asks for, at least 1 s.
int64_t heartbeatPeriodMs(int heartbeatSeconds);

struct HeartbeatTarget {
    int64_t workUnitId = 0;
    int64_t periodMs = 15000;
    net::ProgressReport report;
};

class HeartbeatSender {
  public:
    // The results waiting in the upload queue (called on the sender's thread, without its lock).
    using ListQueued = std::function<std::vector<HeartbeatTarget>()>;
    using Log = std::function<void(EventLevel, const std::string&)>;

    // pollMs: how often (real time) the thread looks at the clock for reports due.
    HeartbeatSender(CoordinatorApi* api, const Clock* clock, int64_t pollMs);
    ~HeartbeatSender();  // stop()
    HeartbeatSender(const HeartbeatSender&) = delete;
    HeartbeatSender& operator=(const HeartbeatSender&) = delete;

    // stopped: true once nothing may be sent any more (the engine's crash simulation).
    void start(ListQueued queued, Log log, std::function<bool()> stopped);
    void stop();

    // Engine thread: the unit in training and its latest progress. A new unit is reported at
    // once, later calls only replace the report.
    void setTraining(const HeartbeatTarget& target);
    void clearTraining();
    // The coordinator's reason once it answered "abandon" for the unit.
    std::optional<std::string> abandonReason(int64_t workUnitId) const;
    // The fewest steps a partial result of the unit may have, as the coordinator's latest answer
    // stated it (docs/protocol.md, "Partial results"); none before an answer or when it states
    // none. noteMinSteps records one from an answer the engine asked for itself.
    std::optional<int> minSteps(int64_t workUnitId) const;
    void noteMinSteps(int64_t workUnitId, int minSteps);

  private:
    struct Unit {
        int64_t periodMs = 0;
        net::ProgressReport report;
        int64_t dueMs = 0;
        std::optional<std::string> abandoned;
    };
    void run();
    // Under m_mu: the training unit and the queued results become m_units, with their due times.
    void mergeLocked(const std::vector<HeartbeatTarget>& queued, int64_t nowMs);
    void send(const HeartbeatTarget& target);

    CoordinatorApi* const m_api;
    const Clock* const m_clock;
    const int64_t m_pollMs;
    ListQueued m_queued;
    Log m_log;
    std::function<bool()> m_stopped;
    std::thread m_thread;

    mutable std::mutex m_mu;
    std::condition_variable m_cv;
    // Guarded by m_mu.
    bool m_stop = false;
    std::optional<HeartbeatTarget> m_training;
    std::map<int64_t, Unit> m_units;
    // Kept after a unit leaves m_units (a held unit sends no heartbeats); the newest few only.
    std::map<int64_t, int> m_minSteps;
};

}  // namespace tandem::core
