// Measures the link to the coordinator with its speed-test endpoints (docs/protocol.md): latency
// (time to the first answer byte of tiny requests), download and upload in Mbit/s. Sizes and
// time are bounded; a direction cut short by the time limit is measured on what arrived.
#pragma once

#include "http_client.hpp"

#include <chrono>
#include <cstdint>

namespace tandem::net {

struct BandwidthProbeConfig {
    int64_t downloadBytes = 8 << 20;  // at most 64 MiB (the coordinator's bound)
    int64_t uploadBytes = 4 << 20;
    int latencySamples = 5;
    std::chrono::milliseconds maxPerDirection{10000};  // each transfer stops after this long
};

struct BandwidthSample {
    double downMbitPerSecond = 0;
    double upMbitPerSecond = 0;
    double latencyMs = 0;  // median request to first answer byte, on a warm connection
    int64_t bytesDown = 0, bytesUp = 0;
    double secondsDown = 0, secondsUp = 0;
};

// GET /v1/speedtest?bytes=1 (latency), GET /v1/speedtest?bytes=N (down), POST /v1/speedtest with
// N random bytes (up). Uses the client's rate limits, proxy and TLS settings; no retries.
HttpResult<BandwidthSample> probeBandwidth(HttpClient& http,
                                           const BandwidthProbeConfig& config = {});

}  // namespace tandem::net
