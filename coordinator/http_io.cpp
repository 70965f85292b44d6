// What the coordinator's routes share: JSON answers and refusals, strict body lengths, draining
// refused bodies, and files served with ranges and ETags.
#include "http_io.hpp"

#include "safe_text.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace tandem::coord {

void sendJson(httplib::Response& res, int status, const std::string& body) {
    res.status = status;
    res.set_content(body, "application/json");
}

void sendRefusal(httplib::Response& res, const Refusal& r, bool closeConnection) {
    sendJson(res, r.httpStatus, net::ApiError{r.code, r.message}.toJson());
    if (r.retryAfterSeconds > 0)
        res.set_header("Retry-After", std::to_string(r.retryAfterSeconds));
    if (r.httpStatus == 401)
        res.set_header("WWW-Authenticate", "Bearer");
    // The body was not read: the connection cannot carry another request.
    if (closeConnection)
        res.set_header("Connection", "close");
}

std::optional<int64_t> pathNumber(const httplib::Request& req, size_t index) {
    if (req.matches.size() <= index)
        return std::nullopt;
    try {
        return std::stoll(req.matches[static_cast<int>(index)].str());
    } catch (...) {
        return std::nullopt;
    }
}

BodyLength bodyLength(const httplib::Request& req) {
    const size_t count = req.get_header_value_count("Content-Length");
    if (count == 0)
        return {};
    const std::string v = req.get_header_value("Content-Length");
    if (count > 1 || v.empty() || v.size() > 18 ||
        v.find_first_not_of("0123456789") != std::string::npos)
        return {false, -1};
    return {true, std::stoll(v)};
}

Refusal badLength(const httplib::Request& req) {
    return {400, "bad_request",
            "Content-Length must be one decimal number of bytes, found '" +
                net::quotable(req.get_header_value("Content-Length")) + "'" +
                (req.get_header_value_count("Content-Length") > 1 ? " and more" : "")};
}

bool drainBody(const httplib::ContentReader& reader) {
    int64_t total = 0;
    return reader([&](const char*, size_t n) {
        total += static_cast<int64_t>(n);
        return total <= kDrainLimit;
    });
}

namespace {

const char* reasonCode(int status) {
    switch (status) {
        case 400:
            return "bad_request";
        case 401:
            return "unauthorized";
        case 403:
            return "forbidden";
        case 404:
            return "not_found";
        case 405:
            return "method_not_allowed";
        case 408:
            return "timeout";
        case 411:
            return "length_required";
        case 413:
            return "too_large";
        case 414:
            return "uri_too_long";
        case 416:
            return "range_not_satisfiable";
        case 431:
            return "headers_too_large";
        default:
            return status >= 500 ? "internal" : "error";
    }
}

// A single "bytes=" range resolved against size: [first, last], or 416, or "ignore the header"
// (absent, malformed or several ranges: RFC 9110 lets a server answer 200 with everything).
struct RangeResult {
    bool use = false;
    bool unsatisfiable = false;
    int64_t first = 0, last = 0;
};

RangeResult parseRange(const std::string& header, int64_t size) {
    RangeResult r;
    if (header.rfind("bytes=", 0) != 0)
        return r;
    std::string spec = header.substr(6);
    if (spec.find(',') != std::string::npos)
        return r;
    const size_t dash = spec.find('-');
    if (dash == std::string::npos)
        return r;
    auto num = [](const std::string& s, int64_t& out) {
        if (s.empty() || s.size() > 18)
            return false;
        for (char ch : s)
            if (ch < '0' || ch > '9')
                return false;
        out = std::stoll(s);
        return true;
    };
    const std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
    int64_t x = 0, y = 0;
    if (a.empty()) {  // suffix: the last y bytes
        if (!num(b, y))
            return r;
        r.use = true;
        if (y == 0 || size == 0) {
            r.unsatisfiable = true;
            return r;
        }
        r.first = std::max<int64_t>(0, size - y);
        r.last = size - 1;
        return r;
    }
    if (!num(a, x))
        return r;
    if (b.empty()) {
        y = size - 1;
    } else if (!num(b, y) || y < x) {
        return r;
    }
    r.use = true;
    if (x >= size) {
        r.unsatisfiable = true;
        return r;
    }
    r.first = x;
    r.last = std::min(y, size - 1);
    return r;
}

}  // namespace

