// Soak: thousands of mutated requests (bit flips, spliced header lines, cut bodies, duplicated
// lengths, invalid UTF-8, control bytes) against the real HTTPS coordinator, one TLS connection
// each, written byte for byte. None may end the process or change the run's state (round,
// weights version, tokens, history, work handed out); every answer must be a status line, every
// JSON body must parse, no answer may be a 5xx, and no log line may hold a control character.
// TANDEM_SOAK_REQUESTS sets the number (default 3000). Prints the figures docs/fuzzing.md quotes.
#include "harness.hpp"
#include "random.hpp"

#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>

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

// Sends `request` over a new TLS connection, closes the sending side (so a cut request ends
// instead of waiting for the server's read timeout) and returns everything the server wrote.
std::string exchange(int port, const std::string& request) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
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
            if (!request.empty())
                SSL_write(ssl, request.data(), static_cast<int>(request.size()));
            SSL_shutdown(ssl);        // close_notify, then a TCP half-close: cpp-httplib reads an
            ::shutdown(fd, SHUT_WR);  // end of the request only from the latter
            char buf[4096];
            int n = 0;
            while ((n = SSL_read(ssl, buf, sizeof buf)) > 0)
                text.append(buf, static_cast<size_t>(n));
        }
        SSL_free(ssl);
    }
    ::close(fd);
    SSL_CTX_free(ctx);
    return text;
}

// The status of each answer in `text` ("HTTP/1.1 NNN"), and whether each JSON body parsed.
struct Answers {
    std::vector<int> statuses;
    std::string badBody;  // the first JSON body that does not parse
};

Answers parseAnswers(const std::string& text) {
    Answers out;
    size_t at = 0;
    while (at < text.size() && text.compare(at, 9, "HTTP/1.1 ") == 0) {
        const size_t end = text.find("\r\n\r\n", at);
        if (end == std::string::npos)
            break;
        const std::string head = text.substr(at, end - at);
        out.statuses.push_back(std::atoi(text.c_str() + at + 9));
        const size_t length = head.find("Content-Length: ");
        const size_t bytes = length == std::string::npos ? 0 : std::stoul(head.substr(length + 16));
        const std::string body = text.substr(end + 4, bytes);
        if (head.find("application/json") != std::string::npos &&
            nlohmann::json::parse(body, nullptr, false).is_discarded() && out.badBody.empty())
            out.badBody = head + "\r\n\r\n" + body;
        at = end + 4 + bytes;
    }
    return out;
}

std::string withBody(const std::string& head, const std::string& body) {
    return head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Well-formed requests of every route; none of them can change the run's state (work is asked
// for with a token that does not exist; the real token only reads, reports on a unit it does not
// hold and uploads a result nobody asked for).
std::vector<std::string> templates(const std::string& token) {
    const std::string host = "Host: 127.0.0.1\r\n";
    const std::string auth = "Authorization: Bearer " + token + "\r\n";
    const std::string wrong = "Authorization: Bearer 0123456789abcdef\r\n";
    const std::string work = net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson();
    const std::string result(128 + 64, 'r');
    return {
        "GET /v1/status HTTP/1.1\r\n" + host + "\r\n",
        "GET /v1/speedtest?bytes=100 HTTP/1.1\r\n" + host + "\r\n",
        "GET /v1/runs/1/weights/0 HTTP/1.1\r\n" + host + "Range: bytes=0-99\r\n\r\n",
        "GET /v1/runs/1/data/0 HTTP/1.1\r\n" + host + "Range: bytes=-10\r\nIf-Range: \"x\"\r\n\r\n",
        "GET /v1/runs/1/samples?limit=3 HTTP/1.1\r\n" + host + "\r\n",
        "GET /blobs/sha256/" + std::string(64, 'a') + " HTTP/1.1\r\n" + host +
            "Range: bytes=0-99\r\n\r\n",
        "GET /v1/work HTTP/1.1\r\n" + host + auth + "\r\n",
        "DELETE /v1/work/77 HTTP/1.1\r\n" + host + auth + "\r\n",
        withBody("POST /v1/clients HTTP/1.1\r\n" + host, R"({"name":"x","public_key":"%ff"})"),
        withBody("POST /v1/work HTTP/1.1\r\n" + host + wrong + "Idempotency-Key: abc\r\n", work),
        withBody("POST /v1/work/77/progress HTTP/1.1\r\n" + host + auth,
                 net::ProgressReport{3, 5.5f, 100}.toJson()),
        withBody("PUT /v1/results/77 HTTP/1.1\r\n" + host + auth + "X-Tandem-Signature: AAAA\r\n",
                 result),
        withBody("POST /v1/speedtest HTTP/1.1\r\n" + host, std::string(300, 's')),
        "GET /v1/%ff%0a/x HTTP/1.1\r\n" + host + "\r\n",
    };
}

// One to four random edits of a template: the kinds of damage a parser meets.
std::string mutate(std::string s, Rng& rng) {
    static const std::vector<std::string> kPieces = {"\r\n",
                                                     " ",
                                                     ":",
                                                     "%ff",
                                                     "%0a",
                                                     "%00",
                                                     "\xff",
                                                     "\xc3",
                                                     "\x1b[31m",
                                                     "\\",
                                                     "\"",
                                                     "Content-Length: 5\r\n",
                                                     "Content-Length: +9\r\n",
                                                     "Content-Length: 99999999999\r\n",
                                                     "Transfer-Encoding: chunked\r\n",
                                                     "Expect: 100-continue\r\n",
                                                     "Range: bytes=5-1\r\n",
                                                     "Range: bytes=0-0,2-3\r\n",
                                                     "Authorization: Bearer \xff\r\n",
                                                     "Authorization: Basic x\r\n",
                                                     "Connection: keep-alive\r\n",
                                                     "?bytes=%ff&limit=-1",
                                                     "/../..",
                                                     "9999999999999999999999"};
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits; ++e) {
        const size_t at = s.empty() ? 0 : rng.below(s.size());
        switch (rng.below(6)) {
            case 0:
                if (!s.empty())
                    s[at] = static_cast<char>(s[at] ^ (1 << rng.below(8)));
                break;
            case 1:
                if (!s.empty())
                    s[at] = static_cast<char>(rng.below(256));
                break;
            case 2:
                s.insert(at, kPieces[rng.below(kPieces.size())]);
                break;
            case 3:
                s.erase(at, 1 + rng.below(16));
                break;
            case 4:
                s.insert(at, s.substr(at, 1 + rng.below(64)));  // a duplicated run
                break;
            default:
                s.resize(at);  // cut short
                break;
        }
    }
    return s;
}

}  // namespace

