// Test helpers: a coordinator with its HTTPS server on an ephemeral port of 127.0.0.1 (TLS
// identity generated at test time), clients that register with fresh Ed25519 keys, and results
// built by hand.
#pragma once

#include "../tools/postgres_cluster.hpp"  // (by path: included from several test folders)
#include "coordinator.hpp"
#include "crypto.hpp"
#include "protocol.hpp"
#include "result_format.hpp"
#include "server.hpp"

#include <httplib.h>

#include <QTemporaryDir>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::testing {

// Deterministic text of `bytes` bytes (words from a small vocabulary).
inline void writeCorpus(const std::filesystem::path& path, size_t bytes) {
    static const char* kWords[] = {"the ",  "quick ", "brown ", "fox ",    "jumps ", "over ",
                                   "lazy ", "dog. ",  "A ",     "stitch ", "in ",    "time\n"};
    std::ofstream out(path, std::ios::binary);
    uint64_t x = 88172645463325252ull;
    size_t written = 0;
    while (written < bytes) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const char* w = kWords[x % 12];
        out << w;
        written += std::strlen(w);
    }
}

struct ApiClient {
    std::unique_ptr<httplib::SSLClient> http;
    net::SigningKey key;
    int64_t id = 0;
    std::string token;

    httplib::Headers auth() const { return {{"Authorization", "Bearer " + token}}; }
};

class TestCoordinator {
  public:
    // model: e.g. "L=1,NH=2,C=16,T=16"
    // adjustServer: changes the server's settings before it starts (registration limits).
    explicit TestCoordinator(coord::CoordinatorConfig cfg, bool withServer = true,
                             std::function<void(coord::ServerConfig&)> adjustServer = {})
        : m_cfg(std::move(cfg)), m_adjustServer(std::move(adjustServer)) {
        std::signal(SIGPIPE, SIG_IGN);  // as tandem-coordinator does: a gone peer is an error
        m_cfg.stateDir = std::filesystem::path(m_dir.path().toStdString()) / "state";
        // Under tests/tools/with_postgres (the tests' postgres variants): the run state in a
        // fresh PostgreSQL database of this coordinator's own, kept across its restarts.
        if (m_cfg.databaseUrl.empty() && postgresUrl()) {
            static int count = 0;
            auto url = freshPostgresDatabase("coordinator_" + std::to_string(::getpid()) + "_" +
                                             std::to_string(++count));
            if (!url)
                qFatal("%s", url.error().message.c_str());
            m_cfg.databaseUrl = *url;
        }
        if (m_cfg.corpus.empty()) {
            auto corpus = std::filesystem::path(m_dir.path().toStdString()) / "corpus.txt";
            writeCorpus(corpus, 200000);
            m_cfg.corpus = {corpus};
        }
        m_withServer = withServer;
        open();
    }
    ~TestCoordinator() { close(); }

    void open() {
        m_error.clear();
        auto c = coord::Coordinator::open(m_cfg, [this](const std::string& line) {
            std::lock_guard lock(m_logMutex);
            m_log.push_back(line);
            if (std::getenv("TANDEM_TEST_LOG"))
                std::fprintf(stderr, "coordinator: %s\n", line.c_str());
        });
        if (!c) {
            m_error = c.error().message;
            return;
        }
        m_coord = std::move(*c);
        if (!m_withServer)
            return;
        coord::ServerConfig sc;
        sc.port = 0;
        sc.threads = 8;
        sc.readTimeoutSeconds = 5;
        sc.maxSpeedtestBytes = 1 << 20;
        if (m_adjustServer)
            m_adjustServer(sc);
        auto tls = coord::ensureTlsIdentity(m_cfg.stateDir, sc);
        if (!tls) {
            m_error = tls.error().message;
            return;
        }
        m_tls = *tls;
        auto s = coord::Server::create(*m_coord, sc, *tls, [this](const std::string& line) {
            std::lock_guard lock(m_logMutex);
            m_log.push_back(line);
        });
        if (!s) {
            m_error = s.error().message;
            return;
        }
        m_server = std::move(*s);
        if (auto st = m_server->start(); !st)
            m_error = st.error().message;
    }
    void close() {
        m_server.reset();
        m_coord.reset();
    }

