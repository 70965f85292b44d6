#include "nginx_process.hpp"

#include "file_io.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tandem::testing {

namespace fs = std::filesystem;

std::optional<fs::path> findNginx() {
    if (const char* path = std::getenv("PATH")) {
        std::string dirs = path;
        size_t start = 0;
        while (start <= dirs.size()) {
            const size_t end = dirs.find(':', start);
            const fs::path candidate =
                fs::path(dirs.substr(start, end == std::string::npos ? end : end - start)) /
                "nginx";
            if (::access(candidate.c_str(), X_OK) == 0)
                return candidate;
            if (end == std::string::npos)
                break;
            start = end + 1;
        }
    }
    if (::access("/usr/sbin/nginx", X_OK) == 0)
        return fs::path("/usr/sbin/nginx");
    return std::nullopt;
}

int freeLoopbackPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

Expected<std::string> fillPlaceholders(std::string text,
                                       const std::map<std::string, std::string>& values) {
    for (const auto& [name, value] : values) {
        const std::string key = "@" + name + "@";
        for (size_t at = text.find(key); at != std::string::npos;
             at = text.find(key, at + value.size()))
            text.replace(at, key.size(), value);
    }
    // A placeholder left outside comments: the configuration would not work.
    size_t lineStart = 0;
    while (lineStart < text.size()) {
        size_t lineEnd = text.find('\n', lineStart);
        if (lineEnd == std::string::npos)
            lineEnd = text.size();
        const std::string line = text.substr(lineStart, lineEnd - lineStart);
        const size_t first = line.find_first_not_of(" \t");
        const size_t at = line.find('@');
        if (first != std::string::npos && line[first] != '#' && at != std::string::npos &&
            line.find('@', at + 1) != std::string::npos)
            return makeError("a placeholder is left in: " + line);
        lineStart = lineEnd + 1;
    }
    return text;
}

NginxProcess::NginxProcess(fs::path nginx, fs::path prefix, std::string serverBlock, int port)
    : m_nginx(std::move(nginx)),
      m_prefix(std::move(prefix)),
      m_serverBlock(std::move(serverBlock)),
      m_port(port) {}

NginxProcess::~NginxProcess() {
    stop();
}

namespace {

int runAndWait(const std::vector<std::string>& args, const fs::path& output) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (out >= 0) {
            ::dup2(out, 1);
            ::dup2(out, 2);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool portAccepts(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

Status NginxProcess::start() {
    std::error_code ec;
    for (const char* sub :
         {"logs", "tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"})
        fs::create_directories(m_prefix / sub, ec);
    const std::string p = m_prefix.string();
    std::string conf;
    // As root nginx's workers would switch to nobody, who cannot read a test's private folders.
    if (::geteuid() == 0)
        conf += "user root;\n";
    conf += "worker_processes 1;\npid " + p + "/nginx.pid;\nerror_log " + p +
            "/logs/error.log info;\nevents { worker_connections 256; }\nhttp {\n"
            // Which process answered each request, and what it answered (a retry on another
            // upstream shows as two, comma-separated): what a test of a balancer reads.
            "    log_format tandem_test '$remote_addr \"$request\" status=$status "
            "upstream=\"$upstream_addr\" upstream_status=\"$upstream_status\"';\n"
            "    access_log " +
            p + "/logs/access.log tandem_test;\n    client_body_temp_path " + p +
            "/tmp/body;\n    proxy_temp_path " + p + "/tmp/proxy;\n    fastcgi_temp_path " + p +
            "/tmp/fastcgi;\n    uwsgi_temp_path " + p + "/tmp/uwsgi;\n    scgi_temp_path " + p +
            "/tmp/scgi;\n" + m_serverBlock + "\n}\n";
    const fs::path confFile = m_prefix / "nginx.conf";
    if (auto st = writeFileAtomically(
            confFile, std::span(reinterpret_cast<const uint8_t*>(conf.data()), conf.size()));
        !st)
        return st;
    const fs::path out = m_prefix / "logs" / "stdout.log";
    if (runAndWait({m_nginx.string(), "-t", "-q", "-p", p, "-c", confFile.string(), "-e",
                    p + "/logs/error.log"},
                   out) != 0)
        return makeError("nginx -t refused the configuration: " + errorLog());
    m_pid = ::fork();
    if (m_pid == 0) {
        const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (o >= 0) {
            ::dup2(o, 1);
            ::dup2(o, 2);
        }
        ::execl(m_nginx.c_str(), m_nginx.c_str(), "-p", p.c_str(), "-c", confFile.c_str(), "-e",
                (p + "/logs/error.log").c_str(), "-g", "daemon off;", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    if (m_pid < 0)
        return makeError("cannot fork nginx");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!portAccepts(m_port)) {
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_pid = -1;
            return makeError("nginx exited at start: " + errorLog());
        }
        if (std::chrono::steady_clock::now() > deadline)
            return makeError("nginx did not listen on port " + std::to_string(m_port) + ": " +
                             errorLog());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
}

void NginxProcess::stop() {
    if (m_pid <= 0)
        return;
    ::kill(m_pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(m_pid, &status, WNOHANG) != m_pid) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    m_pid = -1;
}

std::string NginxProcess::accessLog() const {
    auto bytes = readFile(m_prefix / "logs" / "access.log");
    return bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
}

std::string NginxProcess::errorLog() const {
    std::string text;
    for (const char* name : {"logs/error.log", "logs/stdout.log"}) {
        auto bytes = readFile(m_prefix / name);
        if (bytes)
            text.append(bytes->begin(), bytes->end());
    }
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

}  // namespace tandem::testing
