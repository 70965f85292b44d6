// A scripted HTTPS/1.1 server for client tests (OpenSSL, a thread per connection, every answer
// with Connection: close), so a test controls status lines and headers exactly (a 206 with the
// wrong Content-Range, a 200 that ignores Range, Retry-After, ...).
#pragma once

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

struct TestRequest {
    std::string method, path;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
    bool beforeBody = false;  // asked after Expect: 100-continue, before the body is read
    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

struct TestResponse {
    int status = 200;
    std::string reason = "OK";
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    bool rejectBeforeBody = false;  // answer an Expect: 100-continue request without reading
};

class TlsTestServer {
  public:
    using Handler = std::function<TestResponse(const TestRequest&)>;

    // Returns false when the certificate or key cannot be used.
    bool start(const std::string& certPem, const std::string& keyPem, Handler handler) {
        m_handler = std::move(handler);
        m_ctx = SSL_CTX_new(TLS_server_method());
        BIO* cb = BIO_new_mem_buf(certPem.data(), static_cast<int>(certPem.size()));
        X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
        BIO_free(cb);
        BIO* kb = BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size()));
        EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
        BIO_free(kb);
        const bool ok = cert && key && SSL_CTX_use_certificate(m_ctx, cert) == 1 &&
                        SSL_CTX_use_PrivateKey(m_ctx, key) == 1;
        X509_free(cert);
        EVP_PKEY_free(key);
        if (!ok)
            return false;
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(m_fd, 16) != 0 ||
            ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            return false;
        m_port = ntohs(addr.sin_port);
        m_thread = std::thread([this] { loop(); });
        return true;
    }
    ~TlsTestServer() {
        m_stop = true;
        if (m_thread.joinable())
            m_thread.join();
        if (m_fd >= 0)
            ::close(m_fd);
        SSL_CTX_free(m_ctx);
    }
    int port() const { return m_port; }
    int requests() const { return m_requests; }
    int handshakeFailures() const { return m_handshakeFailures; }

  private:
    void loop() {
        while (!m_stop) {
            pollfd p{m_fd, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0)
                continue;
            const int c = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            timeval tv{10, 0};
            ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            m_workers.emplace_back([this, c] {
                SSL* ssl = SSL_new(m_ctx);
                SSL_set_fd(ssl, c);
                if (SSL_accept(ssl) == 1)
                    serve(ssl);
                else
                    ++m_handshakeFailures;
                ERR_clear_error();
                SSL_free(ssl);
                ::close(c);
            });
        }
        for (auto& t : m_workers)
            t.join();
    }
    std::vector<std::thread> m_workers;  // one per connection, joined when stopping

    static bool writeAll(SSL* ssl, const std::string& s) {
        size_t done = 0;
        while (done < s.size()) {
            const int n = SSL_write(ssl, s.data() + done, static_cast<int>(s.size() - done));
            if (n <= 0)
                return false;
            done += static_cast<size_t>(n);
        }
        return true;
    }

    void serve(SSL* ssl) {
        std::string data;
        char buf[16384];
        size_t headEnd = std::string::npos;
        while ((headEnd = data.find("\r\n\r\n")) == std::string::npos && data.size() < 65536) {
            const int n = SSL_read(ssl, buf, sizeof buf);
            if (n <= 0)
                return;
            data.append(buf, static_cast<size_t>(n));
        }
        if (headEnd == std::string::npos)
            return;
        TestRequest req;
        const std::string head = data.substr(0, headEnd);
        std::string rest = data.substr(headEnd + 4);
        size_t lineEnd = head.find("\r\n");
        const std::string first = head.substr(0, lineEnd);
        const size_t s1 = first.find(' '), s2 = first.find(' ', s1 + 1);
        req.method = first.substr(0, s1);
        req.path = first.substr(s1 + 1, s2 - s1 - 1);
        size_t pos = lineEnd == std::string::npos ? head.size() : lineEnd + 2;
        while (pos < head.size()) {
            size_t e = head.find("\r\n", pos);
            if (e == std::string::npos)
                e = head.size();
            const std::string line = head.substr(pos, e - pos);
            const size_t colon = line.find(':');
            if (colon != std::string::npos) {
                std::string name = line.substr(0, colon);
                for (char& ch : name)
                    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                std::string value = line.substr(colon + 1);
                value.erase(0, value.find_first_not_of(' '));
                req.headers[name] = value;
            }
            pos = e + 2;
        }
        ++m_requests;
        const size_t length =
            req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
        TestResponse res;
        const bool expect = req.header("expect") == "100-continue";
        if (expect) {
            // Ask the handler first with an empty body; it may refuse before the body is sent.
            req.beforeBody = true;
            res = m_handler(req);
            req.beforeBody = false;
            if (!res.rejectBeforeBody) {
                if (!writeAll(ssl, "HTTP/1.1 100 Continue\r\n\r\n"))
                    return;
            }
        }
        if (!expect || !res.rejectBeforeBody) {
            while (rest.size() < length) {
                const int n = SSL_read(ssl, buf, sizeof buf);
                if (n <= 0)
                    return;
                rest.append(buf, static_cast<size_t>(n));
            }
            req.body = rest.substr(0, length);
            res = m_handler(req);
        }
        std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + res.reason + "\r\n";
        bool hasLength = false;
        for (const auto& [k, v] : res.headers) {
            out += k + ": " + v + "\r\n";
            hasLength = hasLength || k == "Content-Length";
        }
        if (!hasLength)
            out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
        out += "Connection: close\r\n\r\n";
        if (req.method != "HEAD")
            out += res.body;
        if (writeAll(ssl, out))
            SSL_shutdown(ssl);
    }

    Handler m_handler;
    SSL_CTX* m_ctx = nullptr;
    int m_fd = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_requests{0};
    std::atomic<int> m_handshakeFailures{0};
    std::thread m_thread;
};

}  // namespace tandem::testing
