#include "metrics_server.hpp"

#include "http_io.hpp"
#include "safe_text.hpp"

#include <httplib.h>

#include <chrono>
#include <thread>

namespace tandem::coord {

struct MetricsServer::Impl {
    httplib::Server http;
    std::thread thread;
    int port = 0;
};

Expected<std::unique_ptr<MetricsServer>> MetricsServer::start(Coordinator& coordinator,
                                                              const std::string& host, int port,
                                                              Logger log) {
    auto impl = std::make_unique<Impl>();
    httplib::Server& s = impl->http;
    // A scrape every few seconds needs little: two threads, short timeouts, no bodies.
    s.new_task_queue = [] { return new httplib::ThreadPool(2); };
    s.set_read_timeout(10, 0);
    s.set_write_timeout(10, 0);
    s.set_payload_max_length(4096);
    bindExclusively(s);
    s.Get("/metrics", [&coordinator](const httplib::Request&, httplib::Response& res) {
        res.set_content(coordinator.metricsText(), "text/plain; version=0.0.4; charset=utf-8");
    });
    s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
        if (res.body.empty())
            res.set_content("this address serves only GET /metrics\n", "text/plain");
    });
    s.set_exception_handler(
        [log](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                if (log)
                    log("error: exception in /metrics: " + net::loggable(e.what()));
            } catch (...) {
            }
            res.status = 500;
            res.set_content("the coordinator failed to collect its metrics\n", "text/plain");
        });
    impl->port = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
    if (impl->port <= 0)
        return makeError("cannot listen for metrics on " + host + ":" + std::to_string(port) +
                         " (in use, or not an address of this machine?)");
    listenInBackground(impl->http, impl->thread);
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

MetricsServer::~MetricsServer() {
    m_impl->http.stop();
    if (m_impl->thread.joinable())
        m_impl->thread.join();
}

int MetricsServer::port() const {
    return m_impl->port;
}

}  // namespace tandem::coord
