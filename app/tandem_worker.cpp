// tandem-worker: the headless worker. Registers with a coordinator, trains DiLoCo work units on
// the chosen device and uploads the results (core/engine.hpp); `tandem-worker status|pause|
// resume|finish` control a running one through its local socket (core/control_socket.hpp).
#include "command_line.hpp"
#include "control_socket.hpp"
#include "crypto.hpp"
#include "device_choice.hpp"
#include "donor_profile.hpp"
#include "engine_wiring.hpp"
#include "log_stamp.hpp"
#include "settings.hpp"
#include "tandem_version.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

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
)";

const char* kDescription =
    R"(Donates this machine's compute to a DiLoCo training run: registers with the coordinator (an
Ed25519 identity is made in the data directory on first start), fetches work units, trains them,
uploads the fp16 pseudo-gradients and records every contribution in DIR/ledger.db.)";

const char* kFooter =
    R"(Rules (battery, idle, time windows, temperature, daily caps), proxy and rate limits come from
DIR/settings.json (the desktop app writes it; see core/settings.hpp). Log lines (UTC) go to
stderr. SIGINT/SIGTERM checkpoint the unit in training and exit; the next start resumes it.
The control commands talk to a running worker through DIR/control.sock, guarded by
DIR/control.secret.

Exit codes:
  0  finished (--max-work-units reached), stopped by SIGINT/SIGTERM, or control command done
  1  could not run (data directory, identity, ledger, TLS set-up)
  2  bad command line or settings
  3  the requested device cannot be used
  4  control command: no worker is running with that data directory)";

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

// Tests only: TANDEM_TEST_KILL_AT=point[:n] kills this process (SIGKILL) at the n-th (default
// first) pass through that point of the engine (see EngineConfig::testHook).
std::function<void(const char*)> testKillHook() {
    const char* killAt = std::getenv("TANDEM_TEST_KILL_AT");
    if (!killAt || !*killAt)
        return {};
    std::string spec = killAt;
    int nth = 1;
    if (const auto colon = spec.find(':'); colon != std::string::npos) {
        nth = std::max(1, std::atoi(spec.c_str() + colon + 1));
        spec.resize(colon);
    }
    auto count = std::make_shared<std::atomic<int>>(0);
    return [spec, nth, count](const char* point) {
        if (spec == point && ++*count == nth) {
            writeLog(std::string("TANDEM_TEST_KILL_AT: killing at ") + point);
            std::raise(SIGKILL);
        }
    };
}

int control(const std::string& command, const fs::path& dataDir) {
    auto answer = sendControlCommand(dataDir, command);
    if (!answer) {
        std::fprintf(stderr, "tandem-worker: %s\n", answer.error().message.c_str());
        return kExitNoWorker;
    }
    std::fputs(answer->c_str(), stdout);
    return kExitOk;
}

// The options of the command line, as given.
struct Options {
    std::string command;  // status, pause, resume, finish; empty: run the worker
    std::string coordinatorUrl, caFile, pin, device, deviceName, registerSecret;
    std::optional<std::string> name, team;  // the public display name and team
    fs::path dataDir;
    long long maxWorkUnits = 0, threads = 0, checkpointSeconds = 300, checkpointSteps = 0;
    bool noOverlap = false, noPrefetch = false;
};

