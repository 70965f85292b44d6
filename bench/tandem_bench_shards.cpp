// tandem-bench-shards: ingest rate and round close time of a run aggregated by K shards
// (docs/protocol.md, "Sharded runs"), against K = 1, on one PostgreSQL database. The shards run
// in this process, driven by direct calls (no TLS), each fed its pieces by a thread of its own
// as K machines would be; their parts pass through a fetcher that reads the other shards' blob
// folders. Per round: R results of fp16 deltas are ingested (every piece streamed through its
// shard's checks into its staging file, made durable, committed and added to its range's sum),
// then the round closes (marked, each shard steps its range and writes its parts, the parts are
// assembled into the whole weights at every shard, the version committed and followed).
//
// Dimensions: P parameters.
#include "coordinator.hpp"
#include "cpu_model.hpp"
#include "crypto.hpp"
#include "file_io.hpp"
#include "postgres.hpp"
#include "protocol.hpp"
#include "random.hpp"
#include "result_format.hpp"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: tandem-bench-shards [options]\n"
    "\n"
    "Ingest rate (parameters/s of results taken in) and round close time of a run aggregated\n"
    "by K shards in this process, on the PostgreSQL server that PG* names (run it under\n"
    "tests/tools/with_postgres, or set PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE).\n"
    "\n"
    "  --config C     tiny, small, medium or L=..,NH=..,C=..,T=.. (default medium)\n"
    "  --shards K     a K to measure; may be repeated (default 1, 2 and 3)\n"
    "  --results R    results per round (default 8)\n"
    "  --rounds N     timed rounds per K (default 3)\n"
    "  --threads N    each shard's coordinator threads (default 1)\n"
    "  --json FILE    also write the results as JSON\n"
    "  --help         this text\n";

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string pgUrl(const std::string& database) {
    return "postgresql://" + env("PGUSER") + ":" + env("PGPASSWORD") + "@" + env("PGHOST") + ":" +
           env("PGPORT") + "/" + database;
}

Status freshDatabase(const std::string& name) {
    auto admin = storage::openPostgres(pgUrl(env("PGDATABASE")), {});
    if (!admin)
        return admin.error();
    if (auto s = admin->exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); !s)
        return s;
    return admin->exec("CREATE DATABASE " + name);
}

struct Upload {
    int64_t client = 0, workUnit = 0;
    std::string signature;
    std::vector<std::vector<uint8_t>> bodies;  // one per shard (K = 1: the whole result)
};

struct Row {
    int shards = 0;
    std::vector<double> ingest, close;
};

// K coordinators of one run; K = 1 is the one-process run of before (whole results).
class Run {
  public:
    Run(const fs::path& dir, const std::string& config, int shards, int threads)
        : m_dir(dir), m_shards(shards) {
        const std::string db =
            "bench_shards_" + std::to_string(::getpid()) + "_" + std::to_string(shards);
        if (auto s = freshDatabase(db); !s) {
            m_error = s.error().message;
            return;
        }
        {
            std::ofstream corpus(dir / "corpus.txt");
            Rng rng(1);
            for (int i = 0; i < 400000; ++i)
                corpus << static_cast<char>('a' + rng.below(26));
        }
        for (int k = 0; k < shards; ++k) {
            coord::CoordinatorConfig c;
            c.stateDir = dir / ("shard" + std::to_string(k));
            c.databaseUrl = pgUrl(db);
            c.corpus = {dir / "corpus.txt"};
            c.model = config;
            c.innerSteps = 1;
            c.batch = 1;
            c.quorum = 1 << 20;    // rounds close when the benchmark moves the clock
            c.maxNormRatio = 1e9;  // the gate off: random payloads
            c.clipNormRatio = 0;
            c.maxRelativeNorm = 0;
            c.refuseRepeatedPayloads = false;
            c.maxWorkUnitsPerClient = 1 << 20;
            c.newClientWorkUnits = 1 << 20;
            c.threads = threads;
            c.backgroundThreads = false;
            c.clock = [this] { return m_now; };
            if (shards > 1) {
                c.shard = k;
                c.newRunShards = shards;
                c.publicUrl = "https://shard" + std::to_string(k) + ".bench";
                const fs::path root = dir;
                c.fetchShardBlob = [root](const std::string& url) {
                    const auto host = url.substr(8, url.find('/', 8) - 8);
                    return readFile(root / host.substr(0, host.find('.')) / "blobs" / "sha256" /
                                    url.substr(url.rfind('/') + 1));
                };
                if (k > 0) {
                    fs::create_directories(c.stateDir);
                    fs::copy_file(dir / "shard0" / "coordinator_key.pem",
                                  c.stateDir / "coordinator_key.pem");
                    fs::copy(dir / "shard0" / "data", c.stateDir / "data",
                             fs::copy_options::recursive);
                }
            }
            auto opened = coord::Coordinator::open(c, nullptr);
            if (!opened) {
                m_error = "shard " + std::to_string(k) + ": " + opened.error().message;
                return;
            }
            m_coords.push_back(std::move(*opened));
        }
    }
    const std::string& error() const { return m_error; }
    coord::Coordinator& at(int k) { return *m_coords[static_cast<size_t>(k)]; }
    int64_t& now() { return m_now; }

