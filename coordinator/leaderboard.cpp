#include "leaderboard.hpp"

#include "messages.hpp"
#include "safe_text.hpp"

#include <string>

namespace tandem::coord {

Leaderboard::Leaderboard(Database& db, int64_t topCount) : m_db(db), m_topCount(topCount) {}

Status Leaderboard::addResult(int64_t runId, int64_t clientId, int64_t tokens, double credit) {
    m_cache.reset();
    ++m_generation;
    auto donor = m_db.prepareCached(
        "INSERT INTO donor_totals(run_id, client_id, tokens, units, credit) VALUES (?, ?, ?, 1, ?) "
        "ON CONFLICT(run_id, client_id) DO UPDATE SET tokens = donor_totals.tokens + "
        "excluded.tokens, units = donor_totals.units + 1, credit = donor_totals.credit + "
        "excluded.credit",
        "adding to the donor's totals");
    if (!donor)
        return donor.error();
    donor->bind(1, runId).bind(2, clientId).bind(3, tokens).bind(4, credit);
    if (auto st = donor->run(); !st)
        return st;
    auto member = m_db.prepareCached("SELECT team, team_key FROM clients WHERE id = ?",
                                     "reading the donor's team");
    if (!member)
        return member.error();
    member->bind(1, clientId);
    if (!member->step() || member->isNull(1))
        return member->status();
    const std::string team = member->text(0), key = member->text(1);
    auto add = m_db.prepareCached(
        "INSERT INTO team_totals(run_id, team_key, team, tokens, units, credit) VALUES (?, ?, ?, "
        "?, 1, ?) ON CONFLICT(run_id, team_key) DO UPDATE SET tokens = team_totals.tokens + "
        "excluded.tokens, units = team_totals.units + 1, credit = team_totals.credit + "
        "excluded.credit",
        "adding to the team's totals");
    if (!add)
        return add.error();
    add->bind(1, runId).bind(2, key).bind(3, team).bind(4, tokens).bind(5, credit);
    return add->run();
}

Outcome<net::DonorProfile> Leaderboard::check(const net::DonorProfile& update, int64_t clientId) {
    net::DonorProfile out;
    if (update.displayName) {
        auto name = net::checkPublicName(*update.displayName, "display_name");
        if (!name)
            return refuse(400, "invalid_name", name.error().message);
        if (!name->empty()) {
            const std::string key = net::publicNameKey(*name);
            if (key == net::kAnonymousName)
                return refuse(409, "name_taken",
                              "the display name '" + net::quotable(*name) +
                                  "' is reserved for donors without a name; choose another");
            auto q = m_db.prepareCached("SELECT id FROM clients WHERE display_key = ? AND id != ?",
                                        "looking up a display name");
            if (!q)
                return internalError(q.error().message);
            q->bind(1, key).bind(2, clientId);
            if (q->step())
                return refuse(409, "name_taken",
                              "the display name '" + net::quotable(*name) +
                                  "' is taken by another donor (names are compared without "
                                  "regard to case); choose another");
            if (!q->status())
                return internalError(q->status().error().message);
        }
        out.displayName = *name;
    }
    if (update.team) {
        auto team = net::checkPublicName(*update.team, "team");
        if (!team)
            return refuse(400, "invalid_name", team.error().message);
        out.team = *team;
    }
    return out;
}

Outcome<void> Leaderboard::store(int64_t clientId, const net::DonorProfile& checked) {
    m_cache.reset();
    ++m_generation;
    auto set = [&](const char* sql, const std::string& value) -> Outcome<void> {
        auto u = m_db.prepare(sql, "storing the donor's profile");
        if (!u)
            return internalError(u.error().message);
        u->bind(3, clientId);
        if (value.empty())
            u->bindNull(1).bindNull(2);
        else
            u->bind(1, value).bind(2, net::publicNameKey(value));
        if (auto st = u->run(); !st)
            return internalError(st.error().message);
        return {};
    };
    if (checked.displayName)
        if (auto r = set("UPDATE clients SET display_name = ?, display_key = ? WHERE id = ?",
                         *checked.displayName);
            !r.ok())
            return r;
    if (checked.team)
        if (auto r = set("UPDATE clients SET team = ?, team_key = ? WHERE id = ?", *checked.team);
            !r.ok())
            return r;
    return {};
}

Outcome<net::DonorProfile> Leaderboard::profile(int64_t clientId) {
    auto q = m_db.prepare(
        "SELECT COALESCE(display_name, ''), COALESCE(team, '') FROM clients "
        "WHERE id = ?");
    if (!q)
        return internalError(q.error().message);
    q->bind(1, clientId);
    if (!q->step())
        return refuse(404, "unknown_client", "no such client");
    return net::DonorProfile{q->text(0), q->text(1)};
}

// ---------------------------------------------------------------------------------------------
// The board

namespace {

// Competition ranking ("1, 2, 2, 4") over a list sorted by credit, best first.
template <class Entry>
void rankByCredit(std::vector<Entry>& list) {
    for (size_t i = 0; i < list.size(); ++i)
        list[i].rank = (i > 0 && list[i].credit == list[i - 1].credit)
                           ? list[i - 1].rank
                           : static_cast<int64_t>(i) + 1;
}

}  // namespace

Outcome<net::Leaderboard> Leaderboard::topLists(int64_t runId) {
    net::Leaderboard out;
    out.runId = runId;
    auto donors = m_db.prepare(
        "SELECT COALESCE(c.display_name, ''), COALESCE(c.team, ''), d.tokens, d.units, d.credit "
        "FROM donor_totals d JOIN clients c ON c.id = d.client_id WHERE d.run_id = ? "
        "ORDER BY d.credit DESC, d.tokens DESC, d.client_id LIMIT ?",
        "reading the top donors");
    if (!donors)
        return internalError(donors.error().message);
    donors->bind(1, runId).bind(2, m_topCount);
    while (donors->step()) {
        net::DonorStanding d;
        d.displayName = donors->text(0);
        d.anonymous = d.displayName.empty();
        if (d.anonymous)
            d.displayName = std::string(net::kAnonymousName);
        d.team = donors->text(1);
        d.tokens = donors->integer(2);
        d.units = donors->integer(3);
        d.credit = donors->real(4);
        out.donors.push_back(std::move(d));
    }
    auto teams = m_db.prepare(
        "SELECT t.team, t.tokens, t.units, t.credit, (SELECT COUNT(*) FROM clients c WHERE "
        "c.team_key = t.team_key) FROM team_totals t WHERE t.run_id = ? "
        "ORDER BY t.credit DESC, t.tokens DESC, t.team_key LIMIT ?",
        "reading the top teams");
    if (!teams)
        return internalError(teams.error().message);
    teams->bind(1, runId).bind(2, m_topCount);
    while (teams->step())
        out.teams.push_back({0, teams->text(0), teams->integer(4), teams->integer(1),
                             teams->integer(2), teams->real(3)});
    rankByCredit(out.donors);
    rankByCredit(out.teams);
    auto counts = m_db.prepare(
        "SELECT (SELECT COUNT(*) FROM donor_totals WHERE run_id = ?1), "
        "(SELECT COUNT(*) FROM team_totals WHERE run_id = ?1)");
    if (!counts)
        return internalError(counts.error().message);
    counts->bind(1, runId);
    if (counts->step()) {
        out.donorCount = counts->integer(0);
        out.teamCount = counts->integer(1);
    }
    return out;
}

// The caller's standing: rank 0 while it (or its team) has no accepted result. Each rank is a
// count over the rank index of the entries with more credit.
Outcome<void> Leaderboard::addStanding(net::Leaderboard& out, int64_t runId, int64_t clientId) {
    auto me = m_db.prepare(
        "SELECT COALESCE(c.display_name, ''), COALESCE(c.team, ''), c.team_key, d.tokens, "
        "d.units, d.credit, (SELECT COUNT(*) FROM donor_totals x WHERE x.run_id = ?1 AND x.credit "
        "> d.credit) FROM clients c LEFT JOIN donor_totals d ON d.run_id = ?1 AND d.client_id = "
        "c.id WHERE c.id = ?2");
    if (!me)
        return internalError(me.error().message);
    me->bind(1, runId).bind(2, clientId);
    if (!me->step())
        return refuse(404, "unknown_client", "no such client");
    net::DonorStanding you;
    you.displayName = me->text(0);
    you.anonymous = you.displayName.empty();
    if (you.anonymous)
        you.displayName = std::string(net::kAnonymousName);
    you.team = me->text(1);
    if (!me->isNull(3)) {
        you.tokens = me->integer(3);
        you.units = me->integer(4);
        you.credit = me->real(5);
        you.rank = me->integer(6) + 1;
    }
    out.you = you;
    if (me->isNull(2))
        return {};
    const std::string teamKey = me->text(2);
    auto team = m_db.prepare(
        "SELECT t.tokens, t.units, t.credit, (SELECT COUNT(*) FROM team_totals x WHERE x.run_id = "
        "?1 AND x.credit > t.credit), (SELECT COUNT(*) FROM clients c WHERE c.team_key = ?2) FROM "
        "(SELECT ?2 AS team_key) k LEFT JOIN team_totals t ON t.run_id = ?1 AND t.team_key = "
        "k.team_key");
    if (!team)
        return internalError(team.error().message);
    team->bind(1, runId).bind(2, teamKey);
    net::TeamStanding t;
    t.team = you.team;
    if (team->step()) {
        t.members = team->integer(4);
        if (!team->isNull(0)) {
            t.tokens = team->integer(0);
            t.units = team->integer(1);
            t.credit = team->real(2);
            t.rank = team->integer(3) + 1;
        }
    }
    out.yourTeam = t;
    return {};
}

Outcome<net::Leaderboard> Leaderboard::board(int64_t runId, std::optional<int64_t> clientId) {
    if (!m_cache || m_cache->runId != runId) {
        auto lists = topLists(runId);
        if (!lists.ok())
            return lists.refusal();
        m_cache = std::move(lists.value());
    }
    net::Leaderboard out = *m_cache;
    if (clientId)
        if (auto st = addStanding(out, runId, *clientId); !st.ok())
            return st.refusal();
    return out;
}

}  // namespace tandem::coord
