#include "desktop_services.hpp"

#include "bandwidth_probe.hpp"
#include "coordinator_client.hpp"
#include "cost_estimate.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/devices.hpp"
#include "engine_wiring.hpp"
#include "memory_estimate.hpp"
#include "net_coordinator_api.hpp"
#include "platform_probe.hpp"
#include "registration_file.hpp"
#include "speed_test.hpp"
#include "unit_files.hpp"

#include <QCoreApplication>

#include <algorithm>

namespace tandem::app {

namespace {
// The context lupdate gives these calls (the enclosing namespace or class); see ui/translations.
QString tr(const char* text) {
    return QCoreApplication::translate("tandem::app::DesktopServices", text);
}
QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// Why no GPU is used, in the donor's language where it is a common case (no driver, a GPU too
// old); the driver's and runtime's own words otherwise.
QString gpuUnavailableText(const GpuInventory& gpus) {
    if (gpus.driverCudaVersion == 0 && gpus.devices.empty())
        return tr("no NVIDIA driver found (libcuda.so.1 is not installed)");
    if (!gpus.devices.empty() && std::none_of(gpus.devices.begin(), gpus.devices.end(),
                                              [](const GpuDevice& d) { return d.supported; })) {
        const auto& d = gpus.devices.front();
        return tr("%1 has compute capability %2.%3; Tandem needs 7.5 or newer")
            .arg(q(d.name))
            .arg(d.computeMajor)
            .arg(d.computeMinor);
    }
    return q(gpus.unavailableReason);
}

// The wizard's probes: answer quickly or fail, no retries.
net::HttpClientConfig probeConfig(const core::Settings& s) {
    net::HttpClientConfig c = httpConfigFor(s);
    c.connectTimeout = std::chrono::milliseconds(10000);
    c.lowSpeedSeconds = 20;
    c.retry = net::RetryPolicy::none();
    return c;
}
}  // namespace

ui::DeviceReport DesktopServices::detectDevices() {
    ui::DeviceReport r;
    const GpuInventory gpus = detectGpus();
    const bool built = cudaBackendBuilt();
    for (const auto& g : gpus.devices) {
        ui::DeviceInfo d;
        d.id = QStringLiteral("cuda:%1").arg(g.index);
        d.name = q(g.name);
        d.memoryBytes = g.totalMemoryBytes;
        d.details = tr("%1, compute capability %2.%3")
                        .arg(q(core::formatBytes(g.totalMemoryBytes)))
                        .arg(g.computeMajor)
                        .arg(g.computeMinor);
        if (!gpus.driverVersion.empty())
            d.details += tr(", driver %1").arg(q(gpus.driverVersion));
        d.usable = built && g.supported;
        if (!built)
            d.reason = tr("this build of Tandem has no CUDA backend");
        else if (!g.supported)
            d.reason = tr("compute capability %1.%2; Tandem needs 7.5 or newer")
                           .arg(g.computeMajor)
                           .arg(g.computeMinor);
        r.devices.push_back(d);
    }
    if (!built)
        r.gpuUnavailableReason = tr("this build of Tandem has no CUDA backend");
    else if (!gpus.usable())
        r.gpuUnavailableReason = gpuUnavailableText(gpus);
    ui::DeviceInfo cpu;
    cpu.id = QStringLiteral("cpu");
    core::PlatformProbe probe;
    if (auto inv = probe.inventory()) {
        cpu.name = q(inv->cpuModel);
        cpu.details = tr("%1 threads, %2 memory")
                          .arg(inv->logicalCores)
                          .arg(q(core::formatBytes(inv->memoryTotalBytes)));
        cpu.memoryBytes = inv->memoryTotalBytes;
    } else {
        cpu.name = tr("CPU");
    }
    r.devices.push_back(cpu);
    return r;
}

ui::BandwidthReport DesktopServices::measureBandwidth(const core::Settings& settings) {
    ui::BandwidthReport r;
    auto http = net::HttpClient::create(probeConfig(settings));
    if (!http) {
        r.error = q(http.error().message);
        return r;
    }
    net::BandwidthProbeConfig config;
    config.maxPerDirection = std::chrono::milliseconds(8000);
    auto sample = net::probeBandwidth(**http, config);
    if (!sample) {
        r.error = q(sample.error().message);
        r.problem = core::toApiFailure(sample.error()).problem;
        return r;
    }
    r.ok = true;
    r.downMbitPerSecond = sample->downMbitPerSecond;
    r.upMbitPerSecond = sample->upMbitPerSecond;
    r.latencyMs = sample->latencyMs;
    return r;
}

ui::RunInfo DesktopServices::runStatus(const core::Settings& settings) {
    ui::RunInfo r;
    auto client = net::CoordinatorClient::create(probeConfig(settings));
    if (!client) {
        r.error = q(client.error().message);
        return r;
    }
    auto status = (*client)->status();
    if (!status) {
        r.error = q(status.error().message);
        return r;
    }
    r.ok = true;
    r.runId = status->runId;
    r.round = status->round;
    r.model = q(status->model.describe());
    r.parameterCount = status->model.parameterCount();
    if (status->batch > 0 && status->seqLen > 0) {
        const UnitMemoryEstimate e =
            estimateUnitMemory(status->model, status->batch, status->seqLen);
        r.unitMemoryCpuBytes = e.sharedTotalBytes();
        r.unitMemoryGpuBytes = e.backendBytes();
        r.unitMemoryHostBytes = e.workerHostBytes;
    }
    r.activeWorkers = status->activeWorkers;
    r.totalTokens = status->totalTokens;
    r.workUnitSeconds = status->workUnitSeconds;
    r.modelConfig = status->model;
    r.batch = status->batch;
    r.seqLen = status->seqLen;
    r.innerStepsMin = status->innerStepsMin;
    r.innerStepsMax = status->innerStepsMax;
    r.tokenBytes = status->tokenBytes;
    r.resultEncoding = status->resultEncoding;
    r.weightDeltas = status->weightDeltas;
    if (status->latestExport) {
        r.latestExportPath = q(status->latestExport->path);
        r.latestExportFormat = q(status->latestExport->format);
        r.latestExportVersion = status->latestExport->version;
    }
    for (const auto& h : status->history)
        r.history.push_back({h.round, h.valLoss, h.contributors, h.tokens});
    if (status->latestSample) {
        r.sampleVersion = status->latestSample->version;
        r.samplePrompt = q(status->latestSample->prompt);
        r.sampleText = q(status->latestSample->text);
    }
    return r;
}

ui::StandingInfo DesktopServices::standing(const core::Settings& settings) {
    ui::StandingInfo r;
    const std::filesystem::path dataDir = settings.dataDirectory.empty()
                                              ? m_defaultDataDir
                                              : std::filesystem::path(settings.dataDirectory);
    const std::filesystem::path file = core::DataDir(dataDir).registrationFile();
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        r.ok = true;  // not registered yet: nothing to ask
        return r;
    }
    auto registration = core::readRegistrationFile(file);
    if (!registration) {
        r.error = q(registration.error().message);
        return r;
    }
    if (registration->coordinatorUrl != settings.coordinatorUrl) {
        r.ok = true;  // registered elsewhere; the engine registers here at its next start
        return r;
    }
    auto client =
        net::CoordinatorClient::create(probeConfig(settings), registration->coordinatorKey);
    if (!client) {
        r.error = q(client.error().message);
        return r;
    }
    (*client)->setToken(registration->token);
    auto status = (*client)->status();
    if (!status) {
        r.error = q(status.error().message);
        return r;
    }
    auto board = (*client)->leaderboard(status->runId);
    if (!board && board.error().httpStatus == 401) {
        r.ok = true;  // the token is no longer known: the engine registers again
        return r;
    }
    if (!board) {
        r.error = q(board.error().message);
        return r;
    }
    r.ok = true;
    r.registered = true;
    r.donorCount = board->donorCount;
    r.teamCount = board->teamCount;
    if (board->you) {
        r.rank = board->you->rank;
        r.anonymous = board->you->anonymous;
        r.team = q(board->you->team);
    }
    if (board->yourTeam) {
        r.team = q(board->yourTeam->team);
        r.teamRank = board->yourTeam->rank;
    }
    return r;
}

