// What the engine tests stand on: an Engine over a FakeCoordinator in a temporary data directory,
// a clock the test advances, rule inputs it sets, and an observer that records states and log
// lines.
#pragma once

#include "engine.hpp"
#include "fake_coordinator.hpp"

#include "ledger.hpp"

#include <QTemporaryDir>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::testing {

using namespace tandem::core;
namespace fs = std::filesystem;

// ManualClock, safe to read from the engine's threads while the test advances it.
class TestClock final : public Clock {
  public:
    explicit TestClock(int64_t ms) : m_ms(ms) {}
    int64_t nowMs() const override { return m_ms.load(); }
    void advanceMs(int64_t d) { m_ms += d; }
    void setMs(int64_t v) { m_ms = v; }

  private:
    std::atomic<int64_t> m_ms;
};

struct Probe {
    std::mutex mu;
    RuleProbe value{std::nullopt, PowerSource::Mains, std::nullopt};
    RuleProbe get() {
        std::lock_guard lock(mu);
        return value;
    }
    void setPower(PowerSource p) {
        std::lock_guard lock(mu);
        value.power = p;
    }
};

struct Recorder final : EngineObserver {
    std::mutex mu;
    std::vector<std::pair<EngineState, std::string>> states;
    std::vector<std::string> logs;
    std::function<void(const std::string&, int64_t)> onProgress;
    int settled = 0;
    void stateChanged(EngineState s, const std::string& reason) override {
        std::lock_guard lock(mu);
        states.emplace_back(s, reason);
    }
    void progress(const std::string& id, int64_t step, int64_t, float) override {
        std::function<void(const std::string&, int64_t)> f;
        {
            std::lock_guard lock(mu);
            f = onProgress;
        }
        if (f)
            f(id, step);
    }
    void logLine(EventLevel, const std::string& m) override {
        std::lock_guard lock(mu);
        logs.push_back(m);
    }
    void workUnitSettled(const std::string&, WorkUnitState) override {
        std::lock_guard lock(mu);
        ++settled;
    }
    bool saw(EngineState s) {
        std::lock_guard lock(mu);
        for (auto& p : states)
            if (p.first == s)
                return true;
        return false;
    }
    bool logged(const std::string& needle) {
        std::lock_guard lock(mu);
        for (auto& l : logs)
            if (l.find(needle) != std::string::npos)
                return true;
        return false;
    }
};

// Polls a condition (the engine runs on its own threads); false after a generous limit.
template <class F>
bool eventually(F f, int limitMs = 30000) {
    for (int waited = 0; waited < limitMs; waited += 2) {
        if (f())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return f();
}

constexpr int64_t kStart = 1795300000000;  // 2026-11-22, a Sunday

struct Harness {
    QTemporaryDir tmp;
    fs::path dataDir;
    TestClock clock{kStart};
    FixedOffsetTimeZone zone{0};
    Probe probe;
    Recorder recorder;
    FakeCoordinator& api;
    std::unique_ptr<Engine> engine;
    EngineConfig cfg;
    std::shared_ptr<std::atomic<int>> backendsMade = std::make_shared<std::atomic<int>>(0);

    explicit Harness(FakeCoordinator& fake, fs::path dir = {}) : api(fake) {
        dataDir = dir.empty() ? fs::path(tmp.path().toStdString()) / "data" : dir;
        cfg.dataDir = dataDir;
        cfg.coordinatorUrl = "https://127.0.0.1:1";
        cfg.device = "cpu";
        cfg.pollIntervalMs = 5;
        cfg.jitterSeed = 42;
        cfg.rules.pauseOnBattery = true;
        cfg.sampleIntervalMs = 0;
    }
    Status make() {
        Engine::Dependencies d;
        d.api = &api;
        d.clock = &clock;
        d.zone = &zone;
        d.backends = [made = backendsMade](const std::string& device) {
            ++*made;
            return makeCpuBackend(device, 1);
        };
        d.probe = [this] { return probe.get(); };
        d.observer = &recorder;
        auto e = Engine::create(cfg, d);
        if (!e)
            return e.error();
        engine = std::move(*e);
        return {};
    }
    EngineSnapshot snap() { return engine->snapshot(); }
    bool waitState(EngineState s) {
        return eventually([&] { return engine->snapshot().state == s; });
    }
};

inline std::optional<WorkUnitRecord> unit(Engine& e, const std::string& id) {
    auto r = e.ledger().workUnit(id);
    return r ? *r : std::nullopt;
}

}  // namespace tandem::testing