class TestSoakHostileRequests : public QObject {
    Q_OBJECT
  private slots:
    void mutatedRequestsChangeNothing() {
        int count = 3000;
        if (const char* env = std::getenv("TANDEM_SOAK_REQUESTS"))
            count = std::max(1, std::atoi(env));
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        const ApiClient client = t.registerClient("soak");
        QVERIFY(!client.token.empty());
        const net::RunStatus before = t.coordinator().status();
        const int64_t versionBefore = t.coordinator().currentVersion();
        const auto bases = templates(client.token);
        Rng rng(20261125);
        std::map<int, int> byClass;  // 2, 3, 4, 5: answers by status class; 0: no answer
        int answers = 0;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < count; ++i) {
            const std::string request = mutate(bases[rng.below(bases.size())], rng);
            const Answers a = parseAnswers(exchange(t.port(), request));
            QVERIFY2(a.badBody.empty(), ("a JSON body that does not parse: " + a.badBody).c_str());
            if (a.statuses.empty())
                ++byClass[0];
            for (int s : a.statuses) {
                ++answers;
                ++byClass[s / 100];
                QVERIFY2(s < 500, (std::to_string(s) + " for: " + request.substr(0, 300)).c_str());
            }
            if (i % 250 == 249)
                QVERIFY2(parseAnswers(exchange(t.port(), templates("")[0])).statuses ==
                             std::vector<int>{200},
                         ("no status answer after request " + std::to_string(i)).c_str());
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // Nothing moved: no work handed out, no result taken, no round closed.
        const net::RunStatus after = t.coordinator().status();
        QCOMPARE(after.round, before.round);
        QCOMPARE(after.totalTokens, before.totalTokens);
        QCOMPARE(after.activeWorkers, before.activeWorkers);
        QVERIFY(after.history == before.history);
        QCOMPARE(t.coordinator().currentVersion(), versionBefore);
        for (const std::string& line : t.log())
            QVERIFY2(line.find_first_of(std::string("\n\r\x1b\0", 4)) == std::string::npos,
                     line.c_str());
        std::printf(
            "soak: %d mutated requests in %.1f s, %d answers: 2xx %d, 3xx %d, 4xx %d "
            "(%.1f%% of requests), 5xx %d; no answer %d\n",
            count, seconds, answers, byClass[2], byClass[3], byClass[4], 100.0 * byClass[4] / count,
            byClass[5], byClass[0]);
    }
};

QTEST_GUILESS_MAIN(TestSoakHostileRequests)
#include "test_soak_hostile_requests.moc"
