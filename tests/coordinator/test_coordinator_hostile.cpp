// Hostile requests against the real HTTPS server on 127.0.0.1, written byte by byte with a raw
// TLS client: none may end the process, every answer is a well-formed JSON error, request text
// is quoted only as valid escaped UTF-8, log lines cannot be forged, Content-Length is read
// strictly and the answer to a refused upload arrives.
#include "harness.hpp"

#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

using namespace tandem;
using namespace tandem::testing;

namespace {

coord::CoordinatorConfig smallConfig() {
    coord::CoordinatorConfig c;
    c.model = "L=1,NH=2,C=16,T=16";
    c.innerSteps = 4;
    c.batch = 2;
    c.quorum = 3;
    c.backgroundThreads = false;
    c.threads = 1;
    return c;
}

struct RawAnswer {
    int status = 0;  // 0: no answer came back
    std::string head, body;
};

// Splits the answers at the start of `text` (each with a Content-Length); stops at an incomplete
// one.
std::vector<RawAnswer> parseAnswers(const std::string& text) {
    std::vector<RawAnswer> out;
    size_t at = 0;
    while (text.compare(at, 9, "HTTP/1.1 ") == 0) {
        const size_t end = text.find("\r\n\r\n", at);
        if (end == std::string::npos)
            break;
        RawAnswer a;
        a.status = std::atoi(text.c_str() + at + 9);
        a.head = text.substr(at, end - at);
        const size_t length = a.head.find("Content-Length: ");
        const size_t bytes =
            length == std::string::npos ? 0 : std::stoul(a.head.substr(length + 16));
        if (text.size() < end + 4 + bytes)
            break;
        a.body = text.substr(end + 4, bytes);
        out.push_back(std::move(a));
        at = end + 4 + bytes;
    }
    return out;
}

// Sends `request` as it is (then `body`, ignoring a reset while sending it) over a new TLS
// connection and reads its answer; then, if given, sends `next` on the same connection and reads
// that answer too. Reading stops when the server closes or after 10 s of silence.
std::vector<RawAnswer> exchangeAll(int port, const std::string& request, const std::string& body,
                                   const std::string& next = {}) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string text;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        SSL* ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) == 1) {
            SSL_write(ssl, request.data(), int(request.size()));
            for (size_t sent = 0; sent < body.size();) {
                const int n = SSL_write(ssl, body.data() + sent,
                                        int(std::min<size_t>(body.size() - sent, 1 << 16)));
                if (n <= 0)
                    break;
                sent += size_t(n);
            }
            char buf[4096];
            int n = 0;
            while (parseAnswers(text).empty() && (n = SSL_read(ssl, buf, sizeof buf)) > 0)
                text.append(buf, size_t(n));
            if (!next.empty() && n > 0) {
                SSL_write(ssl, next.data(), int(next.size()));
                while (parseAnswers(text).size() < 2 && (n = SSL_read(ssl, buf, sizeof buf)) > 0)
                    text.append(buf, size_t(n));
            }
        }
        SSL_free(ssl);
    }
    ::close(fd);
    SSL_CTX_free(ctx);
    return parseAnswers(text);
}

RawAnswer exchange(int port, const std::string& request, const std::string& body = {}) {
    auto all = exchangeAll(port, request, body);
    return all.empty() ? RawAnswer{} : all[0];
}

std::string get(const std::string& target) {
    return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
}

// The answer's JSON error body: code and message, or why it is not one.
std::pair<std::string, std::string> errorOf(const RawAnswer& a) {
    auto j = nlohmann::json::parse(a.body, nullptr, false);
    if (j.is_discarded() || !j.contains("error"))
        return {"not a JSON error body: " + a.body.substr(0, 200), ""};
    return {j["error"].value("code", "?"), j["error"].value("message", "?")};
}

bool alive(TestCoordinator& t) {
    return exchange(t.port(), get("/v1/status")).status == 200;
}

}  // namespace

class TestCoordinatorHostile : public QObject {
    Q_OBJECT
  private slots:
    void invalidUtf8InThePathIsA404() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        for (std::string path : {"/v1/%ff", "/v1/%ff%fe%fd", "/v1/%c3", "/v1/%ed%a0%80", "/%ff",
                                 "/v1/runs/%ff/weights/1", "/v1/%c0%af%00x"}) {
            for (std::string method : {"GET", "POST", "DELETE"}) {
                const RawAnswer a = exchange(
                    t.port(), method + " " + path +
                                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
                QVERIFY2(a.status == 404 || a.status == 401,
                         (method + " " + path + ": status " + std::to_string(a.status)).c_str());
                const auto [code, message] = errorOf(a);
                QVERIFY2(code == "not_found" || code == "unauthorized", code.c_str());
                if (code == "not_found")
                    QVERIFY2(message.find("\\x") != std::string::npos, message.c_str());
            }
        }
        // A path of 4 KiB of invalid bytes: quoted, but bounded.
        std::string longPath = "/v1/";
        for (int i = 0; i < 1000; ++i)
            longPath += "%ff";
        const RawAnswer a = exchange(t.port(), get(longPath));
        QCOMPARE(a.status, 404);
        QVERIFY(errorOf(a).second.size() < 400);
        QVERIFY(alive(t));
    }

