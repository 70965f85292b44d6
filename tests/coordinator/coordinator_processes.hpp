// Real tandem-coordinator processes for the tests that run several of them on one PostgreSQL
// database (front ends, aggregation shards): start one on a port (any free one, read back from
// its output), kill it with SIGKILL, connect to it with the run's TLS identity; clients that
// hold a key and a bearer token.
#pragma once

#include "crypto.hpp"
#include "protocol.hpp"

#include <httplib.h>

#include <QProcess>
#include <QStringList>

#include <csignal>
#include <memory>
#include <string>

namespace tandem::testing {

// One tandem-coordinator process.
struct Process {
    QProcess proc;
    QString stateDir;
    QStringList args;
    int port = 0;

    // listenPort 0: any free one (read back from its log).
    bool start(int listenPort = 0) {
        proc.setProgram(TANDEM_COORDINATOR_BIN);
        proc.setArguments(QStringList{"--listen", "127.0.0.1:" + QString::number(listenPort),
                                      "--state-dir", stateDir} +
                          args);
        proc.setProcessChannelMode(QProcess::SeparateChannels);
        proc.start();
        if (!proc.waitForStarted(10000))
            return false;
        QByteArray out;
        while (!out.contains("pin ")) {
            if (!proc.waitForReadyRead(30000)) {
                proc.waitForFinished(2000);
                log += proc.readAllStandardError();
                qWarning("coordinator did not start: %s", log.constData());
                return false;
            }
            out += proc.readAllStandardOutput();
        }
        const int at = out.indexOf("listening on port ");
        port = out.mid(at + 18, out.indexOf('\n', at) - at - 18).toInt();
        return port > 0;
    }
    // Whether its log (standard error, kept across restarts) has a line with `part`.
    bool logged(const QByteArray& part) {
        log += proc.readAllStandardError();
        return log.contains(part);
    }
    QByteArray log;
    void kill9() {
        ::kill(static_cast<pid_t>(proc.processId()), SIGKILL);
        proc.waitForFinished(10000);
        log += proc.readAllStandardError();
    }
    std::unique_ptr<httplib::SSLClient> connect(const QString& caDir) const {
        auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
        c->set_ca_cert_path((caDir + "/tls/cert.pem").toStdString().c_str());
        c->enable_server_certificate_verification(true);
        c->set_connection_timeout(2, 0);
        c->set_read_timeout(10, 0);
        return c;
    }
};

struct Client {
    net::SigningKey key = net::SigningKey::generate().value();
    int64_t id = 0;
    std::string token;
    httplib::Headers auth() const { return {{"Authorization", "Bearer " + token}}; }
};

inline std::string errorCode(const std::string& body) {
    auto e = net::ApiError::fromJson(body);
    return e ? e->code : "(not an error: " + body + ")";
}

// Registers c over HTTPS at a process; false when it was not answered 200.
inline bool registerOver(httplib::SSLClient& http, Client& c, const std::string& name) {
    net::RegisterRequest req{name, c.key.publicKey(), "test"};
    auto res = http.Post("/v1/clients", req.toJson(), "application/json");
    if (!res || res->status != 200)
        return false;
    auto r = net::RegisterResponse::fromJson(res->body);
    c.id = r->clientId;
    c.token = r->token;
    return true;
}

// The run's version in a process's GET /v1/status; -1 without an answer.
inline int64_t statusVersion(httplib::SSLClient& http) {
    auto res = http.Get("/v1/status");
    if (!res || res->status != 200)
        return -1;
    auto s = net::RunStatus::fromJson(res->body);
    return s ? s->round : -1;
}

}  // namespace tandem::testing
