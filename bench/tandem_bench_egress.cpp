// tandem-bench-egress: bytes that leave the coordinator per round, with and without a caching
// mirror (issue 15 item 3; docs/benchmarks.md "Egress per round"). Starts the real
// tandem-coordinator (a child process) and, with --mirror, the real nginx with
// installer/nginx/tandem-blobs-mirror.conf in front of it; N workers, each with the worker's own
// client (net/coordinator_client.hpp: protocol 4, URLs ordered by measured speed, SHA-256
// checked), download their unit's weights and data range and upload a small result, round after
// round. Per round: the coordinator's download bytes (its /metrics), the bytes workers received
// and from which server.
//
// --weight-deltas int8|fp16 runs the coordinator with exact quantized weight deltas: a worker
// that holds the previous version's weights downloads the manifest's deltas (protocol 5)
// instead, rebuilds the weights as the worker engine does (core/weight_rebuild.hpp) and checks
// them against the manifest's SHA-256 (a mismatch is an error here: the bench measures the working
// path).
//
// --coordinator-rate B puts the fault proxy (tests/tools) between the workers and the
// coordinator, each connection slowed to B bytes/s: a coordinator whose uplink is the
// bottleneck, as it is at scale (the mirror reaches the coordinator directly).
//
//   tandem-bench-egress [--workers N] [--rounds R] [--model NAME] [--mirror]
//                       [--weight-deltas off|fp16|int8] [--coordinator-rate BYTES_PER_S]
//                       [--json FILE]
#include "coordinator_client.hpp"
#include "coordinator_process.hpp"
#include "fault_proxy.hpp"
#include "nginx_process.hpp"
#include "result_format.hpp"
#include "weight_delta.hpp"
#include "weight_rebuild.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;
using namespace tandem::bench;
namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::string s;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0)
        s.append(buf, static_cast<size_t>(in.gcount()));
    return s;
}

double downloadBytes(const CoordinatorProcess& p) {
    const std::string m = p.metrics();
    double sum = 0;
    for (const char* kind : {"blobs", "weights", "data"}) {
        const double v =
            metricValue(m, std::string("tandem_download_bytes_total{kind=\"") + kind + "\"}");
        if (!std::isnan(v))
            sum += v;
    }
    return sum;
}

std::string cpuModel() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
            return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

std::string loadAverage() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

struct RoundFigures {
    double coordinatorBytes = 0;      // sent by the coordinator in this round (its metrics)
    int64_t receivedBytes = 0;        // received by the workers (all sources)
    std::map<std::string, int> from;  // downloads per serving host ("coordinator", "mirror")
    int rebuilt = 0;                  // workers that rebuilt the weights from deltas
};

}  // namespace

