// The next work unit, asked for and downloaded on a thread of its own while the current one
// trains, so that the device goes from one unit to the next without waiting for the network
// (issue 18). The engine starts it once the unit in training is past half its steps and within
// leadMs() of its end: late
// enough that the next unit's base version is as new as if it were asked for afterwards, early
// enough that its weights and data are in when training ends. A prefetch that gets nothing (no
// work, an error, a rule that would hold the download) leaves the unit, if any, to the
// foreground, which asks or downloads as it always did. Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "unit_files.hpp"
#include "work_fetcher.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>

namespace tandem::core {

class UnitPrefetch {
  public:
    // The shortest lead: a unit of a few seconds still prefetches in time.
    static constexpr int64_t kMinLeadMs = 10000;

    UnitPrefetch(EngineShared& shared, WorkFetcher& fetcher)
        : m_shared(shared), m_fetcher(fetcher) {}
    ~UnitPrefetch() { take(); }
    UnitPrefetch(const UnitPrefetch&) = delete;
    UnitPrefetch& operator=(const UnitPrefetch&) = delete;

    // Engine thread: asks for the next unit and downloads it, keeping `training`'s files.
    void start(double tokensPerSecond, const net::Manifest& training);
    // Engine thread: started and not yet taken.
    bool started() const { return m_thread.joinable(); }
    // Engine thread: waits for the prefetch to end; the unit it got (downloaded or not), if any.
    std::optional<ActiveUnit> take();
    // Engine thread: waits for the prefetch to end and gives its unit back to the coordinator
    // (DELETE /v1/work/{id}; if that fails its heartbeat timeout reclaims it), recorded as
    // released and its files removed.
    void giveBack();
    // How long before the end of a unit the prefetch starts: twice the longest of the last
    // fetch-and-download times, at least kMinLeadMs.
    int64_t leadMs() const { return std::max(kMinLeadMs, 2 * m_lastFetchMs.load()); }
    // The time a foreground fetch and download took (real milliseconds).
    void noteFetchMs(int64_t ms) { m_lastFetchMs = ms; }

  private:
    EngineShared& m_shared;
    WorkFetcher& m_fetcher;
    std::thread m_thread;
    std::optional<ActiveUnit> m_unit;  // written by the thread, read after the join
    std::atomic<int64_t> m_lastFetchMs{0};
};

}  // namespace tandem::core
