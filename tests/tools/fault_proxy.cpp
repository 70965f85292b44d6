#include "fault_proxy.hpp"

#include "random.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tandem::testing {

namespace {

bool writeAll(int fd, const char* data, size_t size) {
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

}  // namespace

struct FaultProxy::Impl {
    std::string targetHost;
    int targetPort = 0;
    uint64_t seed = 1;
    int listenFd = -1;
    std::atomic<bool> stopping{false};
    std::thread acceptor;
    mutable std::mutex mutex;
    std::vector<std::thread> workers;
    std::vector<FaultPlan> plans;
    int plansBase = 0;
    bool haveRandom = false;
    RandomFaults random;
    FaultProxyStats stats;
    ProxyProtocol protocol = ProxyProtocol::None;

    // Reads exactly n bytes (blocking, with the socket's timeout).
    static bool readExact(int fd, uint8_t* out, size_t n) {
        while (n > 0) {
            const ssize_t got = ::recv(fd, out, n, 0);
            if (got <= 0)
                return false;
            out += got;
            n -= static_cast<size_t>(got);
        }
        return true;
    }

    // The forward-proxy handshake; returns the destination the client asked for, or "" when it
    // failed.
    std::string handshake(int client) {
        if (protocol == ProxyProtocol::HttpConnect) {
            std::string head;
            char c = 0;
            while (head.size() < 8192 && head.find("\r\n\r\n") == std::string::npos) {
                if (::recv(client, &c, 1, 0) != 1)
                    return {};
                head += c;
            }
            if (head.rfind("CONNECT ", 0) != 0)
                return {};
            const std::string dest = head.substr(8, head.find(' ', 8) - 8);
            const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
            return writeAll(client, ok.data(), ok.size()) ? dest : std::string();
        }
        // SOCKS5 (RFC 1928), no authentication.
        uint8_t hello[2];
        if (!readExact(client, hello, 2) || hello[0] != 5)
            return {};
        std::vector<uint8_t> methods(hello[1]);
        if (!readExact(client, methods.data(), methods.size()))
            return {};
        const char noAuth[2] = {5, 0};
        if (!writeAll(client, noAuth, 2))
            return {};
        uint8_t req[4];
        if (!readExact(client, req, 4) || req[0] != 5 || req[1] != 1)
            return {};
        std::string host;
        if (req[3] == 1) {
            uint8_t a[4];
            if (!readExact(client, a, 4))
                return {};
            host = std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) +
                   "." + std::to_string(a[3]);
        } else if (req[3] == 3) {
            uint8_t len = 0;
            if (!readExact(client, &len, 1))
                return {};
            host.resize(len);
            if (!readExact(client, reinterpret_cast<uint8_t*>(host.data()), len))
                return {};
        } else {
            return {};
        }
        uint8_t port[2];
        if (!readExact(client, port, 2))
            return {};
        const char granted[10] = {5, 0, 0, 1, 0, 0, 0, 0, 0, 0};
        if (!writeAll(client, granted, sizeof granted))
            return {};
        return host + ":" + std::to_string(port[0] * 256 + port[1]);
    }

