// tandem-bench-aggregate: end-to-end aggregation throughput of the coordinator, in parameters per
// second: a result is uploaded over HTTPS on loopback (PUT /v1/results/{id}), streamed through
// the coordinator's checks (header, signature, finiteness, norm, digest) into its staging file,
// made durable (fsync, rename), committed, and read back into the round sum by the aggregator
// (inline here: no background threads). Also the same upload fed in-process (no TLS, no
// sockets), and the round close (outer Nesterov step and the atomic write of the new weights and
// momentum).
//
// Dimensions: P parameters.
#include "coordinator.hpp"
#include "cpu_model.hpp"
#include "crypto.hpp"
#include "protocol.hpp"
#include "random.hpp"
#include "result_format.hpp"
#include "server.hpp"

#include <httplib.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: tandem-bench-aggregate [options]\n"
    "\n"
    "Uploads fp16 results to an in-process coordinator over HTTPS on 127.0.0.1 and reports\n"
    "parameters/s end to end (median over --uploads), the same with two uploads at once, the\n"
    "in-process path without TLS, and the round close.\n"
    "\n"
    "  --config C     tiny, small, medium or L=..,NH=..,C=..,T=..; may be repeated\n"
    "                 (default: medium and L=17,NH=12,C=768,T=4096, a 123.8M-parameter model)\n"
    "  --uploads N    timed uploads per mode (default 3)\n"
    "  --threads N    coordinator threads (default: all hardware threads)\n"
    "  --dir DIR      state directory parent (default: a fresh one under /tmp)\n"
    "  --json FILE    also write the results as JSON\n"
    "  --help         this text\n";

double seconds(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
    std::string config;
    int64_t params;
    std::string mode;
    double seconds;
};

