// One HTTP request, as bytes on the wire, through cpp-httplib's request parser (request line,
// path decoding, query, headers) into handlers built from the coordinator's http_io.hpp the way
// server.cpp uses them: strict Content-Length, refusals that quote request text, drained bodies,
// files served with Range/If-Range, and the not-found body. The error handler has no try/catch
// here, so an exception that would end the coordinator (issue 19) is a crash. Checks: every
// answer is a status line, and every JSON body parses.
#include "fuzz_common.hpp"
#include "http_io.hpp"
#include "safe_text.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

namespace {

namespace coord = tandem::coord;

// The request bytes as a connection; what the server writes is kept.
class FuzzedStream : public httplib::Stream {
  public:
    explicit FuzzedStream(std::string_view request) : m_request(request) {}
    bool is_readable() const override { return true; }
    bool is_writable() const override { return true; }
    ssize_t read(char* ptr, size_t size) override {
        size = std::min(size, m_request.size() - m_pos);
        std::memcpy(ptr, m_request.data() + m_pos, size);
        m_pos += size;
        return static_cast<ssize_t>(size);
    }
    ssize_t write(const char* ptr, size_t size) override {
        m_written.append(ptr, size);
        return static_cast<ssize_t>(size);
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        ip = "127.0.0.1";
        port = 40000;
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        ip = "127.0.0.1";
        port = 8443;
    }
    socket_t socket() const override { return 0; }
    const std::string& written() const { return m_written; }

  private:
    std::string_view m_request;
    size_t m_pos = 0;
    std::string m_written;
};

class FuzzServer : public httplib::Server {
  public:
    FuzzServer() {
        set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
            coord::ignoreRequestRanges(req);
            if (!coord::bodyLength(req).valid) {
                coord::sendRefusal(res, coord::badLength(req), true);
                return HandlerResponse::Handled;
            }
            return HandlerResponse::Unhandled;
        });
        set_error_handler([](const httplib::Request& req, httplib::Response& res) {
            coord::errorBody(req, res);
        });
        set_exception_handler(
            [this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
                m_threw = true;
                res.status = 500;
            });
        set_logger([](const httplib::Request& req, const httplib::Response& res) {
            const std::string line = tandem::net::loggable(req.method + " " + req.path + " -> " +
                                                           std::to_string(res.status));
            FUZZ_CHECK(tandem::fuzz::isUtf8(line));
            FUZZ_CHECK(line.find('\n') == std::string::npos);
        });
        Get(R"(/v1/files/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
            auto n = coord::pathNumber(req, 1);
            if (!n)
                return coord::sendRefusal(res, {404, "not_found", "no such file"});
            coord::serveFile(req, res, m_file);
        });
        Get("/v1/speedtest", [](const httplib::Request& req, httplib::Response& res) {
            const std::string v = req.get_param_value("bytes");
            if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
                return coord::sendRefusal(res, {400, "bad_request",
                                                "bytes must be a non-negative integer, found '" +
                                                    tandem::net::quotable(v) + "'"});
            coord::sendJson(res, 200, "{}");
        });
        Put(R"(/v1/results/(\d+))", [](const httplib::Request& req, httplib::Response& res,
                                       const httplib::ContentReader& reader) {
            coord::sendRefusal(res,
                               {403, "forbidden",
                                "no upload for '" + tandem::net::quotable(req.path) + "' from " +
                                    tandem::net::quotable(req.get_header_value("Authorization"))},
                               !coord::drainBody(reader));
        });
        m_file.bytes = 1000;
        m_file.path = tandem::fuzz::scratchFile(std::vector<uint8_t>(1000, 'w'));
    }

    std::string handle(std::string_view request) {
        m_threw = false;
        FuzzedStream stream(request);
        bool closed = false;
        process_request(stream, true, closed, nullptr);
        FUZZ_CHECK(!m_threw);  // the handlers above turn every bad input into a refusal
        return stream.written();
    }

  private:
    coord::ServedFile m_file;
    bool m_threw = false;
};

void checkAnswer(const std::string& out) {
    if (out.empty())
        return;
    FUZZ_CHECK(out.rfind("HTTP/1.1 ", 0) == 0);
    const size_t end = out.find("\r\n\r\n");
    FUZZ_CHECK(end != std::string::npos);
    const std::string head = out.substr(0, end);
    if (head.find("Content-Type: application/json") == std::string::npos)
        return;
    // A 100 Continue line may come first; the JSON is the last answer's body.
    const std::string body = out.substr(end + 4);
    if (body.rfind("HTTP/1.1 ", 0) == 0)
        return checkAnswer(body);
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded())
        std::fprintf(stderr, "answer with a body that is not JSON:\n%s\n", out.c_str());
    FUZZ_CHECK(!j.is_discarded());
    if (out.compare(9, 1, "4") == 0 || out.compare(9, 1, "5") == 0)
        FUZZ_CHECK(j.contains("error") && j["error"].contains("message"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzServer server;
    const std::string_view request(reinterpret_cast<const char*>(data), size);
    const std::string out = server.handle(request);
    // A HEAD answer names the body it leaves out: only its status line is checked. That holds
    // for a malformed HEAD request line too ("HEAD\r\n": a 400 whose body is left out).
    const std::string_view method = request.substr(0, request.find_first_of(" \r\n"));
    if (method == "HEAD")
        FUZZ_CHECK(out.empty() || out.rfind("HTTP/1.1 ", 0) == 0);
    else
        checkAnswer(out);
    return 0;
}
