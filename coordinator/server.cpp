#include "server.hpp"

#include "admission.hpp"

#include "file_io.hpp"
#include "http_io.hpp"
#include "metrics.hpp"
#include "public_routes.hpp"
#include "safe_text.hpp"
#include "tls.hpp"

#include <httplib.h>
#include <openssl/ssl.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

namespace tandem::coord {

namespace fs = std::filesystem;

Expected<TlsFiles> ensureTlsIdentity(const fs::path& stateDir, const ServerConfig& config) {
    TlsFiles out;
    std::error_code ec;
    if (!config.certFile.empty() || !config.keyFile.empty()) {
        if (config.certFile.empty() || config.keyFile.empty())
            return makeError("give both --tls-cert and --tls-key, or neither");
        out.cert = config.certFile;
        out.key = config.keyFile;
    } else {
        fs::create_directories(stateDir / "tls", ec);
        out.cert = stateDir / "tls" / "cert.pem";
        out.key = stateDir / "tls" / "key.pem";
        if (!fs::exists(out.cert, ec) || !fs::exists(out.key, ec)) {
            std::vector<std::string> hosts{"localhost", "127.0.0.1", "::1"};
            if (!config.host.empty() && config.host != "0.0.0.0" && config.host != "::" &&
                std::find(hosts.begin(), hosts.end(), config.host) == hosts.end())
                hosts.push_back(config.host);
            for (const auto& name : config.extraNames)
                if (std::find(hosts.begin(), hosts.end(), name) == hosts.end())
                    hosts.push_back(name);
            auto id = net::generateSelfSignedCertificate(hosts);
            if (!id)
                return id.error();
            if (auto st = net::saveTlsIdentity(*id, out.cert, out.key); !st)
                return st.error();
            out.generated = true;
        }
    }
    auto pem = readFile(out.cert);
    if (!pem)
        return makeError("cannot read the certificate: " + pem.error().message);
    auto pin = net::publicKeyPin(std::string(pem->begin(), pem->end()));
    if (!pin)
        return makeError(out.cert.string() + ": " + pin.error().message);
    out.pin = *pin;
    fs::create_directories(stateDir / "tls", ec);
    FILE* p = std::fopen((stateDir / "tls" / "pin.txt").c_str(), "wb");
    if (p) {
        std::fprintf(p, "%s\n", out.pin.c_str());
        std::fclose(p);
    }
    return out;
}

struct Server::Impl {
    Coordinator& coord;
    ServerConfig cfg;
    TlsFiles tls;
    Logger log;
    std::unique_ptr<httplib::SSLServer> http;
    std::thread thread;
    int port = 0;
    RegistrationLimiter registrations;

    Impl(Coordinator& c, ServerConfig sc, TlsFiles t, Logger l)
        : coord(c),
          cfg(std::move(sc)),
          tls(std::move(t)),
          log(std::move(l)),
          registrations(cfg.registerPerHour, cfg.registerBurst) {}

    // Authenticates the request; on refusal the response is already written.
    std::optional<int64_t> auth(const httplib::Request& req, httplib::Response& res) {
        auto id = coord.authenticate(req.get_header_value("Authorization"));
        if (!id.ok()) {
            sendRefusal(res, id.refusal());
            return std::nullopt;
        }
        return id.value();
    }

