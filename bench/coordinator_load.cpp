#include "coordinator_load.hpp"

#include "codec.hpp"
#include "protocol.hpp"
#include "result_format.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::bench {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// n threads running fn(thread index); their latencies (ms) gathered into one sorted list.
void runThreads(int n, const std::function<void(int, std::vector<float>&)>& fn,
                std::vector<float>& latenciesMs) {
    std::vector<std::vector<float>> each(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t)
        threads.emplace_back([&, t] { fn(t, each[static_cast<size_t>(t)]); });
    for (auto& t : threads)
        t.join();
    for (auto& v : each)
        latenciesMs.insert(latenciesMs.end(), v.begin(), v.end());
    std::sort(latenciesMs.begin(), latenciesMs.end());
}

void fillPercentiles(PhaseResult& r, const std::vector<float>& sortedMs) {
    if (sortedMs.empty())
        return;
    auto at = [&](double q) {
        return sortedMs[std::min(sortedMs.size() - 1, static_cast<size_t>(q * sortedMs.size()))];
    };
    r.latencyP50Ms = at(0.5);
    r.latencyP99Ms = at(0.99);
}

std::string describe(const httplib::Result& res) {
    if (!res)
        return "no answer (" + httplib::to_string(res.error()) + ")";
    return std::to_string(res->status) + " " + res->body.substr(0, 200);
}

}  // namespace

Load::Load(LoadSettings settings) : m_s(std::move(settings)) {
    m_workers.reserve(static_cast<size_t>(m_s.workers));
    for (int i = 0; i < m_s.workers; ++i)
        m_workers.push_back(SimWorker{net::SigningKey::generate().value(), 0, {}, 0, 0, 0, 0, 0});
}

void Load::noteError(const std::string& what) {
    std::lock_guard lock(m_errorMu);
    if (m_errorSamples.size() < 5)
        m_errorSamples.push_back(what);
}

namespace {

// One keep-alive HTTPS connection that verifies the coordinator's certificate.
std::unique_ptr<httplib::SSLClient> connect(const LoadSettings& s) {
    auto c = std::make_unique<httplib::SSLClient>(s.host, s.port);
    c->set_ca_cert_path(s.caCert.c_str());
    c->enable_server_certificate_verification(true);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(300, 0);
    c->set_write_timeout(300, 0);
    return c;
}

httplib::Headers bearer(const SimWorker& w) {
    return {{"Authorization", "Bearer " + w.token}};
}

}  // namespace

PhaseResult Load::registerAll() {
    PhaseResult r;
    std::atomic<int64_t> done{0}, errors{0};
    std::vector<float> latencies;
    const auto t0 = Clock::now();
    runThreads(
        m_s.clientThreads,
        [&](int t, std::vector<float>& lat) {
            auto http = connect(m_s);
            for (size_t i = static_cast<size_t>(t); i < m_workers.size();
                 i += static_cast<size_t>(m_s.clientThreads)) {
                SimWorker& w = m_workers[i];
                const auto s = Clock::now();
                auto res = http->Post(
                    "/v1/clients",
                    net::RegisterRequest{"bench-" + std::to_string(i), w.key.publicKey(), "bench"}
                        .toJson(),
                    "application/json");
                lat.push_back(static_cast<float>(secondsSince(s) * 1000));
                auto reg = res && res->status == 200
                               ? net::RegisterResponse::fromJson(res->body)
                               : Expected<net::RegisterResponse>(makeError(describe(res)));
                if (!reg) {
                    ++errors;
                    noteError("register: " + reg.error().message);
                    continue;
                }
                w.clientId = reg->clientId;
                w.token = reg->token;
                ++done;
            }
        },
        latencies);
    r.seconds = secondsSince(t0);
    r.done = done;
    r.errors = errors;
    fillPercentiles(r, latencies);
    return r;
}

PhaseResult Load::requestWork() {
    PhaseResult r;
    std::atomic<int64_t> done{0}, errors{0};
    std::vector<float> latencies;
    const auto t0 = Clock::now();
    runThreads(
        m_s.clientThreads,
        [&](int t, std::vector<float>& lat) {
            auto http = connect(m_s);
            for (size_t i = static_cast<size_t>(t); i < m_workers.size();
                 i += static_cast<size_t>(m_s.clientThreads)) {
                SimWorker& w = m_workers[i];
                if (w.token.empty())
                    continue;
                const auto s = Clock::now();
                auto res =
                    http->Post("/v1/work", bearer(w), net::WorkRequest{"cpu", 0, 0, 0}.toJson(),
                               "application/json");
                lat.push_back(static_cast<float>(secondsSince(s) * 1000));
                auto m = res && res->status == 200
                             ? net::Manifest::fromJson(res->body)
                             : Expected<net::Manifest>(makeError(describe(res)));
                if (!m) {
                    ++errors;
                    noteError("work: " + m.error().message);
                    continue;
                }
                w.workUnitId = m->workUnitId;
                w.innerSteps = m->innerSteps;
                w.batch = m->batch;
                w.seqLen = m->seqLen;
                ++done;
            }
        },
        latencies);
    r.seconds = secondsSince(t0);
    r.done = done;
    r.errors = errors;
    fillPercentiles(r, latencies);
    return r;
}

