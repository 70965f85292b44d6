// A real Engine for the GUI tests, with a fake coordinator (tests/core/fake_coordinator.hpp) and
// a rule probe the test sets (idle time, power, temperature), checked at every step. The bridge
// reads it, so the window shows what the engine really reports (codes, figures, and its English
// for the log).
#pragma once

#include "engine.hpp"
#include "engine_bridge.hpp"
#include "fake_coordinator.hpp"

#include <QTemporaryDir>

#include <memory>
#include <mutex>

namespace tandem::uitest {

struct HeldEngine {
    struct Options {
        core::RulesConfig rules;
        int innerSteps = 6;    // of each work unit
        int maxWorkUnits = 0;  // > 0: the engine stops after so many
        QString dataDir;       // empty: one of its own
    };

    HeldEngine(ui::EngineBridge& bridge, const core::Clock& clock, const core::TimeZone& zone,
               const core::RulesConfig& rules)
        : HeldEngine(bridge, clock, zone, Options{rules, 6, 0, {}}) {}
    HeldEngine(ui::EngineBridge& bridge, const core::Clock& clock, const core::TimeZone& zone,
               const Options& options)
        : api("L=1,NH=2,C=16,T=16", options.innerSteps), m_bridge(bridge) {
        core::EngineConfig cfg;
        cfg.dataDir =
            (options.dataDir.isEmpty() ? dir.path() + QStringLiteral("/data") : options.dataDir)
                .toStdString();
        cfg.coordinatorUrl = "https://coordinator.test";
        cfg.pollIntervalMs = 20;
        cfg.rulesCheckIntervalMs = 0;
        cfg.rules = options.rules;
        cfg.maxWorkUnits = options.maxWorkUnits;
        core::Engine::Dependencies deps;
        deps.api = &api;
        deps.clock = &clock;
        deps.zone = &zone;
        deps.backends = [](const std::string&) { return makeCpuBackend("cpu", 1); };
        deps.observer = bridge.observer();
        deps.probe = [this] {
            std::lock_guard lock(m_mutex);
            return m_probe;
        };
        auto made = core::Engine::create(cfg, deps);
        if (made)
            engine = std::move(*made);
        else
            error = made.error().message;
    }
    ~HeldEngine() {
        m_bridge.setEngine(nullptr);
        engine.reset();
    }
    void setProbe(const core::RuleProbe& probe) {
        std::lock_guard lock(m_mutex);
        m_probe = probe;
    }
    void start() {
        m_bridge.setEngine(engine.get());
        engine->start();
    }

    QTemporaryDir dir;
    testing::FakeCoordinator api;
    std::unique_ptr<core::Engine> engine;
    std::string error;  // why the engine could not be made

  private:
    ui::EngineBridge& m_bridge;
    std::mutex m_mutex;
    core::RuleProbe m_probe{std::nullopt, core::PowerSource::Mains, std::nullopt};
};

}  // namespace tandem::uitest