    int expectContinue(const httplib::Request& req, httplib::Response& res);
    void routes();
};

// Clients that send "Expect: 100-continue" (libcurl does for large bodies, the worker for every
// result) learn about a refusal before they send hundreds of megabytes.
int Server::Impl::expectContinue(const httplib::Request& req, httplib::Response& res) {
    if (req.method != "PUT" || req.path.rfind("/v1/results/", 0) != 0)
        return 100;
    const BodyLength length = bodyLength(req);
    if (!length.valid) {
        sendRefusal(res, badLength(req), true);
        return res.status;
    }
    auto id = coord.authenticate(req.get_header_value("Authorization"));
    if (!id.ok()) {
        sendRefusal(res, id.refusal(), true);
        return res.status;
    }
    int64_t wu = 0;
    int piece = -1;  // /v1/results/<id>/pieces/<k>: a sharded run's piece
    try {
        size_t used = 0;
        const std::string rest = req.path.substr(12);
        wu = std::stoll(rest, &used);
        if (used < rest.size()) {
            if (rest.compare(used, 8, "/pieces/") != 0)
                throw std::invalid_argument("path");
            piece = std::stoi(rest.substr(used + 8));
        }
    } catch (...) {
        sendRefusal(res, {404, "unknown_work_unit", "no such work unit"}, true);
        return res.status;
    }
    auto check =
        coord.beginUpload(id.value(), wu, req.has_header("Transfer-Encoding") ? -1 : length.bytes,
                          req.get_header_value("X-Tandem-Signature"), true, piece);
    if (!check.ok()) {
        sendRefusal(res, check.refusal(), true);
        return res.status;
    }
    return 100;
}

void Server::Impl::routes() {
    httplib::SSLServer& s = *http;

    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        ignoreRequestRanges(req);
        if (!bodyLength(req).valid) {
            sendRefusal(res, badLength(req), true);
            return httplib::Server::HandlerResponse::Handled;
        }
        // Bodies of JSON endpoints are buffered by httplib: bound them before they are read.
        const bool workRoute =
            req.path.rfind("/v1/work", 0) == 0 &&
            (req.method == "POST" || req.method == "GET" || req.method == "DELETE");
        const bool jsonRoute = workRoute || (req.method == "POST" && req.path == "/v1/clients") ||
                               (req.method == "PUT" && req.path == "/v1/clients/self");
        const bool speedRoute = req.method == "POST" && req.path == "/v1/speedtest";
        if (!jsonRoute && !speedRoute)
            return httplib::Server::HandlerResponse::Unhandled;
        const int64_t limit = jsonRoute ? cfg.maxJsonBytes : cfg.maxSpeedtestBytes;
        if (req.has_header("Transfer-Encoding")) {
            sendRefusal(res,
                        {411, "length_required",
                         "send Content-Length; chunked bodies are not accepted here"},
                        true);
            return httplib::Server::HandlerResponse::Handled;
        }
        const int64_t length = std::max<int64_t>(0, bodyLength(req).bytes);
        // A body somewhat too large is read and dropped by the handler, so that the client sees
        // the 413; a huge one is refused unread and the connection closed.
        if (length > limit && length > kDrainLimit) {
            sendRefusal(res,
                        {413, "too_large",
                         "the body has " + std::to_string(length) +
                             " bytes; this endpoint accepts at most " + std::to_string(limit)},
                        true);
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    // It runs before routing, outside cpp-httplib's try/catch: nothing may escape it.
    s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
        try {
            return expectContinue(req, res);
        } catch (const std::exception& e) {
            log("error: exception in the 100-continue check: " + net::loggable(e.what()));
            sendRefusal(res, {500, "internal", "the coordinator failed"}, true);
            return 500;
        }
    });