struct Client {
    net::SigningKey key = net::SigningKey::generate().value();
    int64_t id = 0;
    std::string token;
};

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> configs;
    int uploads = 3;
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string jsonPath;
    fs::path parent;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--config") {
            configs.push_back(next());
        } else if (a == "--uploads") {
            uploads = std::max(1, std::atoi(next().c_str()));
        } else if (a == "--threads") {
            threads = std::max(1, std::atoi(next().c_str()));
        } else if (a == "--json") {
            jsonPath = next();
        } else if (a == "--dir") {
            parent = next();
        } else {
            std::fprintf(stderr, "unknown option %s\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (configs.empty())
        configs = {"medium", "L=17,NH=12,C=768,T=4096"};
    std::signal(SIGPIPE, SIG_IGN);
    if (parent.empty())
        parent = fs::temp_directory_path();
    std::printf("tandem-bench-aggregate: %s, %u hardware threads, coordinator threads %d\n",
                bench::cpuModel().c_str(), std::thread::hardware_concurrency(), threads);
    std::printf("%-34s %12s  %-26s %10s %14s\n", "config", "params", "mode", "seconds", "params/s");
    std::vector<Row> rows;

    for (const auto& config : configs) {
        auto model = ModelConfig::parse(config);
        if (!model) {
            std::fprintf(stderr, "%s\n", model.error().message.c_str());
            return 2;
        }
        const fs::path dir = parent / ("tandem-bench-aggregate-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        {
            std::ofstream corpus(dir / "corpus.txt");
            Rng rng(1);
            for (int i = 0; i < 400000; ++i)
                corpus << static_cast<char>('a' + rng.below(26));
        }
        int64_t now = 1'800'000'000;
        coord::CoordinatorConfig cfg;
        cfg.stateDir = dir / "state";
        cfg.corpus = {dir / "corpus.txt"};
        cfg.model = config;
        cfg.innerSteps = 1;
        cfg.batch = 1;
        cfg.quorum = 1 << 20;  // rounds close only when the benchmark says so
        // The Byzantine gate off: the uploads are random bytes with no common direction.
        cfg.maxNormRatio = 1e9;
        cfg.clipNormRatio = 0;
        cfg.maxRelativeNorm = 0;
        cfg.minCosine = -1;
        cfg.refuseRepeatedPayloads = false;
        cfg.threads = threads;
        cfg.maxWorkUnitsPerClient = 1 << 20;
        cfg.backgroundThreads = false;
        cfg.clock = [&now] { return now; };
        auto coordinator = coord::Coordinator::open(cfg, nullptr);
        if (!coordinator) {
            std::fprintf(stderr, "%s\n", coordinator.error().message.c_str());
            return 1;
        }
        coord::Coordinator& c = **coordinator;
        coord::ServerConfig sc;
        sc.port = 0;
        auto tls = coord::ensureTlsIdentity(cfg.stateDir, sc);
        auto server = coord::Server::create(c, sc, *tls, nullptr);
        if (!server || !(*server)->start()) {
            std::fprintf(stderr, "cannot start the server\n");
            return 1;
        }
        const int port = (*server)->port();
        const int64_t P = c.parameterCount();
        auto connect = [&] {
            auto h = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
            h->set_ca_cert_path(tls->cert.c_str());
            h->enable_server_certificate_verification(true);
            h->set_read_timeout(600, 0);
            h->set_write_timeout(600, 0);
            return h;
        };
        std::vector<Client> clients(2);
        for (auto& cl : clients) {
            auto r =
                c.registerClient(net::RegisterRequest{"bench", cl.key.publicKey(), ""}.toJson());
            cl.id = r.value().clientId;
            cl.token = r.value().token;
        }
        // One payload reused (with a fresh header per work unit): small random halves.
        std::vector<uint16_t> payload(static_cast<size_t>(P));
        {
            Rng rng(7);
            for (auto& h : payload)
                h = static_cast<uint16_t>((rng.below(2) << 15) | ((1 + rng.below(12)) << 10) |
                                          rng.below(1024));
        }
        auto makeBody = [&](Client& cl, std::string* signature) {
            auto offer = c.requestWork(cl.id, net::WorkRequest{"cpu", 0, 0, 0}.toJson());
            const net::Manifest m = *offer.value().manifest;
            net::ResultHeader h;
            h.workUnitId = m.workUnitId;
            h.tokens = 1;
            h.steps = 1;
            auto body = net::buildResult(h, payload);
            h = *net::parseResultHeader(body);
            *signature = net::toBase64(cl.key.sign(net::resultDigest(h)));
            return std::make_pair(m.workUnitId, std::move(body));
        };
        auto put = [&](Client& cl, int64_t wu, const std::vector<uint8_t>& body,
                       const std::string& sig) {
            auto http = connect();
            httplib::Headers headers{{"Authorization", "Bearer " + cl.token},
                                     {"X-Tandem-Signature", sig}};
            auto res = http->Put(("/v1/results/" + std::to_string(wu)).c_str(), headers,
                                 reinterpret_cast<const char*>(body.data()), body.size(),
                                 "application/octet-stream");
            if (!res || res->status != 200) {
                std::fprintf(stderr, "upload failed: %s\n",
                             res ? res->body.c_str() : "no response");
                std::exit(1);
            }
        };
        auto report = [&](const std::string& mode, double s, int64_t count) {
            rows.push_back({config, P, mode, s});
            std::printf("%-34s %12lld  %-26s %10.3f %14.3e\n", model->describe().c_str(),
                        static_cast<long long>(P), mode.c_str(), s, double(P) * count / s);
            std::fflush(stdout);
        };

        // 1. Over HTTPS, one upload at a time (one untimed first).
        std::vector<double> times;
        for (int k = 0; k <= uploads; ++k) {
            std::string sig;
            auto [wu, body] = makeBody(clients[0], &sig);
            auto t0 = std::chrono::steady_clock::now();
            put(clients[0], wu, body, sig);
            if (k > 0)
                times.push_back(seconds(t0));
        }
        report("https, 1 upload", median(times), 1);

        // 2. Over HTTPS, two clients at once: wall time for both.
        times.clear();
        for (int k = 0; k < uploads; ++k) {
            std::string s0, s1;
            auto [w0, b0] = makeBody(clients[0], &s0);
            auto [w1, b1] = makeBody(clients[1], &s1);
            auto t0 = std::chrono::steady_clock::now();
            std::thread other([&] { put(clients[1], w1, b1, s1); });
            put(clients[0], w0, b0, s0);
            other.join();
            times.push_back(seconds(t0));
        }
        report("https, 2 uploads at once", median(times), 2);

        // 3. In-process: the same session fed in 1 MiB pieces (no TLS, no sockets).
        times.clear();
        for (int k = 0; k < uploads; ++k) {
            std::string sig;
            auto [wu, body] = makeBody(clients[0], &sig);
            auto t0 = std::chrono::steady_clock::now();
            auto s = c.beginUpload(clients[0].id, wu, static_cast<int64_t>(body.size()), sig);
            for (size_t pos = 0; pos < body.size(); pos += 1 << 20) {
                auto early = s.value()->feed(
                    std::span(body).subspan(pos, std::min<size_t>(1 << 20, body.size() - pos)));
                if (early) {
                    std::fprintf(stderr, "refused in-process\n");
                    return 1;
                }
            }
            auto out = s.value()->finish(true);
            if (!out.ok()) {
                std::fprintf(stderr, "refused: %s\n", out.refusal().message.c_str());
                return 1;
            }
            s.value().reset();
            times.push_back(seconds(t0));
        }
        report("in-process, no TLS", median(times), 1);

        // 4. Round close: outer step + weights and momentum written atomically.
        now += cfg.roundTimeoutSeconds + 1;
        auto t0 = std::chrono::steady_clock::now();
        c.tick();
        const double closeSeconds = seconds(t0);
        if (c.currentVersion() != 1) {
            std::fprintf(stderr, "the round did not close\n");
            return 1;
        }
        report("round close (step+publish)", closeSeconds, 1);

        server->reset();
        coordinator->reset();
        fs::remove_all(dir);
    }
    if (!jsonPath.empty()) {
        std::ofstream out(jsonPath);
        out << "{\"benchmark\":\"aggregate\",\"cpu\":\"" << bench::cpuModel()
            << "\",\"threads\":" << threads << ",\"results\":[";
        for (size_t i = 0; i < rows.size(); ++i) {
            const auto& r = rows[i];
            const int count = r.mode.find("2 uploads") != std::string::npos ? 2 : 1;
            out << (i ? "," : "") << "{\"config\":\"" << r.config << "\",\"params\":" << r.params
                << ",\"mode\":\"" << r.mode << "\",\"seconds\":" << r.seconds
                << ",\"params_per_s\":" << double(r.params) * count / r.seconds << "}";
        }
        out << "]}\n";
    }
    return 0;
}
