// tandem-coordinator: serves one DiLoCo training run over HTTPS (DESIGN.md §3, §5).
#include "coordinator.hpp"
#include "log_stamp.hpp"
#include "server.hpp"

#include <pthread.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

using namespace tandem;
using namespace tandem::coord;

namespace {

const char* kUsage = R"(Usage: tandem-coordinator [options]

Serves a DiLoCo training run to Tandem workers over HTTPS (protocol v1, docs/protocol.md).

  --listen HOST:PORT        address to listen on (default 127.0.0.1:8443; port 0: any free port)
  --state-dir DIR           database, weights, keys and certificates (default ./tandem-coordinator)
  --corpus PATH...          text files or directories (needed when the state dir has no run yet)
  --model NAME              tiny, small, medium or L=..,NH=..,C=..,T=.. (default tiny)
  --inner-steps H           inner steps per work unit for a fast worker (default 50)
  --batch B                 batch size of the inner steps (default 8)
  --seq-len T               sequence length (default: the model's)
  --quorum auto|Q           auto (default): a round closes once every active worker (holding a
                            unit with a live heartbeat) has reported; Q: at Q results
  --round-timeout SECONDS   a round closes at this age with any results (default 600)
  --max-staleness S         accept results up to S versions old, with reduced weight (default 1)
  --stale-weight F          weight factor per version of staleness (default 0.5)
  --max-norm-ratio R        refuse deltas with norm above R x the round median (default 10)
  --target-wu-seconds S     work units sized to take about this long (default 300)
  --heartbeat-timeout S     reassign work without progress for S seconds (default 180)
  --outer-lr LR             outer Nesterov learning rate (default 0.7)
  --outer-momentum MU       outer Nesterov momentum (default 0.9)
  --inner-lr LR             peak inner AdamW learning rate (default 6e-4)
  --lr-warmup-steps N       the inner lr warms up over the run's first N steps (default 100);
                            the run's step is its version x --inner-steps
  --lr-decay-steps N        cosine decay of the inner lr to a tenth of its peak at the run's
                            step N (default 0: constant after the warmup, for a run of open
                            length)
  --threads N               threads for aggregation and validation (default 2)
  --http-threads N          HTTPS worker threads (default 32)
  --max-uploads N           concurrent uploads in all (default 4)
  --seed N                  seed of the initial weights (default 1)
  --tls-cert FILE --tls-key FILE
                            certificate and key; without them a self-signed identity is made in
                            <state-dir>/tls and its public-key pin is printed
  --tls-name NAME           another DNS name or address for the generated certificate (repeatable;
                            localhost, 127.0.0.1, ::1 and the listen host are always in it)
  --help                    this text
  --version                 the version
)";

std::mutex g_logMutex;

void logLine(const std::string& line) {
    const std::string stamp = tandem::app::logStamp();
    std::lock_guard lock(g_logMutex);
    std::fprintf(stderr, "%s %s\n", stamp.c_str(), line.c_str());
    std::fflush(stderr);
}

int fail(const std::string& message) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", message.c_str());
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    CoordinatorConfig cfg;
    cfg.stateDir = "tandem-coordinator";
    cfg.quorum = 1;  // --quorum auto
    cfg.quorumOfActiveWorkers = true;
    ServerConfig server;
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string error;
    auto need = [&](size_t& i) -> const std::string* {
        if (i + 1 >= args.size()) {
            error = args[i] + " needs a value";
            return nullptr;
        }
        return &args[++i];
    };
    auto toInt = [&](const std::string& opt, const std::string& v, long long lo, long long hi,
                     long long& out) {
        char* end = nullptr;
        errno = 0;
        out = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno != 0 || out < lo || out > hi) {
            error = opt + " expects an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], found '" + v + "'";
            return false;
        }
        return true;
    };
    auto toDouble = [&](const std::string& opt, const std::string& v, double& out) {
        char* end = nullptr;
        out = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(out >= 0)) {
            error = opt + " expects a non-negative number, found '" + v + "'";
            return false;
        }
        return true;
    };
    for (size_t i = 0; i < args.size() && error.empty(); ++i) {
        const std::string& a = args[i];
        long long n = 0;
        double d = 0;
        const std::string* v = nullptr;
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--version") {
            std::printf("tandem-coordinator %s\n", TANDEM_VERSION);
            return 0;
        } else if (a == "--corpus") {
            size_t before = cfg.corpus.size();
            while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
                cfg.corpus.emplace_back(args[++i]);
            if (cfg.corpus.size() == before)
                error = "--corpus needs at least one path";
        } else if (a == "--listen") {
            if (!(v = need(i)))
                break;
            const size_t colon = v->rfind(':');
            if (colon == std::string::npos) {
                error = "--listen expects HOST:PORT, found '" + *v + "'";
                break;
            }
            server.host = v->substr(0, colon);
            if (server.host.size() > 2 && server.host.front() == '[')
                server.host = server.host.substr(1, server.host.size() - 2);
            if (!toInt("--listen port", v->substr(colon + 1), 0, 65535, n))
                break;
            server.port = static_cast<int>(n);
        } else if (a == "--state-dir") {
            if (!(v = need(i)))
                break;
            cfg.stateDir = *v;
        } else if (a == "--model") {
            if (!(v = need(i)))
                break;
            cfg.model = *v;
            auto m = ModelConfig::parse(*v);
            if (!m)
                error = m.error().message;
        } else if (a == "--tls-cert") {
            if (!(v = need(i)))
                break;
            server.certFile = *v;
        } else if (a == "--tls-name") {
            if (!(v = need(i)))
                break;
            server.extraNames.push_back(*v);
        } else if (a == "--tls-key") {
            if (!(v = need(i)))
                break;
            server.keyFile = *v;
        } else {
            struct IntOpt {
                const char* name;
                int* target;
                long long lo, hi;
            };
            const IntOpt ints[] = {{"--inner-steps", &cfg.innerSteps, 1, 1000000},
                                   {"--batch", &cfg.batch, 1, 65536},
                                   {"--seq-len", &cfg.seqLen, 1, 1 << 20},
                                   {"--round-timeout", &cfg.roundTimeoutSeconds, 1, 86400 * 30},
                                   {"--max-staleness", &cfg.maxStaleness, 0, 1000},
                                   {"--target-wu-seconds", &cfg.targetWorkUnitSeconds, 1, 86400},
                                   {"--heartbeat-timeout", &cfg.heartbeatTimeoutSeconds, 1, 86400},
                                   {"--threads", &cfg.threads, 1, 1024},
                                   {"--http-threads", &server.threads, 2, 1024},
                                   {"--max-uploads", &cfg.maxConcurrentUploads, 1, 1024}};
            bool handled = false;
            for (const auto& o : ints) {
                if (a != o.name)
                    continue;
                handled = true;
                if ((v = need(i)) && toInt(a, *v, o.lo, o.hi, n))
                    *o.target = static_cast<int>(n);
            }
            if (handled)
                continue;
            if (a == "--quorum") {
                if ((v = need(i)) && *v == "auto") {
                    cfg.quorum = 1;
                    cfg.quorumOfActiveWorkers = true;
                } else if (v && toInt(a, *v, 1, 1000000, n)) {
                    cfg.quorum = static_cast<int>(n);
                    cfg.quorumOfActiveWorkers = false;
                }
            } else if (a == "--seed") {
                if ((v = need(i)) && toInt(a, *v, 0, (1LL << 53) - 1, n))
                    cfg.seed = static_cast<uint64_t>(n);
            } else if (a == "--lr-warmup-steps" || a == "--lr-decay-steps") {
                if ((v = need(i)) && toInt(a, *v, 0, 1LL << 40, n))
                    (a == "--lr-warmup-steps" ? cfg.lrWarmupSteps : cfg.lrDecaySteps) = n;
            } else if (a == "--stale-weight" || a == "--max-norm-ratio" || a == "--outer-lr" ||
                       a == "--outer-momentum" || a == "--inner-lr") {
                if (!(v = need(i)) || !toDouble(a, *v, d))
                    break;
                if (a == "--stale-weight")
                    cfg.staleWeightFactor = d;
                if (a == "--max-norm-ratio")
                    cfg.maxNormRatio = d;
                if (a == "--outer-lr")
                    cfg.outer.lr = static_cast<float>(d);
                if (a == "--outer-momentum")
                    cfg.outer.momentum = static_cast<float>(d);
                if (a == "--inner-lr") {
                    cfg.innerPeakLr = static_cast<float>(d);
                    cfg.innerMinLr = static_cast<float>(d / 10);
                }
            } else {
                error = "unknown option '" + a + "' (see --help)";
            }
        }
    }
    if (error.empty() && cfg.lrDecaySteps > 0 && cfg.lrDecaySteps <= cfg.lrWarmupSteps)
        error = "--lr-decay-steps (" + std::to_string(cfg.lrDecaySteps) +
                ") must be larger than --lr-warmup-steps (" + std::to_string(cfg.lrWarmupSteps) +
                ")";
    if (!error.empty())
        return fail(error);

    // Signals are taken by sigwait below; every thread started from here inherits the mask.
    // A shell starts background jobs with SIGINT ignored; sigwait needs it deliverable.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    logLine("tandem-coordinator " TANDEM_VERSION " starting, state in " + cfg.stateDir.string());
    auto coordinator = Coordinator::open(cfg, logLine);
    if (!coordinator)
        return fail(coordinator.error().message);
    auto tls = ensureTlsIdentity(cfg.stateDir, server);
    if (!tls)
        return fail("TLS: " + tls.error().message);
    if (tls->generated)
        logLine("generated a self-signed certificate " + tls->cert.string());
    logLine("certificate public-key pin: " + tls->pin + " (also in " +
            (cfg.stateDir / "tls" / "pin.txt").string() + ")");
    auto srv = Server::create(**coordinator, server, *tls, logLine);
    if (!srv)
        return fail(srv.error().message);
    if (auto st = (*srv)->start(); !st)
        return fail(st.error().message);
    logLine("listening on https://" + server.host + ":" + std::to_string((*srv)->port()));
    // Tests read the port from here when they ask for port 0.
    std::printf("listening on port %d\npin %s\n", (*srv)->port(), tls->pin.c_str());
    std::fflush(stdout);

    int sig = 0;
    sigwait(&signals, &sig);
    logLine(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", stopping");
    (*srv)->stop();
    srv->reset();
    coordinator->reset();
    logLine("stopped");
    return 0;
}
