// What the coordinator's routes share: JSON answers and refusals, strict body lengths, draining
// refused bodies, and files served with ranges and ETags. cpp-httplib types, no coordinator state.
#pragma once

#include "coordinator.hpp"

#include <httplib.h>

#include <cstdint>
#include <optional>
#include <string>
#include <thread>

namespace tandem::coord {

// The most of an unwanted body that is read and dropped before answering.
constexpr int64_t kDrainLimit = 4 << 20;

void sendJson(httplib::Response& res, int status, const std::string& body);

// The refusal as an {"error": ...} body with its status (and Retry-After, WWW-Authenticate);
// closeConnection when the body was not read, so the connection cannot carry another request.
void sendRefusal(httplib::Response& res, const Refusal& r, bool closeConnection = false);

// The number captured by the route's pattern at `index`, if it fits an int64.
std::optional<int64_t> pathNumber(const httplib::Request& req, size_t index);

// RFC 9112 §6.3: one Content-Length of decimal digits, or the request is refused (a lenient
// reading of "+5", "5.0" or "5 abc" disagrees with a proxy about where the body ends).
struct BodyLength {
    bool valid = true;
    int64_t bytes = -1;  // -1: no Content-Length
};
BodyLength bodyLength(const httplib::Request& req);
Refusal badLength(const httplib::Request& req);

// Reads and drops up to kDrainLimit bytes of a body that will not be used, so that the answer
// is not lost: closing a socket with unread data makes the kernel send a reset, which can destroy
// the answer before the client reads it. Returns whether the whole body was read (then the
// connection can carry the next request).
bool drainBody(const httplib::ContentReader& reader);

// cpp-httplib cuts whatever body is answered to the request's Range (a refusal's JSON, the 404
// body: found by fuzz_http_request); only serveFile honours Range, reading the header itself.
// Called before routing and in errorBody.
void ignoreRequestRanges(const httplib::Request& req);

// Serves a file (or one range of it) from disk, streaming in 1 MiB pieces; ETag = SHA-256.
// sent, when given, learns the size of every piece written to the client.
void serveFile(const httplib::Request& req, httplib::Response& res, const ServedFile& file,
               std::function<void(size_t)> sent = {});

// cpp-httplib binds with SO_REUSEPORT, so a second server on a port in use would share it
// silently (the kernel spreading connections over both). This keeps SO_REUSEADDR only: a
// restarted server binds at once, a second one gets "address in use".
void bindExclusively(httplib::Server& server);

// Runs a bound server's loop on `thread` and returns once it runs (or ended): a stop() before
// the loop starts would be lost, and joining the thread would then wait forever.
void listenInBackground(httplib::Server& server, std::thread& thread);

// The JSON body of an answer that cpp-httplib made itself (no route, a refused request line).
void errorBody(const httplib::Request& req, httplib::Response& res);

}  // namespace tandem::coord