PhaseResult Load::heartbeats(double seconds) {
    PhaseResult r;
    std::atomic<int64_t> done{0}, errors{0};
    std::vector<float> latencies;
    const auto t0 = Clock::now();
    runThreads(
        m_s.clientThreads,
        [&](int t, std::vector<float>& lat) {
            auto http = connect(m_s);
            std::vector<SimWorker*> mine;
            for (size_t i = static_cast<size_t>(t); i < m_workers.size();
                 i += static_cast<size_t>(m_s.clientThreads))
                if (m_workers[i].workUnitId > 0)
                    mine.push_back(&m_workers[i]);
            if (mine.empty())
                return;
            for (size_t k = 0; secondsSince(t0) < seconds; ++k) {
                SimWorker& w = *mine[k % mine.size()];
                // Up to the unit's last step, then that step again (a result waiting to upload);
                // the loss and throughput change with every report, as a real worker's do
                // (SQLite writes nothing for an UPDATE that changes nothing).
                w.step = std::min<int64_t>(w.step + 1, w.innerSteps);
                const net::ProgressReport report{
                    w.step, 3.0f + 0.001f * static_cast<float>(k % 1000), 1000.0 + double(k)};
                const auto s = Clock::now();
                auto res = http->Post("/v1/work/" + std::to_string(w.workUnitId) + "/progress",
                                      bearer(w), report.toJson(), "application/json");
                lat.push_back(static_cast<float>(secondsSince(s) * 1000));
                auto reply = res && res->status == 200
                                 ? net::ProgressReply::fromJson(res->body)
                                 : Expected<net::ProgressReply>(makeError(describe(res)));
                if (!reply || reply->action != "continue") {
                    ++errors;
                    noteError("heartbeat: " + (reply ? reply->reason : reply.error().message));
                    continue;
                }
                ++done;
            }
        },
        latencies);
    r.seconds = secondsSince(t0);
    r.done = done;
    r.errors = errors;
    fillPercentiles(r, latencies);
    return r;
}

PhaseResult Load::uploadAll(int* peakInFlight) {
    PhaseResult r;
    std::atomic<int64_t> done{0}, errors{0}, retries{0};
    std::atomic<size_t> next{0};
    std::atomic<int> inFlight{0}, peak{0};
    std::vector<float> latencies;
    // One small pattern for everyone; each worker's first halves differ (tiny subnormals), as
    // the coordinator refuses a payload it accepted before (a replay).
    std::vector<uint16_t> pattern(static_cast<size_t>(m_s.parameters));
    for (size_t i = 0; i < pattern.size(); ++i)
        pattern[i] = floatToHalf(0.001f * float(int(i % 7) - 3));
    const double rate = m_s.uploadBytesPerSecond;
    const size_t chunk = rate > 0 ? std::clamp<size_t>(static_cast<size_t>(rate / 20), 1024, 65536)
                                  : size_t{1} << 20;
    const auto t0 = Clock::now();
    runThreads(
        m_s.uploaders,
        [&](int, std::vector<float>& lat) {
            auto http = connect(m_s);
            std::vector<uint16_t> payload = pattern;
            for (size_t i = next++; i < m_workers.size(); i = next++) {
                SimWorker& w = m_workers[i];
                if (w.workUnitId <= 0)
                    continue;
                payload[0] = static_cast<uint16_t>(i & 0x3FF);
                payload[1] = static_cast<uint16_t>((i >> 10) & 0x3FF);
                net::ResultHeader h;
                h.workUnitId = w.workUnitId;
                h.parameterCount = m_s.parameters;
                h.steps = w.innerSteps;
                h.tokens = int64_t{w.innerSteps} * w.batch * w.seqLen;
                h.lossFirst = 3.5f;
                h.lossLast = h.lossMean = 3.0f;
                const std::vector<uint8_t> body = net::buildResult(h, payload);
                const auto signature = w.key.sign(net::resultDigest(*net::parseResultHeader(body)));
                httplib::Headers headers = bearer(w);
                headers.emplace("X-Tandem-Signature", net::toBase64(signature));
                const std::string path = "/v1/results/" + std::to_string(w.workUnitId);
                for (;;) {
                    const auto s = Clock::now();
                    const int now = ++inFlight;
                    for (int p = peak; now > p && !peak.compare_exchange_weak(p, now);) {
                    }
                    // Paced by the sender: each chunk leaves when the rate allows it (the
                    // kernel's socket buffer smooths it further, as on a real uplink).
                    auto res = http->Put(
                        path, headers, body.size(),
                        [&](size_t offset, size_t length, httplib::DataSink& sink) {
                            const size_t n = std::min(length, chunk);
                            if (rate > 0)
                                std::this_thread::sleep_until(
                                    s + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(
                                                static_cast<double>(offset + n) / rate)));
                            return sink.write(reinterpret_cast<const char*>(body.data()) + offset,
                                              n);
                        },
                        "application/octet-stream");
                    --inFlight;
                    if (res && (res->status == 503 || res->status == 429)) {
                        ++retries;
                        std::this_thread::sleep_for(std::chrono::milliseconds(200));
                        continue;
                    }
                    lat.push_back(static_cast<float>(secondsSince(s) * 1000));
                    if (res && res->status == 200) {
                        ++done;
                    } else {
                        ++errors;
                        noteError("upload: " + describe(res));
                    }
                    break;
                }
            }
        },
        latencies);
    r.seconds = secondsSince(t0);
    r.done = done;
    r.errors = errors;
    r.retries = retries;
    fillPercentiles(r, latencies);
    *peakInFlight = peak;
    return r;
}

}  // namespace tandem::bench