int main(int argc, char** argv) {
    int workers = 8, rounds = 3;
    std::string model = "tiny", jsonFile;
    bool withMirror = false;
    int64_t coordinatorRate = 0;
    std::string weightDeltas = "off";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--workers")
            workers = std::atoi(next().c_str());
        else if (a == "--rounds")
            rounds = std::atoi(next().c_str());
        else if (a == "--model")
            model = next();
        else if (a == "--mirror")
            withMirror = true;
        else if (a == "--weight-deltas")
            weightDeltas = next();
        else if (a == "--coordinator-rate")
            coordinatorRate = std::atoll(next().c_str());
        else if (a == "--json")
            jsonFile = next();
        else {
            std::fprintf(stderr,
                         "usage: tandem-bench-egress [--workers N] [--rounds R] [--model NAME] "
                         "[--mirror] [--weight-deltas off|fp16|int8] "
                         "[--coordinator-rate BYTES_PER_S] [--json FILE]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    const bool deltas = weightDeltas != "off";
    if (!parseWeightDeltaCodec(weightDeltas)) {
        std::fprintf(stderr, "--weight-deltas expects off, fp16 or int8\n");
        return 2;
    }
    if (workers < 1 || rounds < 1) {
        std::fprintf(stderr, "--workers and --rounds must be at least 1\n");
        return 2;
    }
    std::optional<fs::path> nginx;
    if (withMirror && !(nginx = testing::findNginx())) {
        std::fprintf(stderr, "--mirror needs nginx (Debian: apt-get install nginx-light)\n");
        return 1;
    }
    const std::string load = loadAverage();
    const fs::path dir =
        fs::temp_directory_path() / ("tandem-bench-egress-" + std::to_string(::getpid()));
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
    const int mirrorPort = withMirror ? testing::freeLoopbackPort() : 0;
    const std::string mirrorUrl = "https://127.0.0.1:" + std::to_string(mirrorPort);
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
                                     "--replicate-fraction",
                                     "0",
                                     "--max-norm-ratio",
                                     "1000",
                                     "--clip-norm-ratio",
                                     "0",
                                     "--max-relative-norm",
                                     "0",
                                     "--min-cosine",
                                     "-1",
                                     "--threads",
                                     "2",
                                     "--weight-deltas",
                                     weightDeltas};
    if (withMirror) {
        args.emplace_back("--mirror");
        args.push_back(mirrorUrl);
    }
    auto coordinator =
        CoordinatorProcess::start(TANDEM_COORDINATOR_BIN, args, dir / "coordinator.log");
    if (!coordinator) {
        std::fprintf(stderr, "%s\n", coordinator.error().message.c_str());
        return 1;
    }
    // The mirror's own TLS identity, trusted by the workers as a mirror CA.
    const std::string openssl =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout '" +
        (dir / "mirror-key.pem").string() + "' -out '" + (dir / "mirror-cert.pem").string() +
        "' -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 "
        "2>/dev/null";
    if (std::system(openssl.c_str()) != 0) {
        std::fprintf(stderr, "openssl could not make the mirror's certificate\n");
        return 1;
    }
    std::unique_ptr<testing::NginxProcess> mirror;
    if (withMirror) {
        auto block = testing::fillPlaceholders(
            readAll(fs::path(TANDEM_SOURCE_DIR) / "installer" / "nginx" /
                    "tandem-blobs-mirror.conf"),
            {{"LISTEN", "127.0.0.1:" + std::to_string(mirrorPort)},
             {"TLS_CERT", (dir / "mirror-cert.pem").string()},
             {"TLS_KEY", (dir / "mirror-key.pem").string()},
             {"CACHE_DIR", (dir / "mirror-cache").string()},
             {"CACHE_SIZE", "4g"},
             {"ORIGIN", "https://127.0.0.1:" + std::to_string(coordinator->port())},
             {"ORIGIN_NAME", "localhost"},
             {"ORIGIN_CA", (dir / "state" / "tls" / "cert.pem").string()}});
        if (!block) {
            std::fprintf(stderr, "%s\n", block.error().message.c_str());
            return 1;
        }
        fs::create_directories(dir / "nginx");
        mirror = std::make_unique<testing::NginxProcess>(*nginx, dir / "nginx", *block, mirrorPort);
        if (auto st = mirror->start(); !st) {
            std::fprintf(stderr, "%s\n", st.error().message.c_str());
            return 1;
        }
    }

    testing::FaultProxy slowLink("127.0.0.1", coordinator->port(), 1);
    if (coordinatorRate > 0) {
        testing::RandomFaults slow;
        slow.slowProbability = 1;
        slow.slowBytesPerSecond = coordinatorRate;
        slow.maxFaultyConnections = 1 << 30;
        slowLink.setRandomFaults(slow);
        if (auto st = slowLink.start(); !st) {
            std::fprintf(stderr, "%s\n", st.error().message.c_str());
            return 1;
        }
    }
    net::HttpClientConfig config;
    config.baseUrl = "https://127.0.0.1:" +
                     std::to_string(coordinatorRate > 0 ? slowLink.port() : coordinator->port());
    config.caFile = dir / "state" / "tls" / "cert.pem";
    config.mirrorCaFile = dir / "mirror-cert.pem";
    config.proxy = "direct";
    struct Worker {
        std::unique_ptr<net::CoordinatorClient> client;
        net::SigningKey key;
        int64_t heldVersion = -1;  // the version of the weights file it holds
    };
    std::vector<Worker> pool;
    for (int w = 0; w < workers; ++w) {
        auto c = net::CoordinatorClient::create(config);
        auto key = net::SigningKey::generate();
        if (!c || !key) {
            std::fprintf(stderr, "cannot make worker %d\n", w);
            return 1;
        }
        auto reg = c.value()->registerClient(
            {"egress-" + std::to_string(w), key->publicKey(), "tandem-bench-egress"});
        if (!reg) {
            std::fprintf(stderr, "register: %s\n", reg.error().message.c_str());
            return 1;
        }
        pool.push_back({std::move(c.value()), std::move(*key)});
    }

    std::printf(
        "tandem-bench-egress: %s, load %s; model %s, %d workers, %d rounds, %s, weight deltas "
        "%s, coordinator link %s\n",
        cpuModel().c_str(), load.c_str(), model.c_str(), workers, rounds,
        withMirror ? ("mirror " + mirrorUrl).c_str() : "no mirror", weightDeltas.c_str(),
        coordinatorRate > 0 ? (std::to_string(coordinatorRate) + " B/s per connection").c_str()
                            : "loopback");
    std::printf("%6s %14s %14s %14s  %s\n", "round", "weights B", "coord sent B", "workers got B",
                "downloads by source");
    std::vector<RoundFigures> figures;
    int64_t weightsBytes = 0;
    for (int r = 0; r < rounds; ++r) {
        RoundFigures f;
        const double before = downloadBytes(*coordinator);
        std::vector<std::pair<Worker*, net::Manifest>> units;
        for (int w = 0; w < workers; ++w) {
            Worker& worker = pool[static_cast<size_t>(w)];
            auto offer = worker.client->requestWork(net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30});
            if (!offer || !offer->manifest) {
                std::fprintf(stderr, "work: %s\n",
                             offer ? "no work" : offer.error().message.c_str());
                return 1;
            }
            const net::Manifest& m = *offer->manifest;
            weightsBytes = m.weightsBytes;
            const fs::path wdir = dir / ("worker-" + std::to_string(w));
            fs::create_directories(wdir);
            const auto chain =
                deltas ? core::weightDeltaChain(m, worker.heldVersion) : std::nullopt;
            const bool fromDeltas = chain && core::weightDeltaChainBytes(*chain) < m.weightsBytes;
            if (fromDeltas) {
                // The worker engine's path (core/weight_rebuild.hpp), over this worker's client.
                auto fetch = [&](const net::WeightDeltaRef& d,
                                 const fs::path& dest) -> Expected<int64_t> {
                    auto got = worker.client->downloadWeightDelta(m, d, dest);
                    if (!got)
                        return makeError(got.error().message);
                    return got->bytesTransferred;
                };
                auto got = core::rebuildWeightsFromDeltas(m, wdir / "weights", worker.heldVersion,
                                                          *chain, wdir, fetch, wdir / "weights");
                if (!got) {
                    std::fprintf(stderr, "worker %d: %s\n", w, got.error().message.c_str());
                    return 1;
                }
                f.receivedBytes += got->bytesDownloaded;
                ++f.rebuilt;
            }
            worker.heldVersion = m.baseVersion;
            for (int kind = fromDeltas ? 1 : 0; kind < 2; ++kind) {
                const fs::path dest = wdir / (kind == 0 ? "weights" : "data");
                fs::remove(dest);
                auto got = kind == 0 ? worker.client->downloadWeights(m, dest)
                                     : worker.client->downloadData(m, dest);
                if (!got) {
                    std::fprintf(stderr, "download: %s\n", got.error().message.c_str());
                    return 1;
                }
                f.receivedBytes += got->bytesTransferred;
                ++f.from[got->url.rfind("https://", 0) == 0 ? "mirror" : "coordinator"];
            }
            units.emplace_back(&worker, m);
        }
        f.coordinatorBytes = downloadBytes(*coordinator) - before;
        for (auto& [worker, m] : units) {
            net::ResultHeader h;
            h.workUnitId = m.workUnitId;
            h.parameterCount = m.model.parameterCount();
            h.tokens = int64_t{m.innerSteps} * m.batch * m.seqLen;
            h.steps = m.innerSteps;
            h.lossFirst = h.lossLast = h.lossMean = 5;
            // Small and alike, but not the same bytes twice (replays are refused).
            std::vector<uint16_t> payload(static_cast<size_t>(h.parameterCount), 0x1000);
            payload[0] = static_cast<uint16_t>(0x1000 + m.workUnitId % 1024);
            const auto body = net::buildResult(h, payload);
            const fs::path file = dir / ("result-" + std::to_string(m.workUnitId));
            std::ofstream(file, std::ios::binary)
                .write(reinterpret_cast<const char*>(body.data()),
                       static_cast<std::streamsize>(body.size()));
            const auto sig = worker->key.sign(net::resultDigest(*net::parseResultHeader(body)));
            auto up = worker->client->uploadResult(m.uploadUrl, file, sig);
            if (!up) {
                std::fprintf(stderr, "upload: %s\n", up.error().message.c_str());
                return 1;
            }
        }
        // The round closes on its quorum (the coordinator's ticker).
        for (int tries = 0;; ++tries) {
            auto st = pool[0].client->status();
            if (st && st->round > r)
                break;
            if (tries > 600) {
                std::fprintf(stderr, "round %d did not close\n", r);
                return 1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        std::string sources;
        for (const auto& [name, n] : f.from)
            sources += name + " " + std::to_string(n) + "  ";
        if (deltas)
            sources += "rebuilt from deltas " + std::to_string(f.rebuilt);
        std::printf("%6d %14lld %14.0f %14lld  %s\n", r, static_cast<long long>(weightsBytes),
                    f.coordinatorBytes, static_cast<long long>(f.receivedBytes), sources.c_str());
        figures.push_back(f);
    }
    if (!jsonFile.empty()) {
        std::ofstream out(jsonFile);
        out << "{\"workers\":" << workers << ",\"mirror\":" << (withMirror ? "true" : "false")
            << ",\"coordinator_rate\":" << coordinatorRate << ",\"weight_deltas\":\""
            << weightDeltas << "\",\"model\":\"" << model << "\",\"weights_bytes\":" << weightsBytes
            << ",\"load\":\"" << load << "\",\"rounds\":[";
        for (size_t i = 0; i < figures.size(); ++i)
            out << (i ? "," : "") << "{\"coordinator_bytes\":" << figures[i].coordinatorBytes
                << ",\"received_bytes\":" << figures[i].receivedBytes
                << ",\"rebuilt_from_deltas\":" << figures[i].rebuilt << "}";
        out << "]}\n";
    }
    mirror.reset();
    coordinator->stop();
    fs::remove_all(dir);
    return 0;
}
