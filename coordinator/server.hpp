// The HTTPS API of protocol v2 (docs/protocol.md) on cpp-httplib with OpenSSL, mapped onto a
// Coordinator. Bounded: request and header sizes, JSON bodies, concurrent uploads (in the
// Coordinator), server threads, read/write and keep-alive timeouts.
#pragma once

#include "coordinator.hpp"
#include "expected.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tandem::coord {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8443;                 // 0: any free port (tests)
    std::filesystem::path certFile;  // both empty: a self-signed identity in <state>/tls
    std::filesystem::path keyFile;
    // A connection holds one while it is served: an upload for as long as it streams, an idle
    // keep-alive connection for up to keepAliveSeconds. Room for the default 256 uploads at once
    // and as many control requests (a thread costs about 70 KiB of RSS; docs/benchmarks.md).
    int threads = 512;
    int readTimeoutSeconds = 30;
    int writeTimeoutSeconds = 60;
    int keepAliveSeconds = 5;
    int keepAliveMaxCount = 100;
    int64_t maxJsonBytes = 64 * 1024;
    int64_t maxSpeedtestBytes = 64 << 20;
    // Registrations per source address (admission.hpp): a burst, then this many an hour; 0: any.
    double registerPerHour = 0;
    int registerBurst = 10;
    // Non-empty: a registration must carry it in X-Tandem-Registration-Secret (admission.hpp).
    std::string registerSecret;
    // More DNS names or addresses for a generated certificate (workers reach the coordinator as).
    std::vector<std::string> extraNames;
};

struct TlsFiles {
    std::filesystem::path cert, key;
    std::string pin;  // sha256//base64 of the certificate's public key
    bool generated = false;
};

// Uses certFile/keyFile when given; otherwise <stateDir>/tls/{cert,key}.pem, generated on first
// use for localhost, 127.0.0.1, ::1 and `host`. Writes the pin to <stateDir>/tls/pin.txt.
Expected<TlsFiles> ensureTlsIdentity(const std::filesystem::path& stateDir,
                                     const ServerConfig& config);

class Server {
  public:
    static Expected<std::unique_ptr<Server>> create(Coordinator& coordinator, ServerConfig config,
                                                    TlsFiles tls, Logger log);
    ~Server();
    // Binds and serves on a background thread.
    Status start();
    void stop();
    int port() const;

    struct Impl;

  private:
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace tandem::coord
