// What the HTTPS API tests of the coordinator share: a small run's configuration, requests for
// work, uploads of hand-built results and reading error bodies.
#pragma once

#include "harness.hpp"

#include "codec.hpp"

#include <string>
#include <vector>

namespace tandem::testing {

inline coord::CoordinatorConfig smallConfig() {
    coord::CoordinatorConfig c;
    c.model = "L=1,NH=2,C=16,T=16";
    c.innerSteps = 4;
    c.batch = 2;
    c.quorum = 3;
    c.maxStaleness = 1;
    c.backgroundThreads = false;
    c.threads = 1;
    c.refuseRepeatedPayloads = false;  // the tests upload one payload many times
    c.newClientWorkUnits = 1000;       // and give new clients several units
    return c;
}

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

inline std::string errorCode(const httplib::Result& res) {
    if (!res)
        return "no response";
    auto e = net::ApiError::fromJson(res->body);
    return e ? e->code : "not an error body: " + res->body.substr(0, 200);
}

inline std::vector<uint16_t> smallDelta(int64_t P, float scale = 1.0f) {
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i)
        d[static_cast<size_t>(i)] = floatToHalf(scale * 0.001f * float(i % 7 - 3));
    return d;
}

// A unit for c (with requestId as its Idempotency-Key header when given); an empty manifest
// when none was given.
inline net::Manifest requestWork(ApiClient& c, const std::string& requestId = {}) {
    const net::WorkRequest w{"cpu", 1 << 30, 0, 1 << 30};
    httplib::Headers h = c.auth();
    if (!requestId.empty())
        h.emplace(net::kRequestIdHeader, requestId);
    auto res = c.http->Post("/v1/work", h, w.toJson(), "application/json");
    if (!res || res->status != 200)
        return {};
    return net::Manifest::fromJson(res->body).value();
}

inline httplib::Result upload(ApiClient& c, int64_t wu, const BuiltResult& r,
                              const std::string& signature = "\x01") {
    httplib::Headers h = c.auth();
    h.emplace("X-Tandem-Signature", signature == "\x01" ? r.signature : signature);
    return c.http->Put(("/v1/results/" + std::to_string(wu)).c_str(), h,
                       reinterpret_cast<const char*>(r.body.data()), r.body.size(),
                       "application/octet-stream");
}

}  // namespace tandem::testing