    FaultPlan planFor(int index) {
        std::lock_guard lock(mutex);
        return planLocked(index);
    }
    FaultPlan planLocked(int index) const {
        if (index >= plansBase && index - plansBase < static_cast<int>(plans.size()))
            return plans[static_cast<size_t>(index - plansBase)];
        FaultPlan p;
        if (!haveRandom || index >= random.maxFaultyConnections)
            return p;
        Rng rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) + 1);
        const auto span =
            static_cast<uint64_t>(std::max<int64_t>(1, random.maxByte - random.minByte));
        if (rng.uniform() < random.cutProbability) {
            const int64_t at = random.minByte + static_cast<int64_t>(rng.below(span));
            (rng.below(2) ? p.cutUpAtByte : p.cutDownAtByte) = at;
        }
        if (rng.uniform() < random.stallProbability) {
            const int64_t at = random.minByte + static_cast<int64_t>(rng.below(span));
            (rng.below(2) ? p.stallUpAtByte : p.stallDownAtByte) = at;
            p.stallFor = random.stallFor;
        }
        if (rng.uniform() < random.slowProbability)
            p.bytesPerSecond = random.slowBytesPerSecond;
        return p;
    }

    // Sleeps up to `d` in slices, returning early when stopping.
    void nap(std::chrono::milliseconds d) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!stopping && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(
                std::min(std::chrono::milliseconds(20),
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             until - std::chrono::steady_clock::now()) +
                             std::chrono::milliseconds(1)));
    }

    // A stall ends early when the client hangs up (it gave up on the stalled connection).
    void napUnlessHungUp(std::chrono::milliseconds d, int client) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!stopping && std::chrono::steady_clock::now() < until) {
            pollfd p{client, POLLRDHUP, 0};
            if (::poll(&p, 1, 20) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                return;
        }
    }

    void serve(int client, FaultPlan plan) {
        if (protocol != ProxyProtocol::None) {
            timeval tv{10, 0};
            ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            const std::string dest = handshake(client);
            if (dest.empty()) {
                ::close(client);
                return;
            }
            std::lock_guard lock(mutex);
            ++stats.tunnels;
            stats.lastTunnelDestination = dest;
        }
        const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(targetPort));
        ::inet_pton(AF_INET, targetHost.c_str(), &addr.sin_addr);
        if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            if (server >= 0)
                ::close(server);
            ::close(client);
            return;
        }
        const int one = 1;
        ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        // Direction 0: up (client -> server), 1: down.
        int from[2] = {client, server}, to[2] = {server, client};
        bool open[2] = {true, true};
        int64_t moved[2] = {0, 0};
        const int64_t cutAt[2] = {plan.cutUpAtByte, plan.cutDownAtByte};
        const int64_t stallAt[2] = {plan.stallUpAtByte, plan.stallDownAtByte};
        bool stalled[2] = {false, false};
        bool cut = false;
        std::vector<char> buf(16384);
        while (!stopping && (open[0] || open[1]) && !cut) {
            pollfd fds[2];
            int nfds = 0, dirOf[2];
            for (int d = 0; d < 2; ++d)
                if (open[d]) {
                    fds[nfds] = {from[d], POLLIN, 0};
                    dirOf[nfds++] = d;
                }
            const int ready = ::poll(fds, static_cast<nfds_t>(nfds), 50);
            if (ready < 0 && errno != EINTR)
                break;
            for (int i = 0; i < nfds && !cut; ++i) {
                if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                const int d = dirOf[i];
                size_t want = buf.size();
                if (cutAt[d] >= 0)
                    want = static_cast<size_t>(std::min<int64_t>(
                        static_cast<int64_t>(want), std::max<int64_t>(1, cutAt[d] - moved[d])));
                if (stallAt[d] >= 0 && !stalled[d] && stallAt[d] > moved[d])
                    want = std::min<size_t>(want, static_cast<size_t>(stallAt[d] - moved[d]));
                if (plan.bytesPerSecond > 0)
                    want = std::min<size_t>(
                        want, static_cast<size_t>(std::max<int64_t>(1, plan.bytesPerSecond / 20)));
                if (stallAt[d] >= 0 && !stalled[d] && moved[d] >= stallAt[d]) {
                    stalled[d] = true;
                    {
                        std::lock_guard lock(mutex);
                        ++stats.stalls;
                    }
                    napUnlessHungUp(plan.stallFor, client);
                }
                const ssize_t n = ::recv(from[d], buf.data(), want, 0);
                if (n <= 0) {
                    // Half close: pass the end of stream on.
                    open[d] = false;
                    ::shutdown(to[d], SHUT_WR);
                    continue;
                }
                if (!writeAll(to[d], buf.data(), static_cast<size_t>(n))) {
                    open[0] = open[1] = false;
                    break;
                }
                moved[d] += n;
                {
                    std::lock_guard lock(mutex);
                    (d == 0 ? stats.bytesUp : stats.bytesDown) += n;
                }
                if (plan.bytesPerSecond > 0)
                    nap(std::chrono::milliseconds(1000 * n / plan.bytesPerSecond));
                if (cutAt[d] >= 0 && moved[d] >= cutAt[d]) {
                    cut = true;
                    std::lock_guard lock(mutex);
                    ++stats.cuts;
                }
            }
        }
        if (cut) {
            // An abortive close (RST), like a dropped network path.
            linger lg{1, 0};
            ::setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            ::setsockopt(server, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        ::close(client);
        ::close(server);
    }

    void acceptLoop() {
        while (!stopping) {
            pollfd p{listenFd, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0)
                continue;
            const int c = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            std::lock_guard lock(mutex);
            const FaultPlan plan = planLocked(stats.connections);
            ++stats.connections;
            workers.emplace_back([this, c, plan] { serve(c, plan); });
        }
    }
};

FaultProxy::FaultProxy(std::string targetHost, int targetPort, uint64_t seed)
    : m_impl(std::make_unique<Impl>()) {
    m_impl->targetHost = std::move(targetHost);
    m_impl->targetPort = targetPort;
    m_impl->seed = seed;
}

FaultProxy::~FaultProxy() {
    stop();
}

Status FaultProxy::start() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return Error{std::string("fault proxy: socket: ") + std::strerror(errno)};
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        ::close(fd);
        return Error{std::string("fault proxy: cannot listen on 127.0.0.1: ") + std::strerror(err)};
    }
    m_impl->listenFd = fd;
    m_port = ntohs(addr.sin_port);
    m_impl->acceptor = std::thread([this] { m_impl->acceptLoop(); });
    return {};
}

void FaultProxy::stop() {
    if (!m_impl || m_impl->listenFd < 0)
        return;
    m_impl->stopping = true;
    if (m_impl->acceptor.joinable())
        m_impl->acceptor.join();
    std::vector<std::thread> workers;
    {
        std::lock_guard lock(m_impl->mutex);
        workers.swap(m_impl->workers);
    }
    for (auto& t : workers)
        t.join();
    ::close(m_impl->listenFd);
    m_impl->listenFd = -1;
}

void FaultProxy::setProtocol(ProxyProtocol protocol) {
    m_impl->protocol = protocol;
}

void FaultProxy::setPlans(std::vector<FaultPlan> plans) {
    std::lock_guard lock(m_impl->mutex);
    m_impl->plans = std::move(plans);
    m_impl->plansBase = m_impl->stats.connections;
}

void FaultProxy::setRandomFaults(RandomFaults faults) {
    std::lock_guard lock(m_impl->mutex);
    m_impl->random = faults;
    m_impl->haveRandom = true;
}

FaultPlan FaultProxy::planFor(int connectionIndex) {
    return m_impl->planFor(connectionIndex);
}

FaultProxyStats FaultProxy::stats() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->stats;
}

}  // namespace tandem::testing
