// tandem-bench-coordinator's coordinator: the real tandem-coordinator binary started as a child
// process on 127.0.0.1 (ports chosen by the kernel), so that its memory and CPU time are its own
// (/proc/PID) and not mixed with the simulated workers', and so that any build of it (main's, an
// older one) can be measured with the same load.
#pragma once

#include "expected.hpp"

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::bench {

// The process's own figures from /proc/PID.
struct ProcessFigures {
    int64_t rssBytes = 0;      // VmRSS
    int64_t peakRssBytes = 0;  // VmHWM: the high-water mark since the start
    double cpuSeconds = 0;     // user + system
};

class CoordinatorProcess {
  public:
    // Starts `binary` with `arguments` (plus --listen and --metrics-listen on 127.0.0.1:0) and
    // waits for the ports it prints. Its log goes to logFile.
    static Expected<CoordinatorProcess> start(const std::filesystem::path& binary,
                                              const std::vector<std::string>& arguments,
                                              const std::filesystem::path& logFile);
    CoordinatorProcess(CoordinatorProcess&& other) noexcept;
    CoordinatorProcess& operator=(CoordinatorProcess&&) = delete;
    ~CoordinatorProcess();  // stops it

    int port() const { return m_port; }
    int metricsPort() const { return m_metricsPort; }
    pid_t pid() const { return m_pid; }
    ProcessFigures figures() const;
    // GET /metrics; empty when it did not answer.
    std::string metrics() const;
    // SIGTERM, then waits (SIGKILL after 60 s); true when it exited with status 0.
    bool stop();

  private:
    CoordinatorProcess() = default;
    pid_t m_pid = -1;
    int m_port = 0, m_metricsPort = 0;
};

// The figures of any process (zeros when it is gone): a deployment's processes, measured from
// outside (tandem-bench-coordinator --target ... --pids).
ProcessFigures processFigures(pid_t pid);

// The value of an unlabelled sample `name` in Prometheus text; NaN when absent.
double metricValue(const std::string& text, const std::string& name);

}  // namespace tandem::bench