// Parses argv into `o`; a value means "exit with it now" (help, version, bad command line).
std::optional<int> parseOptions(CLI::App& cli, int argc, char** argv, Options& o) {
    app::setUpCommandLine(cli, kUsage, kFooter, TANDEM_VERSION);
    cli.add_option("--coordinator", o.coordinatorUrl, "https://host:port of the coordinator")
        ->type_name("URL");
    cli.add_option("--ca-file", o.caFile,
                   "trust the coordinator certificate through this CA bundle (PEM)")
        ->type_name("FILE");
    cli.add_option("--pin", o.pin,
                   "trust a self-signed coordinator by its public-key pin\n"
                   "(tandem-coordinator prints it; without --ca-file/--pin: system CAs)")
        ->type_name("sha256//BASE64");
    cli.add_option("--register-secret", o.registerSecret,
                   "the registration secret of a coordinator started with --register-secret\n"
                   "(default: registerSecret in settings.json, else none)")
        ->type_name("SECRET");
    cli.add_option("--data-dir", o.dataDir,
                   "identity, registration, ledger, checkpoints, results (created 0700)")
        ->type_name("DIR");
    cli.add_option("--device", o.device,
                   "auto (default: a usable NVIDIA GPU, else the CPU, saying why), cpu,\n"
                   "or cuda:N")
        ->type_name("D");
    const std::string positive = "a positive integer";
    app::addInteger(cli, "--threads", o.threads, 1, 1000000000, "N",
                    "CPU threads for the cpu device (default: all cores)", positive);
    app::addInteger(cli, "--max-work-units", o.maxWorkUnits, 0, 1000000000, "N",
                    "stop after N work units are trained and their results settled", positive);
    app::addInteger(cli, "--checkpoint-seconds", o.checkpointSeconds, 1, 1000000000, "S",
                    "checkpoint the unit in training every S seconds (default 300)", positive);
    app::addInteger(cli, "--checkpoint-steps", o.checkpointSteps, 1, 1000000000, "N",
                    "also every N steps (tests: crash-resume coverage)", positive);
    cli.add_flag("--no-overlap", o.noOverlap,
                 "train the next unit only once the last result is uploaded\n"
                 "(benchmarks; default: train while it uploads)");
    cli.add_flag("--no-prefetch", o.noPrefetch,
                 "ask for and download the next unit only once this one is trained\n"
                 "(benchmarks; default: shortly before it ends)");
    cli.add_option("--name", o.name,
                   "the display name the run's page and leaderboard show\n"
                   "(default: displayName in settings.json, else anonymous)")
        ->type_name("NAME");
    cli.add_option("--team", o.team, "the team to count for (default: team in settings.json)")
        ->type_name("TEAM");
    cli.add_option("--device-name", o.deviceName,
                   "this computer's name for the operator, never shown publicly\n"
                   "(default: the host name)")
        ->type_name("NAME");
    const std::pair<const char*, const char*> commands[] = {
        {"status", "print the state, the current work unit, uploads and totals"},
        {"pause",
         "stop training at the next step (with a checkpoint);\n"
         "finished results still upload"},
        {"resume", "continue after pause"},
        {"finish", "finish the current work unit, then pause"}};
    for (const auto& [command, help] : commands) {
        CLI::App* sub = cli.add_subcommand(command, help);
        sub->fallthrough();  // --data-dir belongs to the main command line
        sub->callback([&o, c = std::string(command)] { o.command = c; });
    }
    cli.require_subcommand(0, 1);
    return app::parseCommandLine(cli, argc, argv);
}