    s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        try {
            errorBody(req, res);
        } catch (...) {  // outside routing too: an exception here would end the process
            res.set_content(R"({"error":{"code":"internal","message":"the coordinator failed"}})",
                            "application/json");
        }
    });

    s.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = net::quotable(e.what(), 300);
            } catch (...) {
            }
            try {
                log("error: exception in a handler: " + what);
                sendJson(res, 500,
                         net::ApiError{"internal", "the coordinator failed: " + what}.toJson());
            } catch (...) {
                res.status = 500;
            }
        });

    s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        // An empty method is cpp-httplib reading the unread body of a refused upload as the next
        // request before it closes the connection: not worth a line.
        if (req.method.empty())
            return;
        coord.metrics().countResponse(res.status);
        if (res.status < 400)
            return;
        try {
            log(net::loggable(req.remote_addr + " " + req.method + " " + req.path + " -> " +
                              std::to_string(res.status) + " " + res.body.substr(0, 300)));
        } catch (...) {
        }
    });

    auto jsonTooLarge = [this](const httplib::Request& req, httplib::Response& res) {
        if (static_cast<int64_t>(req.body.size()) <= cfg.maxJsonBytes)
            return false;
        sendRefusal(
            res, {413, "too_large",
                  "the body has " + std::to_string(req.body.size()) +
                      " bytes; this endpoint accepts at most " + std::to_string(cfg.maxJsonBytes)});
        return true;
    };

    s.Post("/v1/clients",
           [this, jsonTooLarge](const httplib::Request& req, httplib::Response& res) {
               if (jsonTooLarge(req, res))
                   return;
               if (auto refused = registrations.admit(req.remote_addr)) {
                   log(net::loggable("registration from " + req.remote_addr +
                                     " refused: " + refused->message));
                   return sendRefusal(res, *refused);
               }
               if (auto refused = checkRegistrationSecret(
                       cfg.registerSecret, req.get_header_value(kRegistrationSecretHeader))) {
                   log(net::loggable("registration from " + req.remote_addr +
                                     " refused: " + refused->code));
                   return sendRefusal(res, *refused);
               }
               auto r = coord.registerClient(req.body);
               if (!r.ok())
                   return sendRefusal(res, r.refusal());
               sendJson(res, 200, r.value().toJson());
           });

    s.Post("/v1/work", [this, jsonTooLarge](const httplib::Request& req, httplib::Response& res) {
        if (jsonTooLarge(req, res))
            return;
        auto id = auth(req, res);
        if (!id)
            return;
        std::optional<std::string> requestId;
        if (req.has_header(net::kRequestIdHeader))
            requestId = req.get_header_value(net::kRequestIdHeader);
        auto r = coord.requestWork(*id, req.body, requestId);
        if (!r.ok())
            return sendRefusal(res, r.refusal());
        if (!r.value().manifest) {
            res.status = 204;
            res.set_header("Retry-After", std::to_string(r.value().retryAfterSeconds));
            return;
        }
        sendJson(res, 200, r.value().manifest->toJson());
    });

    s.Get("/v1/work", [this, jsonTooLarge](const httplib::Request& req, httplib::Response& res) {
        if (jsonTooLarge(req, res))
            return;
        auto id = auth(req, res);
        if (!id)
            return;
        auto r = coord.heldWork(*id);
        if (!r.ok())
            return sendRefusal(res, r.refusal());
        sendJson(res, 200, r.value().toJson());
    });

    s.Delete(R"(/v1/work/(\d+))",
             [this, jsonTooLarge](const httplib::Request& req, httplib::Response& res) {
                 if (jsonTooLarge(req, res))
                     return;
                 auto id = auth(req, res);
                 if (!id)
                     return;
                 auto wu = pathNumber(req, 1);
                 if (!wu)
                     return sendRefusal(res, {404, "unknown_work_unit", "no such work unit"});
                 auto r = coord.releaseWork(*id, *wu);
                 if (!r.ok())
                     return sendRefusal(res, r.refusal());
                 res.status = 204;
             });

    s.Post(R"(/v1/work/(\d+)/progress)",
           [this, jsonTooLarge](const httplib::Request& req, httplib::Response& res) {
               if (jsonTooLarge(req, res))
                   return;
               auto id = auth(req, res);
               if (!id)
                   return;
               auto wu = pathNumber(req, 1);
               if (!wu)
                   return sendRefusal(res, {404, "unknown_work_unit", "no such work unit"});
               auto r = coord.progress(*id, *wu, req.body);
               if (!r.ok())
                   return sendRefusal(res, r.refusal());
               sendJson(res, 200, r.value().toJson());
           });

    // A whole result, or (a sharded run) piece k of one: the same checks and stream.
    const auto upload = [this](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& reader) {
        // A refusal before the body: drop what is left of it (bounded) so the answer arrives.
        auto refuse = [&](const Refusal& r) { sendRefusal(res, r, !drainBody(reader)); };
        auto id = coord.authenticate(req.get_header_value("Authorization"));
        if (!id.ok())
            return refuse(id.refusal());
        auto wu = pathNumber(req, 1);
        if (!wu)
            return refuse({404, "unknown_work_unit", "no such work unit"});
        int piece = -1;
        if (req.matches.size() > 2) {
            auto k = pathNumber(req, 2);
            if (!k || *k > net::kMaxShards)
                return refuse({404, "unknown_piece", "no such piece"});
            piece = static_cast<int>(*k);
        }
        const int64_t length = req.has_header("Transfer-Encoding") ? -1 : bodyLength(req).bytes;
        auto session = coord.beginUpload(id.value(), *wu, length,
                                         req.get_header_value("X-Tandem-Signature"), false, piece);
        if (!session.ok())
            return refuse(session.refusal());
        std::optional<Outcome<std::string>> early;
        const bool complete = reader([&](const char* data, size_t n) {
            early = session.value()->feed(
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data), n));
            return !early.has_value();
        });
        if (early) {
            res.set_header("Connection", "close");
            if (early->ok())
                return sendJson(res, 200, early->value());
            return sendRefusal(res, early->refusal(), true);
        }
        auto out = session.value()->finish(complete);
        if (!out.ok())
            return sendRefusal(res, out.refusal(), !complete);
        sendJson(res, 200, out.value());
    };
    s.Put(R"(/v1/results/(\d+))", upload);
    s.Put(R"(/v1/results/(\d+)/pieces/(\d+))", upload);

    // /v1/runs/<run>/<kind>/<n>: the file lookup(run, n) names.
    auto serveRunFile = [this](std::string kind, auto lookup) {
        return [this, kind, lookup](const httplib::Request& req, httplib::Response& res) {
            if (!auth(req, res))
                return;
            auto run = pathNumber(req, 1), n = pathNumber(req, 2);
            if (!run || !n)
                return sendRefusal(res, {404, "not_found", "no such file"});
            auto f = lookup(*run, *n);
            if (!f.ok())
                return sendRefusal(res, f.refusal());
            serveFile(req, res, f.value(), [this, kind](size_t bytes) {
                coord.metrics().addDownloadBytes(kind, bytes);
            });
        };
    };
    s.Get(R"(/v1/runs/(\d+)/weights/(\d+))",
          serveRunFile("weights", [this](int64_t run, int64_t version) {
              return coord.weightsFile(run, version);
          }));
    s.Get(R"(/v1/runs/(\d+)/data/(\d+))", serveRunFile("data", [this](int64_t run, int64_t shard) {
              return coord.dataShard(run, shard);
          }));

    // Content-addressed, immutable, and public like the run they belong to: no token, so that
    // any cache may hold them (blob_store.hpp, docs/protocol.md "Blobs").
    s.Get(R"(/blobs/sha256/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
        auto f = coord.blob(req.matches[1].str());
        if (!f.ok())
            return sendRefusal(res, f.refusal());
        res.set_header("Cache-Control", "public, max-age=31536000, immutable");
        serveFile(req, res, f.value(),
                  [this](size_t bytes) { coord.metrics().addDownloadBytes("blobs", bytes); });
    });

    addPublicRoutes(s, coord, cfg.maxJsonBytes);  // the run page, leaderboard, donor profile

    s.Get("/v1/status", [this](const httplib::Request&, httplib::Response& res) {
        sendJson(res, 200, coord.status().toJson());
    });
    s.Get(R"(/v1/runs/(\d+)/samples)", [this](const httplib::Request& req, httplib::Response& res) {
        const auto run = pathNumber(req, 1);
        int64_t limit = 20;
        if (req.has_param("limit")) {
            const std::string v = req.get_param_value("limit");
            const bool digits = !v.empty() && v.size() <= 4 &&
                                v.find_first_not_of("0123456789") == std::string::npos;
            limit = digits ? std::stoll(v) : 0;
            if (limit < 1 || limit > 1000)
                return sendRefusal(res, {400, "bad_request",
                                         "limit must be an integer from 1 to 1000, found '" +
                                             net::quotable(v) + "'"});
        }
        if (!run || *run != coord.runId())
            return sendRefusal(res, {404, "not_found", "no such run"});
        std::vector<net::SampleSummary> out;
        for (const ModelSample& m : coord.samples(*run, limit))
            out.push_back({m.version, m.prompt, m.text});
        sendJson(res, 200, net::samplesToJson(out));
    });

    s.Get("/v1/speedtest", [this](const httplib::Request& req, httplib::Response& res) {
        int64_t bytes = 1 << 20;
        if (req.has_param("bytes")) {
            const std::string v = req.get_param_value("bytes");
            bool digits = !v.empty() && v.size() <= 18 &&
                          v.find_first_not_of("0123456789") == std::string::npos;
            if (!digits)
                return sendRefusal(res, {400, "bad_request",
                                         "bytes must be a non-negative integer, found '" +
                                             net::quotable(v) + "'"});
            bytes = std::stoll(v);
        }
        if (bytes > cfg.maxSpeedtestBytes)
            return sendRefusal(res, {400, "bad_request",
                                     "bytes " + std::to_string(bytes) + " exceeds the limit " +
                                         std::to_string(cfg.maxSpeedtestBytes)});
        res.set_header("Cache-Control", "no-store");
        res.set_content_provider(static_cast<size_t>(bytes), "application/octet-stream",
                                 [](size_t offset, size_t len, httplib::DataSink& sink) {
                                     static const std::vector<char> block = [] {
                                         std::vector<char> b(1 << 16);
                                         uint32_t x = 2463534242u;
                                         for (auto& ch : b) {  // xorshift: not compressible
                                             x ^= x << 13;
                                             x ^= x >> 17;
                                             x ^= x << 5;
                                             ch = static_cast<char>(x);
                                         }
                                         return b;
                                     }();
                                     (void)offset;
                                     return sink.write(block.data(), std::min(len, block.size()));
                                 });
    });

    s.Post("/v1/speedtest", [this](const httplib::Request&, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
        const auto t0 = std::chrono::steady_clock::now();
        int64_t total = 0;
        bool tooLarge = false;
        const bool ok = reader([&](const char*, size_t n) {
            total += static_cast<int64_t>(n);
            tooLarge = total > cfg.maxSpeedtestBytes;
            return total <= cfg.maxSpeedtestBytes + kDrainLimit;
        });
        if (tooLarge)
            return sendRefusal(res,
                               {413, "too_large",
                                "speed test uploads are limited to " +
                                    std::to_string(cfg.maxSpeedtestBytes) + " bytes"},
                               !ok);
        if (!ok)
            return sendRefusal(res, {400, "truncated", "the body ended early"}, true);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sendJson(res, 200, nlohmann::json{{"bytes", total}, {"seconds", seconds}}.dump());
    });
}