void ignoreRequestRanges(const httplib::Request& req) {
    const_cast<httplib::Request&>(req).ranges.clear();
}

// Serves a file (or a range of it) from an open descriptor, streaming in 1 MiB pieces.
void serveFile(const httplib::Request& req, httplib::Response& res, const ServedFile& file,
               std::function<void(size_t)> sent) {
    const std::string etag = "\"" + net::toHex(file.sha256) + "\"";
    res.set_header("ETag", etag);
    res.set_header("Accept-Ranges", "bytes");
    if (req.get_header_value("If-None-Match") == etag) {
        res.status = 304;
        return;
    }
    RangeResult range = parseRange(req.get_header_value("Range"), file.bytes);
    // httplib would apply the Range again on top of ours: it is handled here.
    ignoreRequestRanges(req);
    if (range.use && !req.get_header_value("If-Range").empty() &&
        req.get_header_value("If-Range") != etag)
        range.use = false;
    if (range.use && range.unsatisfiable) {
        sendJson(
            res, 416,
            net::ApiError{"range_not_satisfiable",
                          "the range '" + net::quotable(req.get_header_value("Range")) +
                              "' lies outside the " + std::to_string(file.bytes) + "-byte file"}
                .toJson());
        res.set_header("Content-Range", "bytes */" + std::to_string(file.bytes));
        return;
    }
    int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        // Removed since it was looked up (a version that is no longer kept): gone, as if the
        // request had come a moment later, not a server fault.
        sendJson(res, 404,
                 net::ApiError{"no_longer_kept",
                               file.path.filename().string() +
                                   " was removed (no kept version needs it any more); ask for "
                                   "new work for a current manifest"}
                     .toJson());
        return;
    }
    if (fd < 0) {
        sendJson(res, 500,
                 net::ApiError{"internal", "cannot open " + file.path.filename().string() + ": " +
                                               std::strerror(errno)}
                     .toJson());
        return;
    }
    auto holder = std::shared_ptr<int>(new int(fd), [](int* p) {
        ::close(*p);
        delete p;
    });
    int64_t start = 0, length = file.bytes;
    if (range.use) {
        start = range.first;
        length = range.last - range.first + 1;
        res.status = 206;
        res.set_header("Content-Range", "bytes " + std::to_string(range.first) + "-" +
                                            std::to_string(range.last) + "/" +
                                            std::to_string(file.bytes));
    } else {
        res.status = 200;
    }
    res.set_content_provider(static_cast<size_t>(length), "application/octet-stream",
                             [holder, start, sent = std::move(sent)](size_t offset, size_t len,
                                                                     httplib::DataSink& sink) {
                                 std::vector<char> buf(std::min<size_t>(len, 1 << 20));
                                 ssize_t n = ::pread(
                                     *holder, buf.data(), buf.size(),
                                     static_cast<off_t>(start + static_cast<int64_t>(offset)));
                                 if (n <= 0 || !sink.write(buf.data(), static_cast<size_t>(n)))
                                     return false;
                                 if (sent)
                                     sent(static_cast<size_t>(n));
                                 return true;
                             });
}

void bindExclusively(httplib::Server& server) {
    server.set_socket_options([](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
}

void listenInBackground(httplib::Server& server, std::thread& thread) {
    auto ended = std::make_shared<std::atomic<bool>>(false);
    thread = std::thread([&server, ended] {
        server.listen_after_bind();
        *ended = true;
    });
    while (!server.is_running() && !*ended)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The JSON body of an answer that cpp-httplib made itself (no route, a refused request line).
void errorBody(const httplib::Request& req, httplib::Response& res) {
    ignoreRequestRanges(req);
    if (!res.body.empty() || res.status == 304)
        return;
    std::string message = res.status == 404
                              ? "no endpoint " + net::quotable(req.method, 20) + " " +
                                    net::quotable(req.path) + " (see docs/protocol.md)"
                              : "the request was refused by the HTTP layer";
    sendJson(res, res.status, net::ApiError{reasonCode(res.status), message}.toJson());
}

}  // namespace tandem::coord
