// The client registry: registration and bearer tokens.
#include "coordinator_impl.hpp"

namespace tandem::coord {

Outcome<net::RegisterResponse> Coordinator::registerClient(std::string_view body) {
    auto req = net::RegisterRequest::fromJson(body);
    if (!req)
        return refuse(400, "bad_request", req.error().message);
    Impl& c = *m_impl;
    const std::string token = net::toHex(net::randomBytes(32));
    const auto tokenHash = net::sha256(token);
    std::lock_guard lock(c.mu);
    auto ins = c.db.prepare(
        "INSERT INTO clients(name, public_key, hardware, token_sha256, created_unix, "
        "last_seen_unix) VALUES (?, ?, ?, ?, ?, ?)");
    if (!ins)
        return internalError(ins.error().message);
    ins->bind(1, req->name)
        .bind(2, std::span<const uint8_t>(req->publicKey))
        .bind(3, req->hardware)
        .bind(4, std::span<const uint8_t>(tokenHash))
        .bind(5, c.now())
        .bind(6, c.now());
    if (auto st = ins->run(); !st)
        return internalError(st.error().message);
    net::RegisterResponse resp{c.db.lastInsertId(), token, c.key.publicKey()};
    c.log("client " + std::to_string(resp.clientId) + " registered: \"" + req->name + "\" (" +
          req->hardware + ")");
    return resp;
}

Outcome<int64_t> Coordinator::authenticate(std::string_view authorization) {
    constexpr std::string_view kPrefix = "Bearer ";
    if (authorization.empty())
        return refuse(401, "unauthorized",
                      "no bearer token: send 'Authorization: Bearer <token>' with the token "
                      "from POST /v1/clients");
    if (!authorization.starts_with(kPrefix) || authorization.size() > 200)
        return refuse(401, "unauthorized", "the Authorization header must be 'Bearer <token>'");
    const auto hash = net::sha256(authorization.substr(kPrefix.size()));
    Impl& c = *m_impl;
    std::lock_guard lock(c.mu);
    auto q = c.db.prepare("SELECT id FROM clients WHERE token_sha256 = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, std::span<const uint8_t>(hash));
    if (!q->step())
        return refuse(401, "unauthorized",
                      "the bearer token is not known to this coordinator; register again with "
                      "POST /v1/clients");
    const int64_t id = q->integer(0);
    // last_seen is informational: written at most once a minute per client, not on every
    // request (each write is a synced transaction).
    int64_t& written = c.lastSeenWritten[id];
    if (c.now() - written >= 60) {
        written = c.now();
        auto upd = c.db.prepare("UPDATE clients SET last_seen_unix = ? WHERE id = ?");
        if (upd)
            (void)upd->bind(1, written).bind(2, id).run();
    }
    return id;
}

}  // namespace tandem::coord