    bool ok() const { return m_error.empty() && m_coord; }
    const std::string& error() const { return m_error; }
    coord::Coordinator& coordinator() { return *m_coord; }
    // What the next open() starts with (a restart with other options).
    coord::CoordinatorConfig& config() { return m_cfg; }
    int port() const { return m_server ? m_server->port() : 0; }
    const coord::TlsFiles& tls() const { return m_tls; }
    const std::filesystem::path& stateDir() const { return m_cfg.stateDir; }
    std::vector<std::string> log() {
        std::lock_guard lock(m_logMutex);
        return m_log;
    }

    std::unique_ptr<httplib::SSLClient> connect() const {
        auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port());
        c->set_ca_cert_path(m_tls.cert.c_str());
        c->enable_server_certificate_verification(true);
        c->set_read_timeout(20, 0);
        return c;
    }

    // Registers a client over HTTPS.
    ApiClient registerClient(const std::string& name) {
        ApiClient c{connect(), net::SigningKey::generate().value(), 0, {}};
        net::RegisterRequest req{name, c.key.publicKey(), "test"};
        auto res = c.http->Post("/v1/clients", req.toJson(), "application/json");
        if (res && res->status == 200) {
            auto r = net::RegisterResponse::fromJson(res->body);
            if (r) {
                c.id = r->clientId;
                c.token = r->token;
            }
        }
        return c;
    }

  private:
    QTemporaryDir m_dir;
    coord::CoordinatorConfig m_cfg;
    std::function<void(coord::ServerConfig&)> m_adjustServer;
    bool m_withServer = true;
    std::unique_ptr<coord::Coordinator> m_coord;
    std::unique_ptr<coord::Server> m_server;
    coord::TlsFiles m_tls;
    std::string m_error;
    std::mutex m_logMutex;
    std::vector<std::string> m_log;
};

// A whole result body for a manifest, and the client's signature over its digest.
struct BuiltResult {
    std::vector<uint8_t> body;
    std::string signature;  // base64
    net::ResultHeader header;
};

// The header a worker would send for unit m (tokens 0: all that its steps trained).
inline net::ResultHeader resultHeaderFor(const net::Manifest& m, int64_t tokens) {
    net::ResultHeader h;
    h.workUnitId = m.workUnitId;
    h.tokens = tokens > 0 ? tokens : int64_t{m.innerSteps} * m.batch * m.seqLen;
    h.steps = m.innerSteps;
    h.lossFirst = 5.5f;
    h.lossLast = 3.0f;
    h.lossMean = 4.0f;
    return h;
}

// A whole body, with its header parsed back and signed as the worker signs it.
inline BuiltResult signedResult(std::vector<uint8_t> body, const net::SigningKey& key) {
    BuiltResult out;
    out.body = std::move(body);
    out.header = *net::parseResultHeader(out.body);
    out.signature = net::toBase64(key.sign(net::resultDigest(out.header)));
    return out;
}

inline BuiltResult buildResult(const net::Manifest& m, const std::vector<uint16_t>& payload,
                               const net::SigningKey& key, int64_t tokens = 0) {
    return signedResult(net::buildResult(resultHeaderFor(m, tokens), payload), key);
}

// The same for a payload already in its encoding's bytes (net/result_format.hpp).
inline BuiltResult buildEncodedResult(const net::Manifest& m, uint32_t encoding,
                                      const std::vector<uint8_t>& payload,
                                      const net::SigningKey& key, int64_t tokens = 0) {
    net::ResultHeader h = resultHeaderFor(m, tokens);
    h.encoding = encoding;
    h.parameterCount = static_cast<int64_t>(
        encoding == net::kEncodingFp16 ? payload.size() / 2
                                       : payload.size() - 4 * ((payload.size() + 259) / 260));
    return signedResult(net::buildResult(h, std::span<const uint8_t>(payload)).value(), key);
}

}  // namespace tandem::testing
