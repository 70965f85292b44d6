// The next work unit, fetched while the current one trains.
#include "unit_prefetch.hpp"

#include "unit_end.hpp"

#include <chrono>

namespace tandem::core {

namespace fs = std::filesystem;

void UnitPrefetch::start(double tokensPerSecond, const net::Manifest& training) {
    if (m_thread.joinable())
        return;
    m_unit.reset();
    m_thread = std::thread([this, tokensPerSecond, training] {
        const auto t0 = std::chrono::steady_clock::now();
        try {
            m_unit = m_fetcher.fetch(tokensPerSecond, FetchMode::Prefetch);
            if (m_unit && m_fetcher.download(*m_unit, FetchMode::Prefetch, &training))
                m_lastFetchMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count();
        } catch (const CrashStop&) {
            // A simulated crash (tests): the files stay as a kill would leave them.
        }
    });
}

void UnitPrefetch::giveBack() {
    auto unit = take();
    if (!unit)
        return;
    const int64_t id = unit->manifest.workUnitId;
    auto released = m_shared.deps.api->releaseWork(id);
    m_shared.checkCrash();
    m_shared.transition(id, WorkUnitState::Abandoned, unitEndCode(UnitEndReason::Released));
    std::error_code ec;
    fs::remove_all(unit->dir, ec);
    m_shared.log(
        EventLevel::Info,
        "work unit " + wuKey(id) + ": fetched ahead, given back before it started" +
            (released ? std::string()
                      : " (the coordinator was not told: " + released.error().message + ")"));
}

std::optional<ActiveUnit> UnitPrefetch::take() {
    if (m_thread.joinable())
        m_thread.join();
    return std::exchange(m_unit, std::nullopt);
}

}  // namespace tandem::core
