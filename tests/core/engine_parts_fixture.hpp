// What the tests of the engine's parts (rule gate, backoff) stand on: an EngineShared over a
// ledger in a temporary directory, a clock the test sets, rule inputs it sets, and an observer
// that records state changes and log lines.
#pragma once

#include "engine_shared.hpp"

#include <QTemporaryDir>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

// Safe to read from other threads while the test sets it.
class SettableClock final : public core::Clock {
  public:
    explicit SettableClock(int64_t ms) : m_ms(ms) {}
    int64_t nowMs() const override { return m_ms.load(); }
    void advanceMs(int64_t d) { m_ms += d; }

  private:
    std::atomic<int64_t> m_ms;
};

struct LogRecorder final : core::EngineObserver {
    std::mutex mu;
    std::vector<std::string> logs;
    std::vector<core::EngineState> states;
    void logLine(core::EventLevel, const std::string& m) override {
        std::lock_guard lock(mu);
        logs.push_back(m);
    }
    void stateChanged(core::EngineState s, const std::string&) override {
        std::lock_guard lock(mu);
        states.push_back(s);
    }
    size_t logCount() {
        std::lock_guard lock(mu);
        return logs.size();
    }
    std::string lastLog() {
        std::lock_guard lock(mu);
        return logs.empty() ? std::string() : logs.back();
    }
};

// Polls a condition (the code under test runs on another thread); false after a generous limit.
template <class F>
bool eventually(F f, int limitMs = 10000) {
    for (int waited = 0; waited < limitMs; waited += 2) {
        if (f())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return f();
}

constexpr int64_t kPartsStart = 1795300000000;  // 2026-11-22 (Sunday) 00:13 UTC

struct EnginePartsFixture {
    QTemporaryDir tmp;
    SettableClock clock{kPartsStart};
    core::FixedOffsetTimeZone zone{0};
    std::mutex probeMu;
    core::RuleProbe probeValue{std::nullopt, core::PowerSource::Mains, std::nullopt};
    std::atomic<int> probes{0};
    LogRecorder recorder;
    std::unique_ptr<core::Ledger> ledger;
    std::unique_ptr<core::EngineShared> shared;

    // Fails (empty shared) when the ledger or the key cannot be made.
    explicit EnginePartsFixture(core::EngineConfig cfg = {}) {
        cfg.dataDir = std::filesystem::path(tmp.path().toStdString());
        cfg.pollIntervalMs = 5;
        if (cfg.jitterSeed == 0)
            cfg.jitterSeed = 42;
        auto l = core::Ledger::open(cfg.dataDir / "ledger.db");
        auto key = net::SigningKey::generate();
        if (!l || !key)
            return;
        ledger = std::move(*l);
        core::Engine::Dependencies d;
        d.clock = &clock;
        d.zone = &zone;
        d.probe = [this] {
            ++probes;
            std::lock_guard lock(probeMu);
            return probeValue;
        };
        d.observer = &recorder;
        shared = std::make_unique<core::EngineShared>(std::move(cfg), std::move(d), *ledger,
                                                      std::move(*key));
    }
    void setProbe(const core::RuleProbe& value) {
        std::lock_guard lock(probeMu);
        probeValue = value;
    }
    core::EngineSnapshot snap() {
        std::lock_guard lock(shared->mu);
        return shared->snap;
    }
};

}  // namespace tandem::testing
