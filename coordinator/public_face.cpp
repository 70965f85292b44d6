// The coordinator's public face: donors' names and teams at registration and later, the
// leaderboard, and the public run page, built from cached totals (public_page.hpp) and kept
// until something it shows changed (docs/protocol.md, "Names, teams and the leaderboard").
#include "coordinator_impl.hpp"
#include "public_page.hpp"

namespace tandem::coord {

namespace {

constexpr int64_t kPageMaxAgeSeconds = 60;  // active donors and tokens per hour move with time

}  // namespace

Outcome<net::RegisterResponse> Coordinator::Impl::registerDonor(
    const net::RegisterRequest& request) {
    net::DonorProfile wanted;
    if (!request.displayName.empty())
        wanted.displayName = request.displayName;
    if (!request.team.empty())
        wanted.team = request.team;
    auto checked = board.check(wanted, 0);
    if (!checked.ok())
        return checked.refusal();
    Transaction tx(db);
    if (!tx.started())
        return internalError(tx.started().error().message);
    auto added = clients.add(request, key.publicKey());
    if (!added.ok())
        return added;
    if (auto st = board.store(added.value().clientId, checked.value()); !st.ok())
        return st.refusal();
    if (auto st = tx.commit(); !st)
        return internalError(st.error().message);
    return added;
}

const std::string& Coordinator::Impl::publicPage() {
    const std::array<uint64_t, 3> stamp{static_cast<uint64_t>(version), pageEvents,
                                        board.generation()};
    if (!pageHtml.empty() && stamp == pageStamp && now() - pageBuiltUnix < kPageMaxAgeSeconds)
        return pageHtml;
    PublicRunView v;
    v.runId = runId;
    v.model = run.model;
    v.parameters = P;
    v.dataKind = run.dataKind;
    v.trainTokens = data.trainTokens();
    v.builtUnix = now();
    // One row per round: cheap enough once per change, never once per request.
    if (auto q = db.prepare("SELECT round, val_loss, tokens, closed_unix FROM rounds WHERE run_id "
                            "= ? ORDER BY round")) {
        q->bind(1, runId);
        while (q->step()) {
            v.tokensSoFar += q->integer(2);
            if (q->isNull(3))
                continue;
            ++v.roundsClosed;
            if (q->integer(3) >= v.builtUnix - 3600)
                v.tokensLastHour += q->integer(2);
            if (!q->isNull(1))
                v.losses.push_back({q->integer(0), q->real(1)});
        }
    }
    v.activeDonors = static_cast<int64_t>(liveClients().size());
    if (auto newest = latestSamples(1); !newest.empty())
        v.sample = net::SampleSummary{newest[0].version, newest[0].prompt, newest[0].text};
    if (auto b = board.board(runId, std::nullopt); b.ok())
        v.board = std::move(b.value());
    pageHtml = renderRunPage(v);
    pageStamp = stamp;
    pageBuiltUnix = v.builtUnix;
    return pageHtml;
}

// ---------------------------------------------------------------------------------------------
// The facade's calls

Outcome<net::DonorProfile> Coordinator::updateProfile(int64_t clientId, std::string_view body) {
    auto update = net::DonorProfile::fromJson(body);
    if (!update)
        return refuse(400, "bad_request", update.error().message);
    std::lock_guard lock(m_impl->mu);
    auto checked = m_impl->board.check(*update, clientId);
    if (!checked.ok())
        return checked.refusal();
    if (auto st = m_impl->board.store(clientId, checked.value()); !st.ok())
        return st.refusal();
    auto stored = m_impl->board.profile(clientId);
    if (stored.ok())
        m_impl->log("client " + std::to_string(clientId) + " changed its public profile");
    return stored;
}

Outcome<net::DonorProfile> Coordinator::profile(int64_t clientId) {
    std::lock_guard lock(m_impl->mu);
    return m_impl->board.profile(clientId);
}

Outcome<net::Leaderboard> Coordinator::leaderboard(int64_t runId, std::optional<int64_t> clientId) {
    std::lock_guard lock(m_impl->mu);
    if (runId != m_impl->runId)
        return refuse(404, "unknown_run",
                      "run " + std::to_string(runId) +
                          " does not exist; this coordinator serves "
                          "run " +
                          std::to_string(m_impl->runId));
    return m_impl->board.board(runId, clientId);
}

Outcome<std::string> Coordinator::publicPage(int64_t runId) {
    std::lock_guard lock(m_impl->mu);
    if (runId != m_impl->runId)
        return refuse(404, "unknown_run",
                      "run " + std::to_string(runId) +
                          " does not exist; this coordinator serves "
                          "run " +
                          std::to_string(m_impl->runId));
    return m_impl->publicPage();
}

}  // namespace tandem::coord