    void invalidUtf8InTheQueryIsA400() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        for (std::string v : {"%ff", "%c3%28", "12%0a", "%e2%82"}) {
            const RawAnswer a = exchange(t.port(), get("/v1/speedtest?bytes=" + v));
            QCOMPARE(a.status, 400);
            const auto [code, message] = errorOf(a);
            QCOMPARE(code, std::string("bad_request"));
            QVERIFY2(message.find("bytes must be") != std::string::npos, message.c_str());
            QVERIFY2(message.find('\n') == std::string::npos, message.c_str());
        }
        QVERIFY(alive(t));
    }

    void contentLengthIsReadStrictly() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto c = t.registerClient("a");
        QVERIFY(!c.token.empty());
        const std::string body = std::string(R"({"device":"cpu"})");
        for (std::string v : {"+16", "16.0", "16 abc", "16e0", "-16", "0x10", "1 6", "16,16"}) {
            for (std::string target : {"/v1/work", "/v1/clients"}) {
                const RawAnswer a = exchange(
                    t.port(),
                    "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                        c.token + "\r\nContent-Length: " + v + "\r\n\r\n",
                    body);
                QVERIFY2(a.status == 400, (target + " Content-Length '" + v + "': status " +
                                           std::to_string(a.status))
                                              .c_str());
                QVERIFY2(errorOf(a).second.find("Content-Length") != std::string::npos,
                         errorOf(a).second.c_str());
            }
            // The result upload, with and without Expect: 100-continue.
            for (std::string expect : {"", "Expect: 100-continue\r\n"}) {
                const RawAnswer a =
                    exchange(t.port(),
                             "PUT /v1/results/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
                             "Bearer " +
                                 c.token + "\r\n" + expect + "Content-Length: " + v + "\r\n\r\n");
                QVERIFY2(a.status == 400, ("PUT Content-Length '" + v + "' " + expect +
                                           ": status " + std::to_string(a.status))
                                              .c_str());
                QVERIFY2(errorOf(a).second.find("Content-Length") != std::string::npos,
                         errorOf(a).second.c_str());
            }
        }
        // Two lengths, even equal ones, are refused.
        const RawAnswer two =
            exchange(t.port(),
                     "POST /v1/work HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                         c.token + "\r\nContent-Length: 16\r\nContent-Length: 16\r\n\r\n",
                     body);
        QCOMPARE(two.status, 400);
        // Nothing was assigned by any of them; a well-formed request still works.
        QCOMPARE(t.coordinator().status().activeWorkers, 0);
        net::WorkRequest w{"cpu", 1 << 30, 0, 1 << 30};
        const std::string ok = w.toJson();
        const RawAnswer a = exchange(
            t.port(),
            "POST /v1/work HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: "
            "Bearer " +
                c.token + "\r\nContent-Length: " + std::to_string(ok.size()) + "\r\n\r\n",
            ok);
        QCOMPARE(a.status, 200);
    }

    void logLinesCannotBeForged() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        QCOMPARE(exchange(t.port(), get("/v1/x%0aFORGED%0d%0aALSO%1b[31m")).status, 404);
        // cpp-httplib logs a request after its answer is sent: wait for the line.
        auto seen = [&t] {
            for (const std::string& line : t.log())
                if (line.find("\\nFORGED\\r\\nALSO\\x1b[31m") != std::string::npos)
                    return true;
            return false;
        };
        QTRY_VERIFY_WITH_TIMEOUT(seen(), 5000);
        for (const std::string& line : t.log())
            QVERIFY2(line.find_first_of("\n\r\x1b") == std::string::npos, line.c_str());
    }

    void refusedUploadAnswersArrive() {
        // The whole body is sent before the answer is read, as a simple client does. Refused
        // unread, the server's close would reset the connection and could destroy the answer;
        // drained, the connection even carries the next request.
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        const std::string body(900000, 'x');
        for (int i = 0; i < 20; ++i) {
            const auto answers = exchangeAll(t.port(),
                                             "PUT /v1/results/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                             "Authorization: Bearer wrong\r\nContent-Length: " +
                                                 std::to_string(body.size()) + "\r\n\r\n",
                                             body, get("/v1/status"));
            QVERIFY2(answers.size() == 2, answers.empty() ? "none" : answers[0].head.c_str());
            QCOMPARE(answers[0].status, 401);
            QCOMPARE(errorOf(answers[0]).first, std::string("unauthorized"));
            QCOMPARE(answers[1].status, 200);
        }
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorHostile)
#include "test_coordinator_hostile.moc"
