// tandem-bench-coordinator: a load generator for the coordinator. N simulated workers on
// loopback register, request work, send heartbeats for S seconds and upload a result each (at a
// chosen per-connection rate, so slow uplinks hold their upload slot as long as a real one
// would), against a tandem-coordinator it starts as a child process (coordinator_process.hpp:
// the coordinator's memory and CPU time are then its own, and any build of it can be measured).
// Prints a table and writes JSON: requests per second of each kind, latencies, the
// coordinator's CPU time per request, its peak RSS and the round close time. With --target it
// drives a deployment that is already running instead (nginx over front ends, one front end, an
// aggregating process): registration, work requests and heartbeats only, and the CPU time of the
// processes given with --pids.
#include "coordinator_load.hpp"
#include "coordinator_process.hpp"
#include "cpu_model.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

using namespace tandem;
using namespace tandem::bench;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: tandem-bench-coordinator --workers N --seconds S [options]\n"
    "\n"
    "Starts a tandem-coordinator on 127.0.0.1 and drives it with N simulated workers over HTTPS\n"
    "(keep-alive connections): registration, one work request each, heartbeats for S seconds,\n"
    "then one upload each; the round closes when all N results are in.\n"
    "\n"
    "  --workers N          simulated workers (default 100)\n"
    "  --seconds S          length of the heartbeat phase (default 10)\n"
    "  --upload-rate B      bytes per second per uploading connection (default: unlimited)\n"
    "  --json FILE          also write the results as JSON\n"
    "  --model M            the run's model (default tiny)\n"
    "  --client-threads C   connections for registration, work and heartbeats (default 16)\n"
    "  --uploaders U        connections uploading at once (default 8)\n"
    "  --max-uploads M      the coordinator's --max-uploads (default: U)\n"
    "  --http-threads H     the coordinator's --http-threads (default: its own, 512)\n"
    "  --replicate-fraction F  the coordinator's --replicate-fraction (default: its own,\n"
    "                       0.05; twins' held results are retried, so 0 for memory series)\n"
    "  --db URL             the coordinator's --db: its run state in this PostgreSQL database\n"
    "                       (fresh and empty; default: SQLite in the state directory)\n"
    "  --coordinator PATH   the tandem-coordinator to run (default: this build's)\n"
    "  --dir DIR            parent of the state directory (default: a fresh one under /tmp)\n"
    "  --target URL         drive a running deployment at https://HOST:PORT instead: no\n"
    "                       coordinator of its own, no uploads (they would change its run)\n"
    "  --ca-file FILE       with --target: the CA (PEM) that verifies it (a self-signed run:\n"
    "                       the aggregating process's <state-dir>/tls/cert.pem)\n"
    "  --pids P,P,...       with --target: processes whose CPU time is counted per request\n"
    "  --help               this text\n";

std::string loadAverage() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

nlohmann::json phaseJson(const PhaseResult& r, double coordinatorCpuSeconds) {
    return {{"done", r.done},
            {"errors", r.errors},
            {"retries", r.retries},
            {"seconds", r.seconds},
            {"per_s", r.perSecond()},
            {"latency_p50_ms", r.latencyP50Ms},
            {"latency_p99_ms", r.latencyP99Ms},
            {"coordinator_cpu_s", coordinatorCpuSeconds},
            {"coordinator_cpu_ms_per_request",
             r.done > 0 ? 1000 * coordinatorCpuSeconds / static_cast<double>(r.done) : 0.0}};
}

void printRow(const char* what, const PhaseResult& r, double cpuSeconds) {
    std::printf("%-14s %8lld %6lld %8.2f %12.1f %9.2f %9.2f %11.3f\n", what,
                static_cast<long long>(r.done), static_cast<long long>(r.errors), r.seconds,
                r.perSecond(), r.latencyP50Ms, r.latencyP99Ms,
                r.done > 0 ? 1000 * cpuSeconds / static_cast<double>(r.done) : 0.0);
}

// --target: an existing deployment. Registration, work requests and heartbeats through the one
// URL; the CPU time per request is that of the --pids (front ends, nginx, the aggregating process).
// Runs the load's phases one after the other: each is printed as a row and kept in json() with
// the CPU seconds that cpuSeconds counted over it.
class PhaseRunner {
  public:
    explicit PhaseRunner(std::function<double()> cpuSeconds)
        : m_cpuSeconds(std::move(cpuSeconds)) {}
    template <class Run>
    PhaseResult operator()(const char* name, Run&& run) {
        const double cpu0 = m_cpuSeconds();
        const PhaseResult r = run();
        const double cpu = m_cpuSeconds() - cpu0;
        printRow(name, r, cpu);
        std::fflush(stdout);
        m_json[name] = phaseJson(r, cpu);
        return r;
    }
    const nlohmann::json& json() const { return m_json; }