    // R results for the current version, cut for the shards.
    std::vector<Upload> prepare(int results, const std::vector<uint16_t>& payload) {
        std::vector<Upload> out;
        const auto bytes = std::span(reinterpret_cast<const uint8_t*>(payload.data()),
                                     payload.size() * sizeof(uint16_t));
        for (int i = 0; i < results; ++i) {
            auto key = net::SigningKey::generate().value();
            auto reg =
                at(0).registerClient(net::RegisterRequest{"bench", key.publicKey(), ""}.toJson());
            Upload u;
            u.client = reg.value().clientId;
            net::WorkRequest w{"cpu", 0, 0, 0};
            const net::Manifest m = *at(0).requestWork(u.client, w.toJson()).value().manifest;
            u.workUnit = m.workUnitId;
            net::ResultHeader h;
            h.workUnitId = m.workUnitId;
            h.parameterCount = static_cast<int64_t>(payload.size());
            h.tokens = 1;
            h.steps = 1;
            if (m_shards == 1) {
                u.bodies.push_back(net::buildResult(h, payload));
                h = *net::parseResultHeader(u.bodies[0]);
            } else {
                std::vector<net::PieceRange> ranges;
                for (const auto& s : m.shards)
                    ranges.push_back(s.range);
                auto built = net::buildPiecedResult(h, bytes, ranges).value();
                for (size_t k = 0; k < ranges.size(); ++k)
                    u.bodies.push_back(net::pieceBody(built, bytes, k));
                h = built.header;
            }
            u.signature = net::toBase64(key.sign(net::resultDigest(h)));
            out.push_back(std::move(u));
        }
        return out;
    }

    // Every piece to its shard, a thread per shard; false on a refusal.
    bool ingest(const std::vector<Upload>& uploads) {
        std::vector<int> failed(static_cast<size_t>(m_shards));
        std::vector<std::thread> feeders;
        for (int k = 0; k < m_shards; ++k)
            feeders.emplace_back([&, k] {
                for (const Upload& u : uploads) {
                    const auto& body = u.bodies[static_cast<size_t>(k)];
                    auto s =
                        at(k).beginUpload(u.client, u.workUnit, static_cast<int64_t>(body.size()),
                                          u.signature, false, m_shards > 1 ? k : -1);
                    std::string why = s.ok() ? "" : s.refusal().message;
                    for (size_t at = 0; why.empty() && at < body.size(); at += 1 << 20) {
                        const size_t n = std::min<size_t>(1 << 20, body.size() - at);
                        if (auto early = s.value()->feed(std::span(body).subspan(at, n)))
                            why = early->ok() ? "an early answer" : early->refusal().message;
                    }
                    if (why.empty())
                        if (auto done = s.value()->finish(true); !done.ok())
                            why = done.refusal().message;
                    if (!why.empty()) {
                        std::fprintf(stderr, "shard %d refused a piece: %s\n", k, why.c_str());
                        failed[static_cast<size_t>(k)] = 1;
                        return;
                    }
                }
            });
        for (auto& t : feeders)
            t.join();
        return std::count(failed.begin(), failed.end(), 1) == 0;
    }

    // Past the deadline; ticks until every shard follows the next version.
    bool close() {
        const int64_t next = at(0).currentVersion() + 1;
        m_now += 100000;
        for (int tries = 0; tries < 8; ++tries) {
            bool all = true;
            for (int k = 0; k < m_shards; ++k) {
                at(k).tick();
                all = all && at(k).currentVersion() == next;
            }
            if (all)
                return true;
        }
        return false;
    }

