#include "bandwidth_probe.hpp"

#include <algorithm>
#include <vector>

namespace tandem::net {

namespace {

constexpr int64_t kMaxSpeedtestBytes = 64 << 20;

// Body bytes and seconds of a transfer, from libcurl's timings when it completed, else from the
// progress seen until the time limit cancelled it.
struct Measured {
    int64_t bytes = 0;
    double seconds = 0;
};

}  // namespace

HttpResult<BandwidthSample> probeBandwidth(HttpClient& http, const BandwidthProbeConfig& config) {
    using Clock = std::chrono::steady_clock;
    const int64_t down = std::clamp<int64_t>(config.downloadBytes, 1, kMaxSpeedtestBytes);
    const int64_t up = std::clamp<int64_t>(config.uploadBytes, 1, kMaxSpeedtestBytes);
    BandwidthSample sample;

    // Latency: the first request also opens the connection; later ones reuse it.
    std::vector<double> rtts;
    for (int i = 0; i < std::max(1, config.latencySamples) + 1; ++i) {
        auto r = http.get("/v1/speedtest?bytes=1", 16);
        if (!r)
            return r.error();
        if (i > 0)
            rtts.push_back((r->secondsStartTransfer - r->secondsPretransfer) * 1000.0);
    }
    std::sort(rtts.begin(), rtts.end());
    sample.latencyMs = rtts[rtts.size() / 2];

    // A transfer stops at the time limit; what arrived until then is the measurement.
    auto timed = [&](bool upload, Measured& m) {
        const auto start = Clock::now();
        return [&m, start, limit = config.maxPerDirection, upload](const TransferProgress& p) {
            const double s = std::chrono::duration<double>(Clock::now() - start).count();
            if (p.upload == upload) {
                m.bytes = p.bytesDone;
                m.seconds = s;
            }
            return Clock::now() - start > limit ? ProgressAction::Cancel : ProgressAction::Continue;
        };
    };
    auto rate = [](int64_t bytes, double seconds) {
        return seconds > 0 ? static_cast<double>(bytes) * 8.0 / seconds / 1e6 : 0.0;
    };

    {
        Measured m;
        auto r =
            http.get("/v1/speedtest?bytes=" + std::to_string(down), down + 1, {}, timed(false, m));
        if (r) {
            m.bytes = static_cast<int64_t>(r->body.size());
            m.seconds = r->secondsTotal - r->secondsPretransfer;
        } else if (r.error().kind != HttpErrorKind::Cancelled) {
            return r.error();
        }
        sample.bytesDown = m.bytes;
        sample.secondsDown = m.seconds;
        sample.downMbitPerSecond = rate(m.bytes, m.seconds);
    }
    {
        std::vector<uint8_t> body = randomBytes(static_cast<size_t>(up));
        Measured m;
        auto r = http.upload("POST", "/v1/speedtest", UploadBody{std::span<const uint8_t>(body)},
                             "application/octet-stream", {}, timed(true, m), RetryPolicy::none());
        if (r) {
            m.bytes = r->bytesUploaded;
            m.seconds = r->secondsTotal - r->secondsPretransfer;
        } else if (r.error().kind != HttpErrorKind::Cancelled) {
            return r.error();
        }
        sample.bytesUp = m.bytes;
        sample.secondsUp = m.seconds;
        sample.upMbitPerSecond = rate(m.bytes, m.seconds);
    }
    return sample;
}

}  // namespace tandem::net