  private:
    std::function<double()> m_cpuSeconds;
    nlohmann::json m_json;
};

struct TargetOptions {
    std::string url;
    fs::path caFile;
    std::vector<pid_t> pids;
    int workers = 0, clientThreads = 0;
    double seconds = 0;
    std::string jsonPath;
};

double cpuSecondsOf(const std::vector<pid_t>& pids) {
    double s = 0;
    for (pid_t p : pids)
        s += processFigures(p).cpuSeconds;
    return s;
}

int runAgainstTarget(const TargetOptions& o) {
    const std::string loadBefore = loadAverage();
    LoadSettings settings;
    const std::string hostPort = o.url.substr(8);
    const auto colon = hostPort.rfind(':');
    settings.host = hostPort.substr(0, colon);
    settings.port = std::atoi(hostPort.c_str() + colon + 1);
    settings.caCert = o.caFile;
    settings.workers = o.workers;
    settings.clientThreads = std::min(o.clientThreads, o.workers);
    Load load(settings);
    std::printf("tandem-bench-coordinator: %s, %u hardware threads, load %s\n",
                bench::cpuModel().c_str(), std::thread::hardware_concurrency(), loadBefore.c_str());
    std::printf("target %s, %d workers, %d client threads, CPU of %zu process(es)\n", o.url.c_str(),
                o.workers, settings.clientThreads, o.pids.size());
    std::printf("%-14s %8s %6s %8s %12s %9s %9s %11s\n", "phase", "done", "errors", "seconds",
                "per second", "p50 ms", "p99 ms", "pids ms/req");
    PhaseRunner phase([&] { return cpuSecondsOf(o.pids); });
    const auto registered = phase("register", [&] { return load.registerAll(); });
    const auto work = phase("work", [&] { return load.requestWork(); });
    const auto beats = phase("heartbeat", [&] { return load.heartbeats(o.seconds); });
    const std::string loadAfter = loadAverage();
    std::printf("load %s\n", loadAfter.c_str());
    for (const auto& e : load.errorSamples())
        std::printf("error: %s\n", e.c_str());
    const int64_t errors = registered.errors + work.errors + beats.errors;
    if (!o.jsonPath.empty()) {
        nlohmann::json j = {{"benchmark", "coordinator"},
                            {"target", o.url},
                            {"cpu", bench::cpuModel()},
                            {"hardware_threads", std::thread::hardware_concurrency()},
                            {"load_average_before", loadBefore},
                            {"load_average_after", loadAfter},
                            {"workers", o.workers},
                            {"seconds", o.seconds},
                            {"client_threads", settings.clientThreads},
                            {"pids", o.pids},
                            {"registrations_per_s", registered.perSecond()},
                            {"work_requests_per_s", work.perSecond()},
                            {"heartbeats_per_s", beats.perSecond()},
                            {"errors", errors},
                            {"phases", phase.json()}};
        std::ofstream(o.jsonPath) << j.dump(2) << "\n";
    }
    if (errors > 0) {
        std::fprintf(stderr, "tandem-bench-coordinator: %lld errors\n",
                     static_cast<long long>(errors));
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int workers = 100, clientThreads = 16, uploaders = 8, maxUploads = 0, httpThreads = 0;
    std::string replicateFraction;  // empty: the coordinator's default
    double seconds = 10, uploadRate = 0;
    std::string model = "tiny", jsonPath, databaseUrl;
    TargetOptions target;
    fs::path coordinator = TANDEM_COORDINATOR_BIN, parent = fs::temp_directory_path();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n%s", a.c_str(), kUsage);
                std::exit(2);
            }
            return argv[++i];
        };
        auto positive = [&](double lo) {
            const std::string v = next();
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(x >= lo)) {
                std::fprintf(stderr, "%s expects a number of at least %g, found '%s'\n", a.c_str(),
                             lo, v.c_str());
                std::exit(2);
            }
            return x;
        };
        if (a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--workers") {
            workers = static_cast<int>(positive(1));
        } else if (a == "--seconds") {
            seconds = positive(0.1);
        } else if (a == "--upload-rate") {
            uploadRate = positive(1024);
        } else if (a == "--json") {
            jsonPath = next();
        } else if (a == "--model") {
            model = next();
        } else if (a == "--client-threads") {
            clientThreads = static_cast<int>(positive(1));
        } else if (a == "--uploaders") {
            uploaders = static_cast<int>(positive(1));
        } else if (a == "--max-uploads") {
            maxUploads = static_cast<int>(positive(1));
        } else if (a == "--http-threads") {
            httpThreads = static_cast<int>(positive(2));
        } else if (a == "--replicate-fraction") {
            replicateFraction = next();
        } else if (a == "--db") {
            databaseUrl = next();
        } else if (a == "--coordinator") {
            coordinator = next();
        } else if (a == "--dir") {
            parent = next();
        } else if (a == "--target") {
            target.url = next();
            const auto colon = target.url.rfind(':');
            if (target.url.rfind("https://", 0) != 0 || colon < 8 ||
                std::atoi(target.url.c_str() + colon + 1) <= 0) {
                std::fprintf(stderr, "--target expects https://HOST:PORT, found '%s'\n",
                             target.url.c_str());
                return 2;
            }
        } else if (a == "--ca-file") {
            target.caFile = next();
        } else if (a == "--pids") {
            std::istringstream list(next());
            for (std::string pid; std::getline(list, pid, ',');)
                target.pids.push_back(static_cast<pid_t>(std::atoi(pid.c_str())));
        } else {
            std::fprintf(stderr, "unknown option %s\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (maxUploads == 0)
        maxUploads = uploaders;
    std::signal(SIGPIPE, SIG_IGN);
    if (!target.url.empty()) {
        if (target.caFile.empty()) {
            std::fprintf(stderr, "--target needs --ca-file\n%s", kUsage);
            return 2;
        }
        target.workers = workers;
        target.clientThreads = clientThreads;
        target.seconds = seconds;
        target.jsonPath = jsonPath;
        return runAgainstTarget(target);
    }
    const std::string loadBefore = loadAverage();

    // A fresh run: random letters, far more than one round of N units reads.
    const fs::path dir = parent / ("tandem-bench-coordinator-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
        std::ofstream corpus(dir / "corpus.txt");
        std::mt19937 rng(1);
        std::string text(4 << 20, ' ');
        for (char& c : text)
            c = static_cast<char>('a' + rng() % 26);
        corpus << text;
    }
    // One round of all N results: fixed quorum N, no timeouts during the run; the Byzantine
    // gate's norm and direction bounds off (the payloads are all the same small pattern).
    // The results it uploads are fp16 (tandem-coordinator's default is int8).
    std::vector<std::string> args = {"--result-encoding",
                                     "fp16",
                                     "--state-dir",
                                     (dir / "state").string(),
                                     "--corpus",
                                     (dir / "corpus.txt").string(),
                                     "--model",
                                     model,
                                     "--inner-steps",
                                     "2",
                                     "--batch",
                                     "1",
                                     "--quorum",
                                     std::to_string(workers),
                                     "--round-timeout",
                                     "86400",
                                     "--heartbeat-timeout",
                                     "86400",
                                     "--stall-timeout",
                                     "0",
                                     "--max-norm-ratio",
                                     "1000",
                                     "--clip-norm-ratio",
                                     "0",
                                     "--max-relative-norm",
                                     "0",
                                     "--min-cosine",
                                     "-1",
                                     "--max-uploads",
                                     std::to_string(maxUploads),
                                     "--threads",
                                     "2"};
    if (httpThreads > 0) {
        args.emplace_back("--http-threads");
        args.push_back(std::to_string(httpThreads));
    }
    if (!replicateFraction.empty()) {
        args.emplace_back("--replicate-fraction");
        args.push_back(replicateFraction);
    }
    if (!databaseUrl.empty()) {
        args.emplace_back("--db");
        args.push_back(databaseUrl);
    }
    auto process = CoordinatorProcess::start(coordinator, args, dir / "coordinator.log");
    if (!process) {
        std::fprintf(stderr, "%s\n", process.error().message.c_str());
        return 1;
    }
    const int64_t parameters =
        static_cast<int64_t>(metricValue(process->metrics(), "tandem_model_parameters"));
    std::printf("tandem-bench-coordinator: %s, %u hardware threads, load %s\n",
                bench::cpuModel().c_str(), std::thread::hardware_concurrency(), loadBefore.c_str());
    std::printf(
        "coordinator %s (pid %d), model %s (P = %lld), %d workers, %d client threads, "
        "%d uploaders (max-uploads %d), upload rate %s, state in %s\n",
        coordinator.c_str(), static_cast<int>(process->pid()), model.c_str(),
        static_cast<long long>(parameters), workers, clientThreads, uploaders, maxUploads,
        uploadRate > 0 ? (std::to_string(static_cast<int64_t>(uploadRate)) + " B/s").c_str()
                       : "unlimited",
        databaseUrl.empty() ? "SQLite" : "PostgreSQL");

    LoadSettings settings;
    settings.port = process->port();
    settings.caCert = dir / "state" / "tls" / "cert.pem";
    settings.workers = workers;
    settings.clientThreads = std::min(clientThreads, workers);
    settings.uploaders = std::min(uploaders, workers);
    settings.uploadBytesPerSecond = uploadRate;
    settings.parameters = parameters;
    Load load(settings);

    std::printf("%-14s %8s %6s %8s %12s %9s %9s %11s\n", "phase", "done", "errors", "seconds",
                "per second", "p50 ms", "p99 ms", "coord ms/req");
    PhaseRunner phase([&] { return process->figures().cpuSeconds; });
    const auto registered = phase("register", [&] { return load.registerAll(); });
    const auto work = phase("work", [&] { return load.requestWork(); });
    const auto beats = phase("heartbeat", [&] { return load.heartbeats(seconds); });
    const int64_t rssBeforeUploads = process->figures().rssBytes;
    int peakInFlight = 0;
    // VmRSS sampled while the uploads arrive: VmHWM at the end also holds the round close.
    std::atomic<bool> uploading{true};
    std::atomic<int64_t> rssUploading{rssBeforeUploads};
    std::thread sampler([&] {
        while (uploading) {
            rssUploading = std::max<int64_t>(rssUploading, process->figures().rssBytes);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    const auto uploads = phase("upload", [&] { return load.uploadAll(&peakInFlight); });
    uploading = false;
    sampler.join();

    // The round closes on the coordinator's ticker once all N results are in.
    std::string metrics;
    for (int i = 0; i < 3000; ++i) {
        metrics = process->metrics();
        if (metricValue(metrics, "tandem_rounds_closed_total") >= 1)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double closes = metricValue(metrics, "tandem_rounds_closed_total");
    const double roundCloseSeconds =
        closes >= 1 ? metricValue(metrics, "tandem_round_close_seconds_sum") / closes : -1;
    const ProcessFigures end = process->figures();
    const std::string loadAfter = loadAverage();
    const bool stopped = process->stop();

    const int64_t errors = registered.errors + work.errors + beats.errors + uploads.errors;
    std::printf(
        "uploads at once: %d (client side); round close %.3f s; coordinator peak RSS %.1f MiB "
        "(%.1f MiB before the uploads, %.1f MiB while they arrived), CPU %.1f s; load %s\n",
        peakInFlight, roundCloseSeconds, static_cast<double>(end.peakRssBytes) / (1 << 20),
        static_cast<double>(rssBeforeUploads) / (1 << 20),
        static_cast<double>(rssUploading.load()) / (1 << 20), end.cpuSeconds, loadAfter.c_str());
    for (const auto& e : load.errorSamples())
        std::printf("error: %s\n", e.c_str());

    if (!jsonPath.empty()) {
        nlohmann::json j = {{"benchmark", "coordinator"},
                            {"cpu", bench::cpuModel()},
                            {"hardware_threads", std::thread::hardware_concurrency()},
                            {"load_average_before", loadBefore},
                            {"load_average_after", loadAfter},
                            {"coordinator", coordinator.string()},
                            {"model", model},
                            {"state_store", databaseUrl.empty() ? "sqlite" : "postgresql"},
                            {"parameters", parameters},
                            {"workers", workers},
                            {"seconds", seconds},
                            {"client_threads", settings.clientThreads},
                            {"uploaders", settings.uploaders},
                            {"max_uploads", maxUploads},
                            {"upload_rate_bytes_per_s", uploadRate},
                            {"registrations_per_s", registered.perSecond()},
                            {"work_requests_per_s", work.perSecond()},
                            {"heartbeats_per_s", beats.perSecond()},
                            {"uploads_per_s", uploads.perSecond()},
                            {"uploads_accepted", uploads.done},
                            {"uploads_at_once", peakInFlight},
                            {"round_close_s", roundCloseSeconds},
                            {"peak_rss_bytes", end.peakRssBytes},
                            {"rss_before_uploads_bytes", rssBeforeUploads},
                            {"peak_rss_uploading_bytes", rssUploading.load()},
                            {"coordinator_cpu_s", end.cpuSeconds},
                            {"errors", errors},
                            {"phases", phase.json()}};
        std::ofstream(jsonPath) << j.dump(2) << "\n";
    }
    if (errors > 0 || closes < 1 || !stopped) {
        std::fprintf(stderr, "tandem-bench-coordinator: %lld errors%s%s (its log: %s)\n",
                     static_cast<long long>(errors), closes < 1 ? ", the round did not close" : "",
                     stopped ? "" : ", the coordinator did not stop cleanly",
                     (dir / "coordinator.log").c_str());
        return 1;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
