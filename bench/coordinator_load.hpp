// tandem-bench-coordinator's simulated workers: N workers with their own keys and bearer tokens,
// driven over HTTPS with keep-alive by a bounded number of client threads (each thread one
// connection, its workers in turn), through the phases of a round: register, request work,
// heartbeats, upload a result (paced to a per-connection rate, as a slow home uplink would).
#pragma once

#include "crypto.hpp"

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::bench {

struct LoadSettings {
    std::string host = "127.0.0.1";
    int port = 0;
    std::filesystem::path caCert;  // the coordinator's self-signed certificate, or its CA
    int workers = 100;
    int clientThreads = 16;           // connections for registration, work requests and heartbeats
    int uploaders = 8;                // connections uploading at once
    double uploadBytesPerSecond = 0;  // per connection; 0: as fast as it goes
    int64_t parameters = 0;           // P of the run's model
};

struct SimWorker {
    net::SigningKey key;
    int64_t clientId = 0;
    std::string token;
    int64_t workUnitId = 0;
    int innerSteps = 0, batch = 0, seqLen = 0;
    int64_t step = 0;  // reported so far
};

// What one phase did: requests answered as expected, in how long.
struct PhaseResult {
    int64_t done = 0;
    int64_t errors = 0;   // no answer, or an unexpected status
    int64_t retries = 0;  // answered "busy, retry later" (503/429) and sent again
    double seconds = 0;
    double latencyP50Ms = 0, latencyP99Ms = 0;
    double perSecond() const { return seconds > 0 ? static_cast<double>(done) / seconds : 0; }
};

class Load {
  public:
    explicit Load(LoadSettings settings);

    PhaseResult registerAll();  // POST /v1/clients for every worker
    PhaseResult requestWork();  // POST /v1/work once per worker
    // POST /v1/work/{id}/progress round-robin over the workers for `seconds`.
    PhaseResult heartbeats(double seconds);
    // PUT /v1/results/{id} once per worker holding a unit; peakInFlight: the most at once.
    PhaseResult uploadAll(int* peakInFlight);

    // The first error answers seen (for the report), at most a few.
    const std::vector<std::string>& errorSamples() const { return m_errorSamples; }

  private:
    void noteError(const std::string& what);

    LoadSettings m_s;
    std::vector<SimWorker> m_workers;
    std::mutex m_errorMu;
    std::vector<std::string> m_errorSamples;
};

}  // namespace tandem::bench
