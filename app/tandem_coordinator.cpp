// tandem-coordinator: serves one DiLoCo training run over HTTPS (DESIGN.md §3, §5).
#include "command_line.hpp"
#include "coordinator.hpp"
#include "coordinator_commands.hpp"
#include "coordinator_tokenizer_command.hpp"
#include "log_stamp.hpp"
#include "metrics_server.hpp"
#include "result_format.hpp"
#include "server.hpp"
#include "tandem_version.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

using namespace tandem;
using namespace tandem::coord;

namespace {

const char* kUsage =
    "Usage: tandem-coordinator [options]\n"
    "       tandem-coordinator export --format safetensors|llmc --out PATH [--run R] "
    "[--version N]\n"
    "       tandem-coordinator status [--run R]\n"
    "       tandem-coordinator sample --prompt TEXT [--version N] [--tokens N] [--run R]\n"
    "       tandem-coordinator tokenizer train --vocab-size N --out MODEL PATH...\n";

const char* kDescription =
    "Serves a DiLoCo training run to Tandem workers over HTTPS (protocol v2, docs/protocol.md).";

std::mutex g_logMutex;

// The stop signals reach main through a pipe: the handler writes the signal's number, main
// reads it. A handler, not a mask and sigwait: OpenBLAS starts a thread before main() that
// blocks nothing, and a SIGTERM that came while main was still starting up (its own thread
// blocking the signal, not yet in sigwait) went to that thread and killed the process.
int g_stopPipe[2] = {-1, -1};

void onStopSignal(int sig) {
    const auto byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t written = write(g_stopPipe[1], &byte, 1);
}

// Blocks until SIGINT or SIGTERM has come (also before this call); returns which.
int waitForStopSignal() {
    unsigned char byte = 0;
    while (read(g_stopPipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    return byte;
}

void logLine(const std::string& line) {
    const std::string stamp = tandem::app::logStamp();
    std::lock_guard lock(g_logMutex);
    std::fprintf(stderr, "%s %s\n", stamp.c_str(), line.c_str());
    std::fflush(stderr);
}

struct ListenAddress {
    std::string host;
    int port = 0;
};

// HOST:PORT ([v6]:PORT too) of the option `option`.
ListenAddress parseListen(const std::string& option, const std::string& text) {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos)
        throw app::badValue(option + " expects HOST:PORT, found '" + text + "'");
    const auto port = app::parseInteger(text.substr(colon + 1), 0, 65535);
    if (!port)
        throw app::badValue(app::integerError(option + " port", text.substr(colon + 1), 0, 65535));
    ListenAddress out{text.substr(0, colon), static_cast<int>(*port)};
    if (out.host.size() > 2 && out.host.front() == '[')
        out.host = out.host.substr(1, out.host.size() - 2);
    return out;
}

// The command line into `cfg` and `server`; a value means "exit with it now".
std::optional<int> parseOptions(CLI::App& cli, int argc, char** argv, CoordinatorConfig& cfg,
                                ServerConfig& server, std::optional<ListenAddress>& metrics,
                                app::CoordinatorCommands& commands,
                                app::TokenizerCommand& tokenizer) {
    app::setUpCommandLine(cli, kUsage, {}, TANDEM_VERSION);
    cli.add_option_function<std::string>(
           "--listen",
           [&server](const std::string& v) {
               const ListenAddress a = parseListen("--listen", v);
               server.host = a.host;
               server.port = a.port;
           },
           "address to listen on (default 127.0.0.1:8443; port 0: any free port)")
        ->type_name("HOST:PORT");
    cli.add_option_function<std::string>(
           "--metrics-listen",
           [&metrics](const std::string& v) { metrics = parseListen("--metrics-listen", v); },
           "serve Prometheus metrics at http://HOST:PORT/metrics (plain HTTP; off by default)")
        ->type_name("HOST:PORT");
    cli.add_option("--state-dir", cfg.stateDir,
                   "database, weights, keys and certificates (default ./tandem-coordinator)")
        ->type_name("DIR");
    cli.add_option("--db", cfg.databaseUrl,
                   "keep the run state in PostgreSQL instead of <state-dir>/coordinator.db:\n"
                   "postgresql://USER@HOST:PORT/DATABASE (the password best in ~/.pgpass;\n"
                   "docs/operations.md); weights and uploads stay in --state-dir")
        ->type_name("URL");
    cli.add_option("--role", cfg.role,
                   "all (default): the one process that also aggregates and runs the round\n"
                   "clock; front: a front end on a --db postgresql:// run (registration,\n"
                   "work, heartbeats, status; no uploads), any number of them\n"
                   "(docs/operations.md, \"Front ends\")")
        ->transform(
            CLI::CheckedTransformer(
                std::map<std::string, coord::CoordinatorRole>{
                    {"all", coord::CoordinatorRole::All}, {"front", coord::CoordinatorRole::Front}},
                CLI::ignore_case)
                .description(""))
        ->type_name("all|front");
    cli.add_option("--upload-base", cfg.uploadBase,
                   "with --role front: https://HOST:PORT of the aggregating process, where\n"
                   "the manifests send uploads and weight downloads")
        ->type_name("URL");
    app::addInteger(cli, "--aggregation-shards", cfg.newRunShards, 1, 64, "K",
                    "a new run aggregated by K processes on one --db postgresql:// database,\n"
                    "each taking the result pieces of its range of the parameters (default\n"
                    "1; docs/operations.md, \"Aggregation shards\")");
    app::addInteger(cli, "--aggregation-shard", cfg.shard, 0, 63, "k",
                    "this process is shard k (0 to K - 1) of a sharded run; needs\n"
                    "--public-url (default 0)");
    cli.add_option("--public-url", cfg.publicUrl,
                   "a shard's https://HOST:PORT, where workers send its pieces and the other\n"
                   "shards fetch its parts")
        ->type_name("URL");
    cli.add_option("--corpus", cfg.corpus,
                   "text files or directories (needed when the state dir has no run yet)")
        ->type_name("PATH")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    cli.add_option("--tokenizer", cfg.tokenizer,
                   "a SentencePiece model ('tokenizer train'): a new run's --corpus is\n"
                   "tokenized with it once, and V is the tokenizer's")
        ->type_name("MODEL");
    cli.add_option("--shards", cfg.shards,
                   "llm.c token shards (uint16), files or directories of *.bin, instead of\n"
                   "--corpus; names with _val_ are the validation split; V from --model")
        ->type_name("PATH")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    cli.add_option_function<std::string>(
           "--model",
           [&cfg](const std::string& v) {
               if (auto m = ModelConfig::parse(v); !m)
                   throw app::badValue(m.error().message);
               cfg.model = v;
           },
           "tiny, small, medium (bytes, V=256), gpt2, gpt2-medium, gpt2-large, gpt2-xl (T=1024, "
           "V=50257) or L=..,NH=..,C=..,T=..[,V=..] (default tiny)")
        ->type_name("NAME");
    cli.add_option("--init", cfg.initWeights,
                   "starting weights of a new run: a safetensors file (Hugging Face GPT-2\n"
                   "names), an llm.c checkpoint, or an export folder; every shape must match\n"
                   "--model (default: random weights from --seed)")
        ->type_name("PATH");
    app::addInteger(cli, "--inner-steps", cfg.innerSteps, 1, 1000000, "H",
                    "inner steps per work unit for a fast worker (default 50)");
    app::addInteger(cli, "--batch", cfg.batch, 1, 65536, "B",
                    "batch size of the inner steps (default 8)");
    app::addInteger(cli, "--seq-len", cfg.seqLen, 1, 1 << 20, "T",
                    "sequence length (default: the model's)");
    cli.add_option_function<std::string>(
           "--quorum",
           [&cfg](const std::string& v) {
               cfg.quorumOfActiveWorkers = v == "auto";
               cfg.quorum = 1;
               if (v == "auto")
                   return;
               const auto n = app::parseInteger(v, 1, 1000000);
               if (!n)
                   throw app::badValue(app::integerError("--quorum", v, 1, 1000000));
               cfg.quorum = static_cast<int>(*n);
           },
           "auto (default): a round closes once every active worker (holding a\n"
           "unit with a live heartbeat) has reported; Q: at Q results")
        ->type_name("auto|Q");
    app::addInteger(cli, "--round-timeout", cfg.roundTimeoutSeconds, 1, 86400 * 30, "SECONDS",
                    "a round closes at this age with any results (default 600)");
    cli.add_option_function<std::string>(
           "--weight-deltas",
           [&cfg](const std::string& v) {
               auto codec = parseWeightDeltaCodec(v);
               if (!codec)
                   throw app::badValue("--weight-deltas expects off, fp16 or int8, found '" + v +
                                       "'");
               cfg.weightDeltas = *codec;
           },
           "a new run's versions move by a quantized update with error feedback, so\n"
           "workers can rebuild them from small deltas: int8, fp16, or off (default off;\n"
           "kept with the run)")
        ->type_name("off|fp16|int8");
    app::addInteger(cli, "--max-staleness", cfg.maxStaleness, 0, 1000, "S",
                    "accept results up to S versions old, with reduced weight (default 1)");
    app::addNonNegative(cli, "--stale-weight", cfg.staleWeightFactor, "F",
                        "weight factor per version of staleness (default 0.5)");
    app::addNonNegative(cli, "--max-norm-ratio", cfg.maxNormRatio, "R",
                        "refuse deltas with norm above R x the reference norm, the lower "
                        "median of the accepted results of the last 4 rounds (default 10)");
    app::addNonNegative(cli, "--clip-norm-ratio", cfg.clipNormRatio, "R",
                        "reduce the weight of deltas with norm above R x the reference to count "
                        "as norm R x the reference; 0: never (default 3)");
    app::addNonNegative(cli, "--max-relative-norm", cfg.maxRelativeNorm, "F",
                        "refuse deltas with norm above F x the weights' norm, from the first "
                        "result on; 0: off (default 1)");
    app::addNonNegative(cli, "--max-absolute-norm", cfg.maxAbsoluteNorm, "N",
                        "refuse deltas with L2 norm above N; 0: off (default 0)");
    cli.add_option_function<std::string>(
           "--min-cosine",
           [&cfg](const std::string& v) {
               char* end = nullptr;
               const double c = std::strtod(v.c_str(), &end);
               if (v.empty() || *end != '\0' || !(c >= -1.0 && c <= 1.0))
                   throw app::badValue("--min-cosine expects a number in [-1, 1], found '" + v +
                                       "'");
               cfg.minCosine = c;
           },
           "refuse deltas whose cosine similarity to the last outer step is below C; -1: "
           "off (default -1: honest results also point against the last step)")
        ->type_name("C");
    app::addNonNegative(cli, "--replicate-fraction", cfg.replicateFraction, "F",
                        "give about this fraction of work units also to a second worker and\n"
                        "compare the two results (replication spot-checks); 0: off\n"
                        "(default 0.05)");
    app::addNonNegative(cli, "--replicate-tolerance", cfg.replicateTolerance, "D",
                        "two results of one unit agree when ||a - b|| / max(||a||, ||b||) is at\n"
                        "most D; otherwise both are held out (default 1)");
    app::addInteger(cli, "--replicate-strikes", cfg.replicateStrikes, 1, 1000000, "N",
                    "block a client after N disagreeing spot-checks, when they outnumber its\n"
                    "agreeing ones (default 3)");
    app::addInteger(cli, "--target-wu-seconds", cfg.targetWorkUnitSeconds, 1, 86400, "S",
                    "work units sized to take about this long (default 300)");
    app::addInteger(cli, "--heartbeat-timeout", cfg.heartbeatTimeoutSeconds, 1, 86400, "S",
                    "reassign work without progress for S seconds (default 180)");
    app::addInteger(cli, "--stall-timeout", cfg.stallTimeoutSeconds, 0, 86400 * 30, "S",
                    "reassign work whose heartbeats report no step forward for S seconds;\n"
                    "0: never (default 600)");
    app::addNonNegative(
        cli, "--outer-lr", cfg.outer.lr, "LR",
        "outer Nesterov learning rate (default 0.35; above about 0.68 at momentum 0.9, runs "
        "whose results arrive one version late diverge)");
    app::addNonNegative(cli, "--outer-momentum", cfg.outer.momentum, "MU",
                        "outer Nesterov momentum (default 0.9)");
    cli.add_option_function<std::string>(
           "--start-blend",
           [&cfg](const std::string& v) {
               char* end = nullptr;
               const double b = std::strtod(v.c_str(), &end);
               if (v.empty() || *end != '\0' || !(b >= 0.0 && b <= 1.0))
                   throw app::badValue("--start-blend expects a number in [0, 1], found '" + v +
                                       "'");
               cfg.startBlend = static_cast<float>(b);
           },
           "a unit started while the worker's last result is not in the weights yet starts\n"
           "from (1 - B) x the weights + B x the worker's own last end point; 0: from the\n"
           "weights (default 0.5)")
        ->type_name("B");
    cli.add_option_function<std::string>(
           "--result-encoding",
           [&cfg](const std::string& v) {
               const auto e = net::encodingFromName(v);
               if (!e)
                   throw app::badValue("--result-encoding expects fp16 or int8, found '" + v + "'");
               cfg.resultEncoding = *e;
           },
           "what a new run's results carry: int8 with a scale per 256 values (half\n"
           "the bytes up; workers of protocol 5 and later only), or fp16 (older workers\n"
           "too); kept with the run (default int8)")
        ->type_name("fp16|int8");
    cli.add_option_function<std::string>(
           "--inner-lr",
           [&cfg](const std::string& v) {
               const auto d = app::parseNonNegative(v);
               if (!d)
                   throw app::badValue(app::nonNegativeError("--inner-lr", v));
               cfg.innerPeakLr = static_cast<float>(*d);
               cfg.innerMinLr = static_cast<float>(*d / 10);
           },
           "peak inner AdamW learning rate (default 6e-4)")
        ->type_name("LR");
    app::addInteger(cli, "--lr-warmup-steps", cfg.lrWarmupSteps, 0, 1LL << 40, "N",
                    "the inner lr warms up over the run's first N steps (default 100);\n"
                    "the run's step is its version x --inner-steps");
    app::addInteger(cli, "--lr-decay-steps", cfg.lrDecaySteps, 0, 1LL << 40, "N",
                    "cosine decay of the inner lr to a tenth of its peak at the run's\n"
                    "step N (default 0: constant after the warmup, for a run of open\n"
                    "length)");
    app::addInteger(cli, "--threads", cfg.threads, 1, 1024, "N",
                    "threads for aggregation, validation and samples (default 2)");
    cli.add_option("--sample-prompt", cfg.samples.prompts,
                   "a prompt the model continues after each new version (repeatable;\n"
                   "default: three short English prompts); see GET /v1/runs/{run}/samples")
        ->type_name("TEXT")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
    app::addInteger(cli, "--sample-tokens", cfg.samples.tokens, 1, 4096, "N",
                    "tokens each sample continues its prompt by (default 64)");
    app::addNonNegative(cli, "--sample-seconds", cfg.samples.maxSeconds, "S",
                        "write samples only while all prompts take under about S seconds on\n"
                        "this CPU, predicted from the validation pass (default 10; 0: never)");
    app::addInteger(cli, "--http-threads", server.threads, 2, 1024, "N",
                    "HTTPS worker threads; a slow upload holds one while it streams\n"
                    "(default 512)");
    app::addNonNegative(cli, "--register-rate", server.registerPerHour, "N",
                        "registrations allowed per source address and hour after the burst;\n"
                        "0: unlimited (default 0)");
    app::addInteger(cli, "--register-burst", server.registerBurst, 1, 1000000, "N",
                    "registrations one source address may make at once (default 10)");
    cli.add_option("--register-secret", server.registerSecret,
                   "registrations must send this secret (the worker's --register-secret);\n"
                   "default: none needed")
        ->type_name("SECRET");
    app::addInteger(cli, "--max-uploads", cfg.maxConcurrentUploads, 1, 1024, "N",
                    "concurrent uploads in all; each holds an HTTPS thread and its 2P bytes\n"
                    "reserved in <state-dir>/uploads, not RAM (default 256)");
    cli.add_option("--mirror", cfg.mirrors,
                   "base URL of a mirror of <state-dir>/blobs (repeatable, in order of\n"
                   "preference): https://host[:port][/path], serving /blobs/sha256/<hex>;\n"
                   "listed in manifests after the coordinator's own (docs/operations.md)")
        ->type_name("URL")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
    app::addInteger(cli, "--seed", cfg.seed, 0, (1LL << 53) - 1, "N",
                    "seed of the initial weights (default 1)");
    cli.add_option("--tls-cert", server.certFile,
                   "certificate (PEM); with --tls-key. Without them a self-signed identity is\n"
                   "made in <state-dir>/tls and its public-key pin is printed")
        ->type_name("FILE");
    cli.add_option("--tls-key", server.keyFile, "the certificate's private key (PEM)")
        ->type_name("FILE");
    cli.add_option("--tls-name", server.extraNames,
                   "another DNS name or address for the generated certificate (repeatable;\n"
                   "localhost, 127.0.0.1, ::1 and the listen host are always in it)")
        ->type_name("NAME")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->allow_extra_args(false);
    app::addCoordinatorCommands(cli, commands);
    app::addTokenizerCommand(cli, tokenizer);
    return app::parseCommandLine(cli, argc, argv);
}

int fail(const std::string& message) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", message.c_str());
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    CoordinatorConfig cfg;
    cfg.newRunResultEncoding = net::kEncodingInt8;
    cfg.stateDir = "tandem-coordinator";
    cfg.quorum = 1;  // --quorum auto
    cfg.quorumOfActiveWorkers = true;
    cfg.replicateFraction = 0.05;  // spot-checks on (the library's default is off)
    ServerConfig server;
    std::optional<ListenAddress> metricsAddress;
    CLI::App cli(kDescription, "tandem-coordinator");
    app::CoordinatorCommands commands;
    app::TokenizerCommand tokenizer;
    if (auto exitCode =
            parseOptions(cli, argc, argv, cfg, server, metricsAddress, commands, tokenizer))
        return *exitCode;
    // Spot-checks compare whole results, which no shard of a sharded run holds: a process
    // started as a shard has them off unless they were asked for (then its start says why not).
    if ((!cfg.publicUrl.empty() || cfg.newRunShards > 1) && cli.count("--replicate-fraction") == 0)
        cfg.replicateFraction = 0;
    if (auto exitCode = app::runCoordinatorCommand(commands, cfg.stateDir, cfg.databaseUrl))
        return *exitCode;
    if (*tokenizer.train)
        return app::runTokenizerTrain(tokenizer.spec);
    if (cfg.lrDecaySteps > 0 && cfg.lrDecaySteps <= cfg.lrWarmupSteps)
        return app::usageError("tandem-coordinator",
                               "--lr-decay-steps (" + std::to_string(cfg.lrDecaySteps) +
                                   ") must be larger than --lr-warmup-steps (" +
                                   std::to_string(cfg.lrWarmupSteps) + ")");

    // From here SIGINT and SIGTERM stop the coordinator cleanly, also during its start (a
    // handler replaces the SIG_IGN a shell gives background jobs for SIGINT).
    if (pipe2(g_stopPipe, O_CLOEXEC) != 0)
        return fail(std::string("cannot make the stop pipe: ") + std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = onStopSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
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
    std::unique_ptr<MetricsServer> metrics;
    if (metricsAddress) {
        auto m = MetricsServer::start(**coordinator, metricsAddress->host, metricsAddress->port,
                                      logLine);
        if (!m)
            return fail(m.error().message);
        metrics = std::move(*m);
        logLine("metrics at http://" + metricsAddress->host + ":" +
                std::to_string(metrics->port()) + "/metrics");
        std::printf("metrics on port %d\n", metrics->port());
    }
    std::fflush(stdout);

    const int sig = waitForStopSignal();
    logLine(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ", stopping");
    metrics.reset();
    (*srv)->stop();
    srv->reset();
    coordinator->reset();
    logLine("stopped");
    return 0;
}
