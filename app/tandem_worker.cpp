// tandem-worker: the headless worker. Registers with a coordinator, trains DiLoCo work units on
// the chosen device and uploads the results (core/engine.hpp); `tandem-worker status|pause|
// resume|finish` control a running one through its local socket (core/control_socket.hpp).
#include "control_socket.hpp"
#include "coordinator_client.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/devices.hpp"
#include "engine.hpp"
#include "log_stamp.hpp"
#include "net_coordinator_api.hpp"
#include "platform_probe.hpp"
#include "settings.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;
using namespace tandem::core;
namespace fs = std::filesystem;

namespace {

// Exit codes (also in --help and app/README.md).
constexpr int kExitOk = 0;        // finished (--max-work-units reached) or stopped by a signal
constexpr int kExitError = 1;     // could not run: data directory, identity, ledger, TLS set-up
constexpr int kExitUsage = 2;     // bad command line or settings
constexpr int kExitNoDevice = 3;  // the requested device cannot be used
constexpr int kExitNoWorker = 4;  // control command: no worker runs with that data directory

const char* kUsage = R"(Usage:
  tandem-worker --coordinator URL [--ca-file FILE | --pin sha256//...] --data-dir DIR
                [--device auto|cpu|cuda:N] [--max-work-units N] [options]
  tandem-worker status|pause|resume|finish --data-dir DIR

Donates this machine's compute to a DiLoCo training run: registers with the coordinator (an
Ed25519 identity is made in the data directory on first start), fetches work units, trains them,
uploads the fp16 pseudo-gradients and records every contribution in DIR/ledger.db.

  --coordinator URL      https://host:port of the coordinator
  --ca-file FILE         trust the coordinator certificate through this CA bundle (PEM)
  --pin sha256//BASE64   trust a self-signed coordinator by its public-key pin
                         (tandem-coordinator prints it; without --ca-file/--pin: system CAs)
  --data-dir DIR         identity, registration, ledger, checkpoints, results (created 0700)
  --device D             auto (default: a usable NVIDIA GPU, else the CPU, saying why), cpu,
                         or cuda:N
  --threads N            CPU threads for the cpu device (default: all cores)
  --max-work-units N     stop after N work units are trained and their results settled
  --checkpoint-seconds S checkpoint the unit in training every S seconds (default 300)
  --checkpoint-steps N   also every N steps (tests: crash-resume coverage)
  --name NAME            the name the coordinator shows (default: the host name)
  --help, --version

Rules (battery, idle, time windows, temperature, daily caps), proxy and rate limits come from
DIR/settings.json (the desktop app writes it; see core/settings.hpp). Log lines (UTC) go to
stderr. SIGINT/SIGTERM checkpoint the unit in training and exit; the next start resumes it.

Control of a running worker (through DIR/control.sock, guarded by DIR/control.secret):
  status    print the state, the current work unit, uploads and totals
  pause     stop training at the next step (with a checkpoint); finished results still upload
  resume    continue after pause
  finish    finish the current work unit, then pause

Exit codes:
  0  finished (--max-work-units reached), stopped by SIGINT/SIGTERM, or control command done
  1  could not run (data directory, identity, ledger, TLS set-up)
  2  bad command line or settings
  3  the requested device cannot be used
  4  control command: no worker is running with that data directory
)";

std::mutex g_logMutex;
std::atomic<int> g_signal{0};

void writeLog(const std::string& line) {
    std::lock_guard lock(g_logMutex);
    std::fprintf(stderr, "%s %s\n", app::logStamp().c_str(), line.c_str());
    std::fflush(stderr);
}

class LogObserver final : public EngineObserver {
  public:
    void stateChanged(EngineState state, const std::string& reason) override {
        writeLog(std::string("state: ") + toString(state) +
                 (reason.empty() || reason == toString(state) ? "" : " (" + reason + ")"));
    }
    void progress(const std::string& id, int64_t step, int64_t steps, float loss) override {
        const int64_t every = std::max<int64_t>(1, steps / 5);
        if (step % every != 0 && step != steps)
            return;
        char buf[160];
        std::snprintf(buf, sizeof buf, "work unit %s: step %lld of %lld, loss %.4f", id.c_str(),
                      static_cast<long long>(step), static_cast<long long>(steps), loss);
        writeLog(buf);
    }
    void logLine(EventLevel level, const std::string& message) override {
        if (level == EventLevel::Debug)
            return;
        writeLog(std::string(level == EventLevel::Error     ? "error: "
                             : level == EventLevel::Warning ? "warning: "
                                                            : "") +
                 message);
    }
};

