// How tandem-worker and the desktop app build the engine: the coordinator client (HTTPS settings
// from the user's settings), the engine configuration for the chosen device, the backend factory
// (CPU or CUDA) and the rule probe (power, idle time, temperature of the GPU in use). One place
// for both programs; each adds only what is its own (the worker's test hooks and limits, the
// desktop's bridge).
#pragma once

#include "clock.hpp"
#include "device_choice.hpp"
#include "engine.hpp"
#include "http_client.hpp"
#include "net_coordinator_api.hpp"
#include "platform_probe.hpp"
#include "settings.hpp"

#include <memory>
#include <string>

namespace tandem::app {

// The HTTPS client settings that follow from the user's settings (coordinator, trust, proxy):
// the engine's client and the wizard's probes start from the same ones. The user agent is
// "program/version".
net::HttpClientConfig httpConfigFor(const core::Settings& settings,
                                    const std::string& program = "tandem");

// The engine's client: `base` with the settings' rate limits and a few quick retries (the engine
// backs off on its own after them).
net::HttpClientConfig engineHttpConfig(net::HttpClientConfig base, const core::Settings& settings);

// This machine's host name, or `fallback` when it has none.
std::string hostNameOr(const std::string& fallback);

struct EngineWiring {
    // The program's part of the configuration (data directory, coordinator URL, client name,
    // rules, limits, hooks); the device fields are filled in from `device`.
    core::EngineConfig config;
    net::HttpClientConfig http;      // from engineHttpConfig
    std::string registrationSecret;  // sent when registering; "" when the coordinator needs none
    DeviceChoice device;
    int cpuThreads = 1;  // for the CPU backend
    const core::Clock* clock = nullptr;
    const core::TimeZone* zone = nullptr;
    core::IdleSource* idle = nullptr;
    core::EngineObserver* observer = nullptr;  // may be null
};

// The engine with what it needs to live: its coordinator client and the platform probe its rule
// probe reads. Destroying it destroys the engine first (which quits it with a checkpoint).
class WiredEngine {
  public:
    // Fails with the client's error (URL, trust set-up) or the engine's (data directory,
    // identity, ledger).
    static Expected<std::unique_ptr<WiredEngine>> create(const EngineWiring& wiring);
    ~WiredEngine();
    WiredEngine(const WiredEngine&) = delete;
    WiredEngine& operator=(const WiredEngine&) = delete;

    core::Engine& engine() { return *m_engine; }

  private:
    WiredEngine() = default;
    core::PlatformProbe m_platform;
    std::unique_ptr<core::NetCoordinatorApi> m_api;
    std::unique_ptr<core::Engine> m_engine;  // last: goes first
};

}  // namespace tandem::app