  private:
    fs::path m_dir;
    int m_shards = 1;
    int64_t m_now = 1'800'000'000;
    std::string m_error;
    std::vector<std::unique_ptr<coord::Coordinator>> m_coords;
};

}  // namespace

int main(int argc, char** argv) {
    std::string config = "medium", jsonPath;
    std::vector<int> shardCounts;
    int results = 8, rounds = 3, threads = 1;
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
            config = next();
        } else if (a == "--shards") {
            shardCounts.push_back(std::clamp(std::atoi(next().c_str()), 1, 64));
        } else if (a == "--results") {
            results = std::max(1, std::atoi(next().c_str()));
        } else if (a == "--rounds") {
            rounds = std::max(1, std::atoi(next().c_str()));
        } else if (a == "--threads") {
            threads = std::max(1, std::atoi(next().c_str()));
        } else if (a == "--json") {
            jsonPath = next();
        } else {
            std::fprintf(stderr, "unknown option %s\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (shardCounts.empty())
        shardCounts = {1, 2, 3};
    if (env("PGHOST").empty()) {
        std::fprintf(stderr, "no PostgreSQL server: run under tests/tools/with_postgres\n");
        return 2;
    }
    auto model = ModelConfig::parse(config);
    if (!model) {
        std::fprintf(stderr, "%s\n", model.error().message.c_str());
        return 2;
    }
    const int64_t P = model->parameterCount();
    std::vector<uint16_t> payload(static_cast<size_t>(P));
    {
        Rng rng(7);  // small random halves
        for (auto& h : payload)
            h = static_cast<uint16_t>((rng.below(2) << 15) | ((1 + rng.below(12)) << 10) |
                                      rng.below(1024));
    }
    double load[3] = {0, 0, 0};
    std::printf("tandem-bench-shards: %s, %u hardware threads, %s (P = %lld), %d results a round\n",
                bench::cpuModel().c_str(), std::thread::hardware_concurrency(), config.c_str(),
                static_cast<long long>(P), results);
    std::printf("%6s %22s %22s %18s %18s\n", "shards", "ingest s (min/median)", "params/s (median)",
                "close s (min)", "close s (median)");
    std::vector<Row> rows;
    for (int K : shardCounts) {
        const fs::path dir =
            fs::temp_directory_path() / ("tandem-bench-shards-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        Row row;
        row.shards = K;
        {
            Run run(dir, config, K, threads);
            if (!run.error().empty()) {
                std::fprintf(stderr, "%s\n", run.error().c_str());
                return 1;
            }
            for (int r = 0; r < rounds; ++r) {
                auto uploads = run.prepare(results, payload);
                auto t0 = Clock::now();
                if (!run.ingest(uploads))
                    return 1;
                row.ingest.push_back(seconds(t0));
                t0 = Clock::now();
                if (!run.close()) {
                    std::fprintf(stderr, "K = %d: the round did not close\n", K);
                    return 1;
                }
                row.close.push_back(seconds(t0));
            }
        }
        fs::remove_all(dir);
        const double in = median(row.ingest);
        std::printf("%6d %10.3f / %9.3f %22.3g %18.3f %18.3f\n", K,
                    *std::min_element(row.ingest.begin(), row.ingest.end()), in,
                    double(results) * double(P) / in,
                    *std::min_element(row.close.begin(), row.close.end()), median(row.close));
        rows.push_back(std::move(row));
    }
    if (getloadavg(load, 3) > 0)
        std::printf("load average: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
    if (!jsonPath.empty()) {
        std::ofstream j(jsonPath);
        j << "{\"config\": \"" << config << "\", \"parameters\": " << P
          << ", \"results_per_round\": " << results << ", \"cpu\": \"" << bench::cpuModel()
          << "\", \"load\": " << load[0] << ", \"runs\": [";
        for (size_t i = 0; i < rows.size(); ++i) {
            j << (i ? ", " : "") << "{\"shards\": " << rows[i].shards << ", \"ingest_s\": [";
            for (size_t k = 0; k < rows[i].ingest.size(); ++k)
                j << (k ? ", " : "") << rows[i].ingest[k];
            j << "], \"close_s\": [";
            for (size_t k = 0; k < rows[i].close.size(); ++k)
                j << (k ? ", " : "") << rows[i].close[k];
            j << "]}";
        }
        j << "]}\n";
    }
    return 0;
}
