#include "engine_wiring.hpp"

#include "coordinator_client.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/devices.hpp"
#include "tandem_version.hpp"

#include <unistd.h>

namespace tandem::app {

net::HttpClientConfig httpConfigFor(const core::Settings& s, const std::string& program) {
    net::HttpClientConfig c;
    c.baseUrl = s.coordinatorUrl;
    c.caFile = s.caFile;
    c.pinnedPublicKey = s.pinnedPublicKey;
    c.proxy = s.proxy;
    c.userAgent = program + "/" + TANDEM_VERSION;
    return c;
}

net::HttpClientConfig engineHttpConfig(net::HttpClientConfig c, const core::Settings& s) {
    c.maxSendBytesPerSecond = s.uploadLimitBytesPerSecond;
    c.maxRecvBytesPerSecond = s.downloadLimitBytesPerSecond;
    c.retry.maxAttempts = 3;
    c.retry.maxBackoff = std::chrono::milliseconds(10000);
    return c;
}

std::string hostNameOr(const std::string& fallback) {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
        return fallback;
    return buf;
}

Expected<std::unique_ptr<WiredEngine>> WiredEngine::create(const EngineWiring& w) {
    std::unique_ptr<WiredEngine> wired(new WiredEngine());
    auto client = net::CoordinatorClient::create(w.http);
    if (!client)
        return Error{client.error().message};
    (*client)->setRegistrationSecret(w.registrationSecret);
    wired->m_api = std::make_unique<core::NetCoordinatorApi>(std::move(*client));

    core::EngineConfig cfg = w.config;
    cfg.device = w.device.device;
    cfg.deviceDescription = w.device.description;
    cfg.deviceMemoryBytes = w.device.memoryBytes;
    cfg.hardwareSummary = w.device.hardwareSummary;

    core::Engine::Dependencies deps;
    deps.api = wired->m_api.get();
    deps.clock = w.clock;
    deps.zone = w.zone;
    deps.observer = w.observer;
    const int threads = w.cpuThreads;
    deps.backends = [threads](const std::string& dev) { return makeBackendByName(dev, threads); };
    // The temperature rule reads the GPU in use through NVML (no CUDA context is made).
    const int gpuIndex = w.device.gpuIndex;
    const core::PlatformProbe* platform = &wired->m_platform;
    core::IdleSource* idle = w.idle;
    deps.probe = [platform, idle, gpuIndex] {
        core::RuleProbe p;
        p.power = platform->powerStatus().source;
        p.idleSeconds = idle->idleSeconds();
        if (gpuIndex >= 0) {
            for (const auto& gpu : detectGpus().devices)
                if (gpu.index == gpuIndex && gpu.temperatureC >= 0)
                    p.temperatureC = gpu.temperatureC;
        }
        return p;
    };
    auto engine = core::Engine::create(cfg, deps);
    if (!engine)
        return engine.error();
    wired->m_engine = std::move(*engine);
    return wired;
}

WiredEngine::~WiredEngine() = default;

}  // namespace tandem::app
