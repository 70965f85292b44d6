// The coordinator's figures for Prometheus (docs/operations.md): counters that the parts bump as
// events happen, and gauges read from the state when /metrics is scraped, written in the text
// exposition format 0.0.4. Counters start at zero with the process, as Prometheus expects.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::coord {

// What the coordinator's state says at the moment of a scrape.
struct MetricsGauges {
    int64_t runId = 0;
    std::string model;  // the run's model, as ModelConfig::describe() writes it
    int64_t parameters = 0;
    int64_t version = 0;        // the open round
    int64_t activeWorkers = 0;  // clients holding a unit with a live heartbeat
    int64_t assignedUnits = 0;  // units assigned now (training or uploading)
    int64_t uploadsInFlight = 0;
    int64_t uploadSlots = 0;
    int64_t roundContributors = 0;  // results accepted into the open round
    int64_t roundQuorum = 0;        // results that close it
    std::optional<double> validationLoss;
    int64_t validationLossRound = 0;
    int64_t heldResults = 0;     // results waiting for their twin's (replication.hpp)
    int64_t blockedClients = 0;  // clients blocked by replication spot-checks
    int64_t databaseBytes = 0;   // coordinator.db with its -wal file, or pg_database_size
    int64_t diskFreeBytes = -1;  // free space of the state directory's file system (-1: unknown)
    int64_t diskTotalBytes = -1;
};

class Metrics {
  public:
    // Upper bounds of the round-close histogram, in seconds.
    static constexpr std::array<double, 10> kCloseBuckets = {0.01, 0.05, 0.1, 0.5, 1,
                                                             2,    5,    10,  30,  120};

    void countRegistration() { ++m_registrations; }
    void countAssigned() { ++m_assigned; }
    void countHeartbeat() { ++m_heartbeats; }
    void countAccepted(int64_t tokens);
    // reason: the refusal's code (a fixed word of docs/protocol.md, never request text).
    void countRefused(std::string_view reason);
    // reason: released, timeout, stale; n units at once.
    void countAbandoned(std::string_view reason, int64_t n = 1);
    void countRoundClosed(double seconds);
    // Replication spot-checks: a result held for its twin, a pair decided, a client blocked.
    void countHeld() { ++m_held; }
    void countTwinCheck(bool agreed) { ++(agreed ? m_twinsAgreed : m_twinsDisagreed); }
    void countBlocked() { ++m_blocked; }
    void addUploadBytes(int64_t n) { m_uploadBytes += n; }
    // kind: weights or data.
    void addDownloadBytes(std::string_view kind, int64_t n);
    void countResponse(int httpStatus);

    // The exposition text: these counters, the gauges and the process's own figures.
    std::string render(const MetricsGauges& gauges) const;

  private:
    using Labelled = std::map<std::string, int64_t, std::less<>>;
    static void bump(Labelled& map, std::string_view label, int64_t n);

    std::atomic<int64_t> m_registrations{0}, m_assigned{0}, m_heartbeats{0}, m_accepted{0},
        m_acceptedTokens{0}, m_uploadBytes{0}, m_held{0}, m_twinsAgreed{0}, m_twinsDisagreed{0},
        m_blocked{0};
    mutable std::mutex m_mu;  // guards what follows
    Labelled m_refused, m_abandoned, m_downloadBytes, m_responses;
    std::array<int64_t, kCloseBuckets.size()> m_closeBuckets{};  // not cumulative
    int64_t m_closeCount = 0;
    double m_closeSum = 0;
};

}  // namespace tandem::coord