int control(const std::string& command, const fs::path& dataDir) {
    auto answer = sendControlCommand(dataDir, command);
    if (!answer) {
        std::fprintf(stderr, "tandem-worker: %s\n", answer.error().message.c_str());
        return kExitNoWorker;
    }
    std::fputs(answer->c_str(), stdout);
    return kExitOk;
}

bool parseInt(const std::string& text, long long lo, long long hi, long long& out) {
    char* end = nullptr;
    errno = 0;
    out = std::strtoll(text.c_str(), &end, 10);
    return !text.empty() && *end == '\0' && errno == 0 && out >= lo && out <= hi;
}

std::string hostName() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
        return "tandem-worker";
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string coordinatorUrl, caFile, pin, device, name;
    fs::path dataDir;
    long long maxWorkUnits = 0, threads = 0, checkpointSeconds = 300, checkpointSteps = 0;
    std::string command;
    auto usage = [](const std::string& message) {
        std::fprintf(stderr, "tandem-worker: %s (see --help)\n", message.c_str());
        return kExitUsage;
    };
    if (!args.empty() &&
        (args[0] == "status" || args[0] == "pause" || args[0] == "resume" || args[0] == "finish")) {
        command = args[0];
        args.erase(args.begin());
    }
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](std::string& out) {
            if (i + 1 >= args.size())
                return false;
            out = args[++i];
            return true;
        };
        std::string v;
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return kExitOk;
        } else if (a == "--version") {
            std::printf("tandem-worker %s\n", TANDEM_VERSION);
            return kExitOk;
        } else if (a == "--coordinator") {
            if (!value(coordinatorUrl))
                return usage("--coordinator needs a URL");
        } else if (a == "--ca-file") {
            if (!value(caFile))
                return usage("--ca-file needs a file");
        } else if (a == "--pin") {
            if (!value(pin))
                return usage("--pin needs sha256//BASE64");
        } else if (a == "--data-dir") {
            if (!value(v))
                return usage("--data-dir needs a directory");
            dataDir = v;
        } else if (a == "--device") {
            if (!value(device))
                return usage("--device needs auto, cpu or cuda:N");
        } else if (a == "--name") {
            if (!value(name))
                return usage("--name needs a name");
        } else if (a == "--max-work-units" || a == "--threads" || a == "--checkpoint-seconds" ||
                   a == "--checkpoint-steps") {
            long long n = 0;
            if (!value(v) || !parseInt(v, a == "--max-work-units" ? 0 : 1, 1000000000, n))
                return usage(a + " expects a positive integer, found '" + v + "'");
            (a == "--max-work-units"       ? maxWorkUnits
             : a == "--threads"            ? threads
             : a == "--checkpoint-seconds" ? checkpointSeconds
                                           : checkpointSteps) = n;
        } else {
            return usage("unknown option '" + a + "'");
        }
    }
    if (dataDir.empty())
        return usage("--data-dir is required");
    if (!command.empty())
        return control(command, dataDir);
    std::signal(SIGPIPE, SIG_IGN);

    // Settings from the data directory; the command line wins.
    auto loaded = loadSettings(dataDir / kSettingsFileName);
    if (!loaded)
        return usage(loaded.error().message);
    Settings settings = loaded->settings;
    for (const auto& w : loaded->warnings)
        writeLog("warning: settings: " + w);
    if (coordinatorUrl.empty())
        coordinatorUrl = settings.coordinatorUrl;
    if (coordinatorUrl.empty())
        return usage("--coordinator is required (or coordinatorUrl in settings.json)");
    if (coordinatorUrl.rfind("https://", 0) != 0)
        return usage("--coordinator must be an https:// URL, found '" + coordinatorUrl + "'");
    if (!caFile.empty() && !pin.empty())
        return usage("give --ca-file or --pin, not both");
    if (caFile.empty() && pin.empty()) {
        caFile = settings.caFile;
        pin = settings.pinnedPublicKey;
    }
    if (!pin.empty() && pin.rfind("sha256//", 0) != 0)
        return usage("--pin expects sha256//BASE64, found '" + pin + "'");
    if (device.empty())
        device = settings.device;
    if (threads <= 0)
        threads = std::max(1u, std::thread::hardware_concurrency());

    // The device.
    std::string resolved, description;
    int64_t deviceMemory = 0;
    if (device == "auto" || device.rfind("cuda", 0) == 0) {
        const GpuInventory gpus = detectGpus();
        std::string why;
        if (!cudaBackendBuilt())
            why = "this build has no CUDA backend";
        else if (!gpus.usable())
            why = gpus.unavailableReason;
        int index = 0;
        if (device.rfind("cuda:", 0) == 0) {
            long long n = 0;
            if (!parseInt(device.substr(5), 0, 1024, n))
                return usage("--device expects auto, cpu or cuda:N, found '" + device + "'");
            index = static_cast<int>(n);
        } else if (device != "auto" && device != "cuda") {
            return usage("--device expects auto, cpu or cuda:N, found '" + device + "'");
        }
        const GpuDevice* gpu = nullptr;
        for (const auto& d : gpus.devices)
            if (d.index == index)
                gpu = &d;
        if (why.empty() && !gpu)
            why = "there is no CUDA device " + std::to_string(index) + " (found " +
                  std::to_string(gpus.devices.size()) + ")";
        if (why.empty() && !gpu->supported)
            why = gpu->name + " has compute capability " + std::to_string(gpu->computeMajor) + "." +
                  std::to_string(gpu->computeMinor) + "; this build needs 7.5 or newer";
        if (!why.empty()) {
            if (device != "auto") {
                std::fprintf(stderr, "tandem-worker: cannot use %s: %s\n", device.c_str(),
                             why.c_str());
                return kExitNoDevice;
            }
            writeLog("device: the CPU (no GPU: " + why + ")");
            resolved = "cpu";
        } else {
            resolved = "cuda:" + std::to_string(index);
            description = resolved + " " + gpu->name;
            deviceMemory = gpu->totalMemoryBytes;
            writeLog("device: " + description);
        }
    } else if (device == "cpu") {
        resolved = "cpu";
    } else {
        return usage("--device expects auto, cpu or cuda:N, found '" + device + "'");
    }
    PlatformProbe probe;
    std::string hardware;
    if (auto inv = probe.inventory()) {
        hardware = inv->cpuModel + ", " + std::to_string(inv->logicalCores) + " threads, " +
                   formatBytes(inv->memoryTotalBytes) + " RAM, " + inv->osName;
        if (resolved == "cpu") {
            description = "cpu " + inv->cpuModel + " (" + std::to_string(threads) + " threads)";
            deviceMemory = inv->memoryAvailableBytes;
        }
    }
    if (!description.empty() && description.rfind("cuda", 0) == 0)
        hardware = description + "; " + hardware;

    // The coordinator client.
    net::HttpClientConfig http;
    http.baseUrl = coordinatorUrl;
    http.caFile = caFile;
    http.pinnedPublicKey = pin;
    http.proxy = settings.proxy;
    http.userAgent = std::string("tandem-worker/") + TANDEM_VERSION;
    http.maxSendBytesPerSecond = settings.uploadLimitBytesPerSecond;
    http.maxRecvBytesPerSecond = settings.downloadLimitBytesPerSecond;
    http.retry.maxAttempts = 3;  // the engine backs off on its own after that
    http.retry.maxBackoff = std::chrono::milliseconds(10000);
    auto client = net::CoordinatorClient::create(http);
    if (!client) {
        std::fprintf(stderr, "tandem-worker: %s\n", client.error().message.c_str());
        return kExitError;
    }
    NetCoordinatorApi api(std::move(*client));

    SystemClock clock;
    SystemTimeZone zone;
    TtyIdleSource idle(clock);
    LogObserver observer;
    EngineConfig cfg;
    cfg.dataDir = dataDir;
    cfg.coordinatorUrl = coordinatorUrl;
    cfg.device = resolved;
    cfg.deviceDescription = description.empty() ? resolved : description;
    cfg.deviceMemoryBytes = deviceMemory;
    cfg.clientName = name.empty() ? hostName() : name;
    cfg.hardwareSummary = hardware;
    cfg.rules = settings.rules;
    cfg.maxWorkUnits = static_cast<int>(maxWorkUnits);
    cfg.checkpointIntervalMs = checkpointSeconds * 1000;
    cfg.checkpointEverySteps = static_cast<int>(checkpointSteps);
    // Tests only: TANDEM_TEST_KILL_AT=point[:n] kills this process (SIGKILL) at the n-th (default
    // first) pass through that point of the engine (see EngineConfig::testHook).
    if (const char* killAt = std::getenv("TANDEM_TEST_KILL_AT"); killAt && *killAt) {
        std::string spec = killAt;
        int nth = 1;
        if (const auto colon = spec.find(':'); colon != std::string::npos) {
            nth = std::max(1, std::atoi(spec.c_str() + colon + 1));
            spec.resize(colon);
        }
        auto count = std::make_shared<std::atomic<int>>(0);
        cfg.testHook = [spec, nth, count](const char* point) {
            if (spec == point && ++*count == nth) {
                writeLog(std::string("TANDEM_TEST_KILL_AT: killing at ") + point);
                std::raise(SIGKILL);
            }
        };
    }
    Engine::Dependencies deps;
    deps.api = &api;
    deps.clock = &clock;
    deps.zone = &zone;
    const int cpuThreads = static_cast<int>(threads);
    deps.backends = [cpuThreads](const std::string& dev) {
        return makeBackendByName(dev, cpuThreads);
    };
    // The temperature rule reads the GPU in use through NVML (no CUDA context is made).
    const int gpuIndex = resolved.rfind("cuda:", 0) == 0 ? std::atoi(resolved.c_str() + 5) : -1;
    deps.probe = [&probe, &idle, gpuIndex] {
        RuleProbe p;
        p.power = probe.powerStatus().source;
        p.idleSeconds = idle.idleSeconds();
        if (gpuIndex >= 0) {
            for (const auto& gpu : detectGpus().devices) {
                if (gpu.index == gpuIndex && gpu.temperatureC >= 0)
                    p.temperatureC = gpu.temperatureC;
            }
        }
        return p;
    };
    deps.observer = &observer;

    // Signals set a flag that a watcher thread turns into quit(). A handler rather than sigwait:
    // libraries (OpenBLAS) start threads before main() that would not block the signals.
    struct sigaction action {};
    action.sa_handler = [](int sig) { g_signal = sig; };
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);

    writeLog(std::string("tandem-worker ") + TANDEM_VERSION + " starting; data in " +
             dataDir.string() + ", coordinator " + coordinatorUrl);
    auto engine = Engine::create(cfg, deps);
    if (!engine) {
        std::fprintf(stderr, "tandem-worker: %s\n", engine.error().message.c_str());
        return kExitError;
    }
    Engine& e = **engine;
    auto server = ControlServer::start(dataDir, [&e, &zone, &clock](const std::string& cmd) {
        if (cmd == "status")
            return formatSnapshot(e.snapshot(), clock.nowMs(), zone);
        if (cmd == "pause") {
            e.pause();
            return std::string("pausing at the next step\n");
        }
        if (cmd == "resume") {
            e.resume();
            return std::string("resuming\n");
        }
        if (cmd == "finish") {
            e.setFinishThenPause(true);
            return std::string("will pause after the current work unit\n");
        }
        return "error: unknown command '" + cmd + "' (status, pause, resume, finish)\n";
    });
    if (!server) {
        std::fprintf(stderr, "tandem-worker: %s\n", server.error().message.c_str());
        return kExitError;
    }
    writeLog("identity " + net::toBase64(e.publicKey()) +
             "; control: tandem-worker status --data-dir " + dataDir.string());

    std::atomic<bool> done{false};
    std::thread signalThread([&] {
        while (!done) {
            if (const int sig = g_signal.load(); sig != 0) {
                writeLog(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                         "; checkpointing and stopping");
                e.quit();
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    e.start();
    e.wait();
    done = true;
    signalThread.join();
    server->reset();
    const EngineSnapshot s = e.snapshot();
    writeLog("stopped; " + std::to_string(s.workUnitsThisSession) +
             " work units trained this session, " + std::to_string(s.totals.workUnitsAccepted) +
             " accepted in all");
    return kExitOk;
}
