// The real nginx (Debian's nginx-light) for tests: one instance per object, on 127.0.0.1, with
// its own prefix, configuration, pid file, logs and temporary folders under a directory the test
// owns; started by start() (which waits until the port accepts), stopped by the destructor
// (SIGTERM, then SIGKILL after 5 s). The server block is one of the shipped files of
// installer/nginx/ with its @NAMES@ replaced, so that the tests run what operators install.
#pragma once

#include "expected.hpp"

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace tandem::testing {

// The nginx binary, if installed (PATH, then /usr/sbin/nginx).
std::optional<std::filesystem::path> findNginx();

// A free TCP port on 127.0.0.1 (bound to 0 and released; a race is unlikely in a test).
int freeLoopbackPort();

// `text` with every "@NAME@" of `values` replaced; an error names a placeholder left over.
Expected<std::string> fillPlaceholders(std::string text,
                                       const std::map<std::string, std::string>& values);

class NginxProcess {
  public:
    // prefix: an empty directory for this instance; serverBlock: the http {} part.
    NginxProcess(std::filesystem::path nginx, std::filesystem::path prefix, std::string serverBlock,
                 int port);
    ~NginxProcess();
    NginxProcess(const NginxProcess&) = delete;
    NginxProcess& operator=(const NginxProcess&) = delete;

    // Checks the configuration (nginx -t), starts nginx and waits (up to 10 s) for its port.
    Status start();
    void stop();
    int port() const { return m_port; }
    // The error log, for a failing test's message.
    std::string errorLog() const;
    // The access log, one line per request: `ADDR "REQUEST" status=N upstream="HOST:PORT[, ...]"
    // upstream_status="N[, ...]"` (several upstreams when nginx tried the next one).
    std::string accessLog() const;

  private:
    std::filesystem::path m_nginx, m_prefix;
    std::string m_serverBlock;
    int m_port = 0;
    pid_t m_pid = -1;
};

}  // namespace tandem::testing
