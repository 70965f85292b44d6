#include "client_registry.hpp"

#include "messages.hpp"

#include <string>

namespace tandem::coord {

ClientRegistry::ClientRegistry(Database& db, std::function<int64_t()> clock, Logger log)
    : m_db(db), m_clock(std::move(clock)), m_log(std::move(log)) {}

Outcome<net::RegisterResponse> ClientRegistry::add(const net::RegisterRequest& request,
                                                   const net::PublicKey& coordinatorKey) {
    const std::string token = net::toHex(net::randomBytes(32));
    const auto tokenHash = net::sha256(token);
    auto ins = m_db.prepare(
        "INSERT INTO clients(name, public_key, hardware, token_sha256, created_unix, "
        "last_seen_unix) VALUES (?, ?, ?, ?, ?, ?)");
    if (!ins)
        return internalError(ins.error().message);
    ins->bind(1, request.name)
        .bind(2, std::span<const uint8_t>(request.publicKey))
        .bind(3, request.hardware)
        .bind(4, std::span<const uint8_t>(tokenHash))
        .bind(5, m_clock())
        .bind(6, m_clock());
    if (auto st = ins->run(); !st)
        return internalError(st.error().message);
    net::RegisterResponse resp{m_db.lastInsertId(), token, coordinatorKey};
    m_log("client " + std::to_string(resp.clientId) + " registered: \"" + request.name + "\" (" +
          request.hardware + ")");
    return resp;
}

Outcome<int64_t> ClientRegistry::authenticate(std::string_view authorization) {
    constexpr std::string_view kPrefix = "Bearer ";
    if (authorization.empty())
        return refuse(401, "unauthorized",
                      "no bearer token: send 'Authorization: Bearer <token>' with the token "
                      "from POST /v1/clients");
    if (!authorization.starts_with(kPrefix) || authorization.size() > 200)
        return refuse(401, "unauthorized", "the Authorization header must be 'Bearer <token>'");
    const auto hash = net::sha256(authorization.substr(kPrefix.size()));
    auto q = m_db.prepareCached("SELECT id FROM clients WHERE token_sha256 = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, std::span<const uint8_t>(hash));
    if (!q->step())
        return refuse(401, "unauthorized",
                      "the bearer token is not known to this coordinator; register again with "
                      "POST /v1/clients");
    const int64_t id = q->integer(0);
    m_lastSeen[id] = m_clock();  // informational: written in the next batch
    return id;
}

Status ClientRegistry::writeLastSeen() {
    for (const auto& [id, unix] : m_lastSeen) {
        auto upd = m_db.prepareCached("UPDATE clients SET last_seen_unix = ? WHERE id = ?");
        if (!upd)
            return upd.error();
        if (auto st = upd->bind(1, unix).bind(2, id).run(); !st)
            return st;
    }
    return {};
}

}  // namespace tandem::coord