Expected<std::unique_ptr<Server>> Server::create(Coordinator& coordinator, ServerConfig config,
                                                 TlsFiles tls, Logger log) {
    if (!log)
        log = [](const std::string&) {};
    auto impl =
        std::make_unique<Impl>(coordinator, std::move(config), std::move(tls), std::move(log));
    const std::string cert = impl->tls.cert.string(), key = impl->tls.key.string();
    std::string tlsError;
    impl->http = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
        SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
        if (SSL_CTX_use_certificate_chain_file(&ctx, cert.c_str()) != 1) {
            tlsError = "cannot load the certificate " + cert;
            return false;
        }
        if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(&ctx) != 1) {
            tlsError =
                "cannot load the private key " + key + " (or it does not match the certificate)";
            return false;
        }
        return true;
    });
    if (!impl->http->is_valid())
        return makeError(tlsError.empty() ? "the TLS server could not be set up" : tlsError);
    auto& s = *impl->http;
    const int threads = std::max(2, impl->cfg.threads);
    s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    s.set_read_timeout(impl->cfg.readTimeoutSeconds, 0);
    s.set_write_timeout(impl->cfg.writeTimeoutSeconds, 0);
    s.set_keep_alive_timeout(impl->cfg.keepAliveSeconds);
    s.set_keep_alive_max_count(static_cast<size_t>(impl->cfg.keepAliveMaxCount));
    s.set_payload_max_length(static_cast<size_t>(
        std::max<int64_t>(
            {coordinator.maxUploadBytes(), impl->cfg.maxSpeedtestBytes, impl->cfg.maxJsonBytes}) +
        kDrainLimit));
    s.set_tcp_nodelay(true);
    bindExclusively(s);
    impl->routes();
    return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Server::~Server() {
    stop();
}

Status Server::start() {
    Impl& s = *m_impl;
    if (s.cfg.port == 0) {
        s.port = s.http->bind_to_any_port(s.cfg.host);
    } else {
        s.port = s.http->bind_to_port(s.cfg.host, s.cfg.port) ? s.cfg.port : -1;
    }
    if (s.port <= 0)
        return makeError("cannot listen on " + s.cfg.host + ":" + std::to_string(s.cfg.port) +
                         " (in use, or not an address of this machine?)");
    listenInBackground(*s.http, s.thread);
    return {};
}

void Server::stop() {
    Impl& s = *m_impl;
    if (s.http)
        s.http->stop();
    if (s.thread.joinable())
        s.thread.join();
}

int Server::port() const {
    return m_impl->port;
}

}  // namespace tandem::coord
