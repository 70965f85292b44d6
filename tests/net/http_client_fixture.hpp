// What the HTTPS client's tests share: a fixture with TLS identities for 127.0.0.1, a client
// configuration with an injected sleep, and helpers for blobs, files and ranged answers.
#pragma once

#include "crypto.hpp"
#include "http_client.hpp"
#include "tls.hpp"
#include "tls_test_server.hpp"

#include "random.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <fstream>
#include <mutex>

namespace tandem::testing {

std::string makeBlob(size_t n, uint64_t seed) {
    Rng rng(seed);
    std::string s(n, '\0');
    for (auto& c : s)
        c = static_cast<char>(rng.next() & 0xff);
    return s;
}

// A value the server threads write and the test reads (the socket orders them, but race
// detectors cannot see that).
template <class T>
class Guarded {
  public:
    void set(T v) {
        std::lock_guard lock(m_mutex);
        m_value = std::move(v);
    }
    T get() const {
        std::lock_guard lock(m_mutex);
        return m_value;
    }

  private:
    mutable std::mutex m_mutex;
    T m_value{};
};

inline net::Sha256Digest digestOf(const std::string& s) {
    return net::sha256(std::string_view(s));
}

inline std::string readFile(const std::filesystem::path& p) {
    std::string s;
    if (FILE* f = std::fopen(p.c_str(), "rb")) {
        char buf[65536];
        size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
            s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

inline void writeFile(const std::filesystem::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}

// Serves `blob` at any path, honouring "Range: bytes=N-" and "bytes=N-M" with a correct 206.
inline TestResponse serveWithRange(const TestRequest& req, const std::string& blob) {
    TestResponse r;
    const std::string range = req.header("range");
    if (range.rfind("bytes=", 0) == 0) {
        const size_t dash = range.find('-');
        const size_t from = std::stoul(range.substr(6, dash - 6));
        size_t to = blob.size() - 1;
        if (dash + 1 < range.size())
            to = std::min(to, static_cast<size_t>(std::stoul(range.substr(dash + 1))));
        if (from >= blob.size()) {
            r.status = 416;
            r.reason = "Range Not Satisfiable";
            r.headers = {{"Content-Range", "bytes */" + std::to_string(blob.size())}};
            r.body = R"({"error":{"code":"range_not_satisfiable","message":"outside"}})";
            return r;
        }
        r.status = 206;
        r.reason = "Partial Content";
        r.headers = {{"Content-Range", "bytes " + std::to_string(from) + "-" + std::to_string(to) +
                                           "/" + std::to_string(blob.size())}};
        r.body = blob.substr(from, to - from + 1);
        return r;
    }
    r.body = blob;
    return r;
}

// The TLS identities, the temporary directory and the client configuration of a test class.
class HttpClientFixture {
  protected:
    QTemporaryDir m_dir;
    net::TlsIdentity m_id;       // for localhost and 127.0.0.1
    net::TlsIdentity m_otherId;  // for another name only
    std::string m_pin;
    std::filesystem::path m_caFile, m_otherCaFile;
    std::vector<std::chrono::milliseconds> m_sleeps;

    net::HttpClientConfig baseConfig(int port) {
        net::HttpClientConfig c;
        c.baseUrl = "https://127.0.0.1:" + std::to_string(port);
        c.caFile = m_caFile;
        c.proxy = "direct";
        c.connectTimeout = std::chrono::milliseconds(5000);
        c.lowSpeedSeconds = 5;
        c.retry.maxAttempts = 1;
        c.sleep = [this](std::chrono::milliseconds d) { m_sleeps.push_back(d); };
        c.jitterSeed = 7;
        return c;
    }
    std::unique_ptr<net::HttpClient> client(net::HttpClientConfig c) {
        auto r = net::HttpClient::create(std::move(c));
        if (!r) {
            qWarning("%s", r.error().message.c_str());
            return nullptr;
        }
        return std::move(r.value());
    }
    std::filesystem::path path(const char* name) const {
        return std::filesystem::path(m_dir.path().toStdString()) / name;
    }

    // Call from initTestCase.
    void setUpIdentities() {
        std::signal(SIGPIPE, SIG_IGN);  // the test server writes to connections the client cut
        m_id = net::generateSelfSignedCertificate({"localhost", "127.0.0.1"}).value();
        m_otherId = net::generateSelfSignedCertificate({"other.example"}).value();
        m_pin = net::publicKeyPin(m_id.certificatePem).value();
        m_caFile = path("ca.pem");
        m_otherCaFile = path("other.pem");
        writeFile(m_caFile, m_id.certificatePem);
        writeFile(m_otherCaFile, m_otherId.certificatePem);
    }
};

}  // namespace tandem::testing