ui::SpeedReport DesktopServices::measureSpeed(const core::Settings& settings,
                                              const ui::RunInfo& run) {
    ui::SpeedReport r;
    if (!run.ok || run.batch <= 0 || run.seqLen <= 0) {
        r.error = tr("the coordinator does not say how large a work unit is");
        return r;
    }
    // The threads and the device the engine will train with (app/tandem_main.cpp).
    const int threads = defaultTrainingThreads();
    auto device = chooseDevice(settings.device, threads, UnavailableDevice::FallBackToCpu);
    if (!device) {
        r.error = q(device.error().message);
        return r;
    }
    auto backend = makeBackendByName(device->device, threads);
    if (!backend) {
        r.error = q(backend.error().message);
        return r;
    }
    auto speed = core::measureTrainingSpeed(**backend, run.modelConfig, run.batch, run.seqLen);
    if (!speed) {
        r.error = q(speed.error().message);
        return r;
    }
    r.ok = true;
    r.device = q(device->device);
    r.tokensPerSecond = speed->tokensPerSecond;
    r.setupSeconds = speed->setupSeconds;
    if (device->gpuIndex >= 0) {
        // NVML's reading right after the steps (it averages over about a second).
        for (const auto& g : detectGpus().devices) {
            if (g.index != device->gpuIndex)
                continue;
            r.wattsMeasured = g.powerW > 0;
            r.watts = g.powerW > 0 ? g.powerW : std::max(0.0, g.powerLimitW);
        }
    } else {
        r.cpuThreads = threads;
        r.watts = threads * core::kCpuWattsPerThread;
    }
    return r;
}

}  // namespace tandem::app
