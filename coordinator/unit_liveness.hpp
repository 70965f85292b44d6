// Liveness of assigned work units: what heartbeats (progress reports) say, kept in memory so that
// a heartbeat costs no database write (each write is a synced commit, about 300 a second on a
// plain disk). The coordinator writes the changed values to work_units in one transaction every
// kLivenessFlushSeconds and when it stops; a crash loses at most that much, and only liveness:
// on start every assigned unit gets a fresh grace period (coordinator_impl.hpp,
// restoreLiveness). The database's work_units.state stays the only record of which units are
// assigned; this table follows it (retain) and is read for everything about liveness: timeouts,
// stall reclaim, active workers, GET /v1/work. Not thread-safe: the coordinator holds its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace tandem::coord {

// Seconds between the writes of changed liveness to the database.
inline constexpr int64_t kLivenessFlushSeconds = 10;
// A front end's (front_end.cpp): the clock holder in another process reads what it wrote.
inline constexpr int64_t kFrontLivenessFlushSeconds = 1;

// A heartbeat's figures as another process wrote them to work_units.
struct UnitReport {
    int64_t step = 0;
    double loss = 0;
    double tokensPerSecond = 0;
};

struct UnitPulse {
    int64_t clientId = 0;
    int64_t innerSteps = 0;     // H: a unit at its last step is trained, never stalled
    int64_t heartbeatUnix = 0;  // the last sign of life: assignment, heartbeat, repeated request
    // From heartbeats: the last reported step, loss and throughput.
    bool reported = false;
    int64_t step = 0;
    std::optional<double> loss;
    double tokensPerSecond = 0;
    // Stall reclaim: the highest step reported and since when (from the first heartbeat).
    int64_t bestStep = 0;
    int64_t bestStepSinceUnix = 0;
    bool changed = false;  // since the last flush
};

class UnitLiveness {
  public:
    // A sign of life of an assigned unit (its assignment, a repeated request for it, or a start
    // that found it assigned): alive from nowUnix. step: the last step known, for a unit not yet
    // tracked.
    void touch(int64_t workUnitId, int64_t clientId, int64_t innerSteps, int64_t nowUnix,
               int64_t step = 0);
    // A heartbeat of a tracked unit (touch it first).
    void report(int64_t workUnitId, int64_t step, double loss, double tokensPerSecond,
                int64_t nowUnix);
    // A newer sign of life that another process received (a front end's heartbeats, read from
    // the database): taken as if reported here at heartbeatUnix, but not marked changed, since
    // the database has it already.
    void merge(int64_t workUnitId, int64_t clientId, int64_t innerSteps, int64_t heartbeatUnix,
               const std::optional<UnitReport>& reported);
    const UnitPulse* find(int64_t workUnitId) const;
    void forget(int64_t workUnitId);
    // Keeps only these units: the ones the database says are assigned.
    void retain(const std::set<int64_t>& assigned);
    const std::map<int64_t, UnitPulse>& units() const { return m_units; }

    // The units changed since the last flush, and marking them written.
    std::vector<std::pair<int64_t, UnitPulse>> changed() const;
    void markWritten();

  private:
    std::map<int64_t, UnitPulse> m_units;
};

}  // namespace tandem::coord
