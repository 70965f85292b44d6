// A real Engine for the GUI tests that stops at the rule gate: a fake coordinator, a clock held
// still, and a rule probe the test sets (idle time, temperature). The bridge reads it, so the
// window shows what the engine really reports (codes, figures and its English for the log).
#pragma once

#include "engine.hpp"
#include "engine_bridge.hpp"
#include "fake_coordinator.hpp"

#include <QTemporaryDir>

#include <memory>
#include <mutex>

namespace tandem::uitest {

struct HeldEngine {
    HeldEngine(ui::EngineBridge& bridge, const core::Clock& clock, const core::TimeZone& zone,
               const core::RulesConfig& rules)
        : m_bridge(bridge) {
        core::EngineConfig cfg;
        cfg.dataDir = (dir.path() + QStringLiteral("/data")).toStdString();
        cfg.coordinatorUrl = "https://coordinator.test";
        cfg.pollIntervalMs = 20;
        cfg.rules = rules;
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
