#include "download_sources.hpp"

#include <algorithm>
#include <cctype>

namespace tandem::net {

std::string DownloadSources::serverOf(const std::string& url) {
    const size_t scheme = url.find("://");
    if (scheme == std::string::npos)
        return {};
    const size_t pathStart = url.find('/', scheme + 3);
    std::string server = url.substr(0, pathStart);
    std::transform(server.begin(), server.end(), server.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return server;
}

std::vector<std::string> DownloadSources::order(const std::vector<std::string>& urls) const {
    // Rank 0: never tried; 1: measured (then by speed); 2: failed last time.
    struct Entry {
        int rank;
        double speed;
        size_t position;
    };
    std::vector<Entry> entries;
    {
        std::lock_guard lock(m_mutex);
        for (size_t i = 0; i < urls.size(); ++i) {
            auto it = m_servers.find(serverOf(urls[i]));
            if (it == m_servers.end() || (!it->second.failed && !it->second.bytesPerSecond))
                entries.push_back({0, 0, i});
            else if (it->second.failed)
                entries.push_back({2, 0, i});
            else
                entries.push_back({1, *it->second.bytesPerSecond, i});
        }
    }
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.rank != b.rank)
            return a.rank < b.rank;
        return a.rank == 1 && a.speed > b.speed;
    });
    std::vector<std::string> out;
    out.reserve(urls.size());
    for (const Entry& e : entries)
        out.push_back(urls[e.position]);
    return out;
}

void DownloadSources::recordSuccess(const std::string& url, int64_t bytes, double seconds) {
    std::lock_guard lock(m_mutex);
    Server& s = m_servers[serverOf(url)];
    s.failed = false;
    if (bytes < kMinMeasuredBytes || seconds <= 0)
        return;
    const double speed = static_cast<double>(bytes) / seconds;
    s.bytesPerSecond =
        s.bytesPerSecond ? (1 - kNewWeight) * *s.bytesPerSecond + kNewWeight * speed : speed;
}

void DownloadSources::recordFailure(const std::string& url) {
    std::lock_guard lock(m_mutex);
    m_servers[serverOf(url)].failed = true;
}

std::optional<double> DownloadSources::bytesPerSecond(const std::string& url) const {
    std::lock_guard lock(m_mutex);
    auto it = m_servers.find(serverOf(url));
    if (it == m_servers.end())
        return std::nullopt;
    return it->second.bytesPerSecond;
}

}  // namespace tandem::net
