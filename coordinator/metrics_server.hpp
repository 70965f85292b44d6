// GET /metrics on its own plain-HTTP address (--metrics-listen), so that Prometheus scrapes it on
// a private interface without the workers' TLS pin or bearer tokens. Serves nothing else.
#pragma once

#include "coordinator.hpp"
#include "expected.hpp"

#include <memory>
#include <string>

namespace tandem::coord {

class MetricsServer {
  public:
    // Binds host:port (port 0: any free port) and serves on a background thread.
    static Expected<std::unique_ptr<MetricsServer>> start(Coordinator& coordinator,
                                                          const std::string& host, int port,
                                                          Logger log);
    ~MetricsServer();
    int port() const;

    struct Impl;

  private:
    explicit MetricsServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace tandem::coord
