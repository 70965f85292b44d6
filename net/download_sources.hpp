// Where a content-addressed file (protocol v4) is fetched from: the manifest lists several URLs
// for the same bytes (the coordinator's own, then its mirrors). DownloadSources orders them for
// the next download from what earlier downloads measured, per server (scheme, host and port):
// servers never tried first, in the manifest's order, so each is measured once; then the
// measured ones, fastest first; a server whose last download failed goes last. Speeds are an
// average over downloads of at least kMinMeasuredBytes (bytes over wall time): a small data
// range's time is mostly set-up and latency and says little about the next weights download.
// Thread-safe; in memory (a restarted worker measures again).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tandem::net {

class DownloadSources {
  public:
    // The URLs in the order to try them (a stable sort of the manifest's order).
    std::vector<std::string> order(const std::vector<std::string>& urls) const;
    // bytes moved over the network in `seconds`; a download of fewer than kMinMeasuredBytes
    // (or none: the file was there) leaves the speed as it was, but clears a failure.
    void recordSuccess(const std::string& url, int64_t bytes, double seconds);
    void recordFailure(const std::string& url);
    // The server's average speed, if measured.
    std::optional<double> bytesPerSecond(const std::string& url) const;

    static constexpr int64_t kMinMeasuredBytes = 256 * 1024;
    // Weight of the newest download in the average.
    static constexpr double kNewWeight = 0.5;

    // "https://host:port" of an https:// URL, "" for a path (the coordinator itself).
    static std::string serverOf(const std::string& url);

  private:
    struct Server {
        std::optional<double> bytesPerSecond;
        bool failed = false;
    };
    mutable std::mutex m_mutex;
    std::map<std::string, Server> m_servers;
};

}  // namespace tandem::net
