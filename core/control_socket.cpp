#include "control_socket.hpp"

#include "crypto.hpp"
#include "engine.hpp"  // writePrivateFileAtomically
#include "file_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

Expected<sockaddr_un> socketAddress(const fs::path& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string p = path.string();
    if (p.size() >= sizeof(addr.sun_path))
        return makeError("the control socket path " + p + " is " + std::to_string(p.size()) +
                         " characters long; Unix sockets allow at most " +
                         std::to_string(sizeof(addr.sun_path) - 1) +
                         " (choose a shorter data directory)");
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    return addr;
}

bool writeAll(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// Reads until newline or EOF (at most maxBytes), waiting at most timeoutMs for each piece.
std::string readLine(int fd, size_t maxBytes, int timeoutMs, bool untilEof) {
    std::string out;
    char buf[1024];
    while (out.size() < maxBytes) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, timeoutMs) <= 0)
            break;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        out.append(buf, static_cast<size_t>(n));
        if (!untilEof && out.find('\n') != std::string::npos)
            break;
    }
    return out;
}

bool equalConstantTime(const std::string& a, const std::string& b) {
    if (a.size() != b.size())
        return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i)
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

}  // namespace

Expected<std::unique_ptr<ControlServer>> ControlServer::start(const fs::path& dataDir,
                                                              Handler handler) {
    std::unique_ptr<ControlServer> s(new ControlServer());
    s->m_socketPath = dataDir / kControlSocketName;
    s->m_secretPath = dataDir / kControlSecretName;
    s->m_handler = std::move(handler);
    auto addr = socketAddress(s->m_socketPath);
    if (!addr)
        return addr.error();
    // Someone serving already?
    {
        int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0) {
            const bool alive =
                ::connect(probe, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0;
            ::close(probe);
            if (alive)
                return makeError("another tandem-worker is running with the data directory " +
                                 dataDir.string() + " (its control socket answers)");
        }
    }
    ::unlink(s->m_socketPath.c_str());
    s->m_secret = net::toHex(net::randomBytes(32));
    if (auto st = writePrivateFileAtomically(s->m_secretPath, s->m_secret); !st)
        return st.error();
    s->m_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->m_fd < 0)
        return makeError(std::string("cannot create the control socket: ") + std::strerror(errno));
    const mode_t old = ::umask(0177);
    const int bound = ::bind(s->m_fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
    ::umask(old);
    if (bound != 0 || ::listen(s->m_fd, 8) != 0)
        return makeError("cannot listen on " + s->m_socketPath.string() + ": " +
                         std::strerror(errno));
    ::chmod(s->m_socketPath.c_str(), 0600);
    s->m_thread = std::thread([p = s.get()] { p->serve(); });
    return s;
}

ControlServer::~ControlServer() {
    m_stop = true;
    if (m_thread.joinable())
        m_thread.join();
    if (m_fd >= 0)
        ::close(m_fd);
    ::unlink(m_socketPath.c_str());
    ::unlink(m_secretPath.c_str());
}

void ControlServer::serve() {
    while (!m_stop) {
        pollfd p{m_fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0)
            continue;
        int c = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        std::string line = readLine(c, 4096, 2000, false);
        if (const auto nl = line.find('\n'); nl != std::string::npos)
            line.resize(nl);
        const auto space = line.find(' ');
        std::string answer;
        if (space == std::string::npos || !equalConstantTime(line.substr(0, space), m_secret))
            answer = "error: the control secret does not match\n";
        else
            answer = m_handler(line.substr(space + 1));
        writeAll(c, answer);
        ::close(c);
    }
}

Expected<std::string> sendControlCommand(const fs::path& dataDir, const std::string& command) {
    const fs::path socketPath = dataDir / kControlSocketName;
    auto addr = socketAddress(socketPath);
    if (!addr)
        return addr.error();
    auto secret = readFile(dataDir / kControlSecretName);
    if (!secret)
        return makeError("no tandem-worker is running with the data directory " + dataDir.string() +
                         " (" + secret.error().message + ")");
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return makeError(std::string("cannot create a socket: ") + std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return makeError("no tandem-worker is running with the data directory " + dataDir.string() +
                         " (connecting to " + socketPath.string() + ": " + why + ")");
    }
    const std::string line = std::string(secret->begin(), secret->end()) + " " + command + "\n";
    if (!writeAll(fd, line)) {
        ::close(fd);
        return makeError("the worker closed the control connection");
    }
    std::string answer = readLine(fd, 1 << 20, 10000, true);
    ::close(fd);
    if (answer.rfind("error: ", 0) == 0) {
        while (!answer.empty() && answer.back() == '\n')
            answer.pop_back();
        return makeError(answer.substr(7));
    }
    return answer;
}

}  // namespace tandem::core