int usage(const std::string& message) {
    return app::usageError("tandem-worker", message);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App cli(kDescription, "tandem-worker");
    if (auto exitCode = parseOptions(cli, argc, argv, o))
        return *exitCode;
    if (o.dataDir.empty())
        return usage("--data-dir is required");
    if (!o.command.empty())
        return control(o.command, o.dataDir);
    std::signal(SIGPIPE, SIG_IGN);

    // Settings from the data directory; the command line wins.
    auto loaded = loadSettings(o.dataDir / kSettingsFileName);
    if (!loaded)
        return usage(loaded.error().message);
    Settings settings = loaded->settings;
    for (const auto& w : loaded->warnings)
        writeLog("warning: settings: " + w);
    if (o.coordinatorUrl.empty())
        o.coordinatorUrl = settings.coordinatorUrl;
    if (o.coordinatorUrl.empty())
        return usage("--coordinator is required (or coordinatorUrl in settings.json)");
    if (o.coordinatorUrl.rfind("https://", 0) != 0)
        return usage("--coordinator must be an https:// URL, found '" + o.coordinatorUrl + "'");
    if (!o.caFile.empty() && !o.pin.empty())
        return usage("give --ca-file or --pin, not both");
    if (o.caFile.empty() && o.pin.empty()) {
        o.caFile = settings.caFile;
        o.pin = settings.pinnedPublicKey;
    }
    if (!o.pin.empty() && o.pin.rfind("sha256//", 0) != 0)
        return usage("--pin expects sha256//BASE64, found '" + o.pin + "'");
    if (o.device.empty())
        o.device = settings.device;
    if (o.threads <= 0)
        o.threads = app::defaultTrainingThreads();
    const int cpuThreads = static_cast<int>(o.threads);

    auto device = app::chooseDevice(o.device, cpuThreads, app::UnavailableDevice::Fail);
    if (!device) {
        if (device.error().kind == app::DeviceError::Kind::BadValue)
            return usage(device.error().message);
        std::fprintf(stderr, "tandem-worker: %s\n", device.error().message.c_str());
        return kExitNoDevice;
    }
    if (!device->cpuReason.empty())
        writeLog("device: the CPU (no GPU: " + device->cpuReason + ")");
    else if (device->gpuIndex >= 0)
        writeLog("device: " + device->description);

    Settings connection = settings;  // the command line's coordinator and trust
    connection.coordinatorUrl = o.coordinatorUrl;
    connection.caFile = o.caFile;
    connection.pinnedPublicKey = o.pin;
    SystemClock clock;
    SystemTimeZone zone;
    TtyIdleSource idle(clock);
    LogObserver observer;
    app::EngineWiring wiring;
    wiring.http = app::engineHttpConfig(app::httpConfigFor(connection, "tandem-worker"), settings);
    wiring.registrationSecret =
        o.registerSecret.empty() ? settings.registerSecret : o.registerSecret;
    wiring.device = *device;
    wiring.cpuThreads = cpuThreads;
    wiring.clock = &clock;
    wiring.zone = &zone;
    wiring.idle = &idle;
    wiring.observer = &observer;
    EngineConfig& cfg = wiring.config;
    cfg.dataDir = o.dataDir;
    cfg.coordinatorUrl = o.coordinatorUrl;
    cfg.clientName = o.deviceName.empty() ? app::hostNameOr("tandem-worker") : o.deviceName;
    // The command line wins over settings.json; neither: the coordinator's stays as it is.
    for (auto [given, saved, dest, flag] :
         {std::tuple{&o.name, &settings.displayName, &cfg.displayName, "--name"},
          std::tuple{&o.team, &settings.team, &cfg.team, "--team"}}) {
        if (given->has_value()) {
            auto checked = net::checkPublicName(**given, flag);
            if (!checked)
                return usage(checked.error().message);
            *dest = *checked;
        } else if (!saved->empty()) {
            *dest = *saved;
        }
    }
    cfg.rules = settings.rules;
    cfg.maxWorkUnits = static_cast<int>(o.maxWorkUnits);
    cfg.checkpointIntervalMs = o.checkpointSeconds * 1000;
    cfg.checkpointEverySteps = static_cast<int>(o.checkpointSteps);
    cfg.overlapUploads = !o.noOverlap;
    cfg.prefetch = !o.noPrefetch;
    cfg.testHook = testKillHook();

    // Signals set a flag that a watcher thread turns into quit(). A handler rather than sigwait:
    // libraries (OpenBLAS) start threads before main() that would not block the signals.
    struct sigaction action {};
    action.sa_handler = [](int sig) { g_signal = sig; };
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);

    writeLog(std::string("tandem-worker ") + TANDEM_VERSION + " starting; data in " +
             o.dataDir.string() + ", coordinator " + o.coordinatorUrl);
    auto wired = app::WiredEngine::create(wiring);
    if (!wired) {
        std::fprintf(stderr, "tandem-worker: %s\n", wired.error().message.c_str());
        return kExitError;
    }
    Engine& e = (*wired)->engine();
    auto server = ControlServer::start(o.dataDir, [&e, &zone, &clock](const std::string& cmd) {
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
             "; control: tandem-worker status --data-dir " + o.dataDir.string());

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
