// A TCP proxy for tests: listens on 127.0.0.1, forwards every connection to a target, and can cut
// a connection after N bytes (either direction), stall it, or slow it to a rate. Faults come from
// explicit per-connection plans or are drawn from a seed, so a run is reproducible.
#pragma once

#include "expected.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::testing {

// What happens to one connection. Byte offsets count the bytes forwarded in that direction
// ("up": client to server, "down": server to client); -1 disables a fault.
struct FaultPlan {
    int64_t cutUpAtByte = -1;      // close both sides once this many bytes went up
    int64_t cutDownAtByte = -1;    // ... or came down
    int64_t stallDownAtByte = -1;  // stop forwarding for stallFor once this many bytes came down
    int64_t stallUpAtByte = -1;
    std::chrono::milliseconds stallFor{0};
    int64_t bytesPerSecond = 0;  // both directions; 0: full speed
};

// Faults drawn per connection from Rng(seed, connection index), for connections below
// maxFaultyConnections; later connections pass through untouched (so a test always ends).
struct RandomFaults {
    double cutProbability = 0;  // a cut in a random direction at a byte in [minByte, maxByte)
    double stallProbability = 0;
    double slowProbability = 0;
    int64_t minByte = 0;
    int64_t maxByte = 1 << 20;
    std::chrono::milliseconds stallFor{0};
    int64_t slowBytesPerSecond = 256 * 1024;
    int maxFaultyConnections = 8;
};

// How a client opens a connection through the proxy: plain TCP (the proxy is the server's
// address), or as a forward proxy the client was configured with (HTTP CONNECT, SOCKS5 without
// authentication). The requested destination is recorded; the connection goes to the target.
enum class ProxyProtocol { None, HttpConnect, Socks5 };

struct FaultProxyStats {
    int connections = 0;
    int tunnels = 0;                    // CONNECT or SOCKS5 handshakes completed
    std::string lastTunnelDestination;  // "host:port" the client asked for
    int cuts = 0;                       // connections the proxy cut
    int stalls = 0;                     // stalls that happened
    int64_t bytesUp = 0, bytesDown = 0;
};

class FaultProxy {
  public:
    FaultProxy(std::string targetHost, int targetPort, uint64_t seed = 1);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    void setProtocol(ProxyProtocol protocol);  // before start()
    Status start();                            // binds 127.0.0.1 on a free port
    void stop();                               // closes everything and joins the threads
    int port() const { return m_port; }

    // Plans for the next connections, in order; after them the random faults (if set), else
    // pass-through.
    void setPlans(std::vector<FaultPlan> plans);
    void setRandomFaults(RandomFaults faults);
    // The plan the next connection gets (for tests that want to know).
    FaultPlan planFor(int connectionIndex);
    FaultProxyStats stats() const;

    struct Impl;

  private:
    std::unique_ptr<Impl> m_impl;
    int m_port = 0;
};

}  // namespace tandem::testing
