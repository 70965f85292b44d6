#include "coordinator_process.hpp"

#include <httplib.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace tandem::bench {

namespace {

// "name:   1234 kB" of /proc/PID/status, in bytes; 0 when absent.
int64_t statusBytes(const std::string& status, const std::string& name) {
    const auto at = status.find(name + ":");
    if (at == std::string::npos)
        return 0;
    return std::atoll(status.c_str() + at + name.size() + 1) * 1024;
}

}  // namespace

Expected<CoordinatorProcess> CoordinatorProcess::start(const std::filesystem::path& binary,
                                                       const std::vector<std::string>& arguments,
                                                       const std::filesystem::path& logFile) {
    int out[2];
    if (::pipe(out) != 0)
        return makeError(std::string("pipe: ") + std::strerror(errno));
    std::vector<std::string> args{binary.string()};
    args.insert(args.end(), arguments.begin(), arguments.end());
    for (const char* a : {"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"})
        args.emplace_back(a);
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log = ::open(logFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0)
        return makeError("cannot write " + logFile.string() + ": " + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0)
        return makeError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
        ::close(out[0]);
        ::execv(argv[0], argv.data());
        std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(log);
    CoordinatorProcess p;
    p.m_pid = pid;
    // "listening on port N", then "metrics on port M" (app/tandem_coordinator.cpp).
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (p.m_metricsPort == 0 && std::chrono::steady_clock::now() < deadline) {
        pollfd fd{out[0], POLLIN, 0};
        if (::poll(&fd, 1, 1000) <= 0)
            continue;
        char buf[512];
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0)
            break;
        text.append(buf, static_cast<size_t>(n));
        if (auto at = text.find("listening on port "); at != std::string::npos)
            p.m_port = std::atoi(text.c_str() + at + 18);
        if (auto at = text.find("metrics on port "); at != std::string::npos)
            p.m_metricsPort = std::atoi(text.c_str() + at + 16);
    }
    ::close(out[0]);
    if (p.m_port <= 0 || p.m_metricsPort <= 0)
        return makeError("the coordinator did not start (its log: " + logFile.string() + ")");
    return p;
}

CoordinatorProcess::CoordinatorProcess(CoordinatorProcess&& other) noexcept
    : m_pid(other.m_pid), m_port(other.m_port), m_metricsPort(other.m_metricsPort) {
    other.m_pid = -1;
}

CoordinatorProcess::~CoordinatorProcess() {
    stop();
}

ProcessFigures CoordinatorProcess::figures() const {
    return processFigures(m_pid);
}

ProcessFigures processFigures(pid_t pid) {
    ProcessFigures f;
    const std::string dir = "/proc/" + std::to_string(pid);
    std::string status, stat;
    std::ifstream statusFile(dir + "/status");
    std::getline(statusFile, status, '\0');
    f.rssBytes = statusBytes(status, "VmRSS");
    f.peakRssBytes = statusBytes(status, "VmHWM");
    // /proc/PID/stat: utime and stime are fields 14 and 15, after the parenthesised name.
    std::ifstream statFile(dir + "/stat");
    std::getline(statFile, stat, '\0');
    const auto close = stat.rfind(')');
    if (close != std::string::npos) {
        std::istringstream fields(stat.substr(close + 2));
        std::string field;
        double ticks = 0;
        for (int i = 3; i <= 15 && fields >> field; ++i)
            if (i >= 14)
                ticks += std::atof(field.c_str());
        f.cpuSeconds = ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    return f;
}

std::string CoordinatorProcess::metrics() const {
    httplib::Client http("127.0.0.1", m_metricsPort);
    http.set_read_timeout(30, 0);
    auto res = http.Get("/metrics");
    return res && res->status == 200 ? res->body : std::string();
}

bool CoordinatorProcess::stop() {
    if (m_pid <= 0)
        return false;
    ::kill(m_pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 600; ++i) {
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_pid = -1;
            return WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(m_pid, SIGKILL);
    ::waitpid(m_pid, &status, 0);
    m_pid = -1;
    return false;
}

double metricValue(const std::string& text, const std::string& name) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line))
        if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
            line[name.size()] == ' ')
            return std::atof(line.c_str() + name.size() + 1);
    return std::nan("");
}

}  // namespace tandem::bench
