// Names, teams and the leaderboard (coordinator/leaderboard.hpp): names checked at registration
// and on PUT /v1/clients/self (every refusal leaves the database as it was), the totals against
// the receipts the donors were given (summed here, not by the coordinator), ranks with ties,
// a team change, the caller's standing, and the JSON over HTTPS without private data.
#include "codec.hpp"
#include "direct.hpp"
#include "state_store.hpp"

#include <nlohmann/json.hpp>

#include <QtTest>

#include <map>

using namespace tandem;
using namespace tandem::testing;

namespace {

coord::CoordinatorConfig boardConfig() {
    auto cfg = directConfig();
    cfg.quorum = 3;
    cfg.validationBatches = 1;
    cfg.validationBatch = 2;
    cfg.samples.maxSeconds = 0;
    return cfg;
}

// A registration with a display name and team, straight into the coordinator.
coord::Outcome<net::RegisterResponse> registerNamed(DirectCoordinator& f, const std::string& name,
                                                    const std::string& team) {
    net::RegisterRequest r{"device-of-" + std::to_string(std::rand()),
                           net::SigningKey::generate().value().publicKey(), "test"};
    r.displayName = name;
    r.team = team;
    return f.coordinator().registerClient(r.toJson());
}

DirectClient namedClient(DirectCoordinator& f, const std::string& device, const std::string& name,
                         const std::string& team) {
    DirectClient c{0, net::SigningKey::generate().value()};
    net::RegisterRequest r{device, c.key.publicKey(), "test"};
    r.displayName = name;
    r.team = team;
    auto out = f.coordinator().registerClient(r.toJson());
    if (out.ok())
        c.id = out.value().clientId;
    return c;
}

// Rows of the clients table, read through a connection of the test's own.
int64_t clientRows(DirectCoordinator& f) {
    auto db = coord::openStateStore(f.t().stateDir(), f.t().config().databaseUrl);
    if (!db)
        return -1;
    auto q = db->prepare("SELECT COUNT(*) FROM clients");
    return q && q->step() ? q->integer(0) : -1;
}

std::vector<uint16_t> smallDelta(int64_t p) {
    std::vector<uint16_t> d(static_cast<size_t>(p));
    for (size_t i = 0; i < d.size(); ++i)
        d[i] = floatToHalf(0.01f * float(int(i % 5) - 2));
    return d;
}

}  // namespace

class TestCoordinatorLeaderboard : public QObject {
    Q_OBJECT

  private slots:
    void registrationChecksNamesAndChangesNothingWhenRefused() {
        DirectCoordinator f(boardConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto alice = registerNamed(f, "  Alice  ", " Red ");
        QVERIFY(alice.ok());
        auto p = f.coordinator().profile(alice.value().clientId);
        QVERIFY(p.ok());
        QCOMPARE(*p.value().displayName, std::string("Alice"));  // trimmed
        QCOMPARE(*p.value().team, std::string("Red"));
        const int64_t rows = clientRows(f);
        QCOMPARE(rows, int64_t{1});

        struct Bad {
            std::string name, team;
            int status;
            std::string code, words;
        };
        const std::string e = "\xC3\xA9";  // é: 2 bytes, 1 character
        std::string e33;
        for (int i = 0; i < 33; ++i)
            e33 += e;
        const std::vector<Bad> bad = {
            {"aLiCe", "", 409, "name_taken", "taken"},
            {"ANONYMOUS", "", 409, "name_taken", "reserved"},
            {e33, "", 400, "invalid_name", "at most 32 characters"},
            {std::string(40, 'x'), "", 400, "invalid_name", "found 40"},
            {"   ", "", 400, "invalid_name", "only white space"},
            {"bell\x07", "", 400, "invalid_name", "U+0007"},
            {"a\xE2\x80\xAEgnp.exe", "", 400, "invalid_name", "U+202E"},  // right-to-left override
            {"ok-name", std::string(33, 't'), 400, "invalid_name", "team may have at most"},
            {"ok-name", "\t\n", 400, "invalid_name", "team is only white space"},
        };
        for (const Bad& b : bad) {
            auto r = registerNamed(f, b.name, b.team);
            QVERIFY2(!r.ok(), b.name.c_str());
            QCOMPARE(r.refusal().httpStatus, b.status);
            QCOMPARE(r.refusal().code, b.code);
            QVERIFY2(r.refusal().message.find(b.words) != std::string::npos,
                     r.refusal().message.c_str());
            QCOMPARE(clientRows(f), rows);
        }
        // Bytes that are not UTF-8 do not get past the JSON parser (nor into the database).
        const std::string broken = "{\"name\": \"d\", \"hardware\": \"t\", \"public_key\": \"" +
                                   net::toBase64(net::SigningKey::generate().value().publicKey()) +
                                   "\", \"display_name\": \"bad\xC3(\"}";
        auto refused = f.coordinator().registerClient(broken);
        QVERIFY(!refused.ok());
        QCOMPARE(refused.refusal().httpStatus, 400);
        QCOMPARE(clientRows(f), rows);
        // 32 two-byte characters are within the limit (characters are counted, not bytes).
        std::string e32;
        for (int i = 0; i < 32; ++i)
            e32 += e;
        QVERIFY(registerNamed(f, e32, "").ok());
        QVERIFY(registerNamed(f, "", "").ok());  // anonymous
        QVERIFY(registerNamed(f, "", "").ok());  // many anonymous donors
        QCOMPARE(clientRows(f), rows + 3);
    }

    void profileUpdatesChangeOnlyWhatIsSent() {
        DirectCoordinator f(boardConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        const auto a = namedClient(f, "dev-a", "Alice", "Red");
        const auto b = namedClient(f, "dev-b", "Bob", "");
        QVERIFY(a.id > 0 && b.id > 0);

        auto r = c.updateProfile(a.id, R"({"team": "Blue"})");
        QVERIFY(r.ok());
        QCOMPARE(*r.value().displayName, std::string("Alice"));
        QCOMPARE(*r.value().team, std::string("Blue"));
        // Another case of one's own name is no conflict.
        QVERIFY(c.updateProfile(a.id, R"({"display_name": "ALICE"})").ok());
        QCOMPARE(*c.profile(a.id).value().displayName, std::string("ALICE"));

        for (const char* body : {R"({"display_name": "alice"})", R"({"display_name": 7})",
                                 R"({"team": "  "})", "not json", "[]"}) {
            auto refused = c.updateProfile(b.id, body);
            QVERIFY2(!refused.ok(), body);
            QVERIFY(refused.refusal().httpStatus == 400 || refused.refusal().httpStatus == 409);
            QVERIFY(!refused.refusal().message.empty());
            QCOMPARE(*c.profile(b.id).value().displayName, std::string("Bob"));
            QCOMPARE(*c.profile(b.id).value().team, std::string());
        }
        QCOMPARE(c.updateProfile(b.id, R"({"display_name": "alice"})").refusal().code,
                 std::string("name_taken"));
        // "" and null clear; then the name is free for someone else.
        QVERIFY(c.updateProfile(a.id, R"({"display_name": "", "team": null})").ok());
        QCOMPARE(*c.profile(a.id).value().displayName, std::string());
        QCOMPARE(*c.profile(a.id).value().team, std::string());
        QVERIFY(c.updateProfile(b.id, R"({"display_name": "alice"})").ok());
    }

    void totalsFollowTheReceipts() {
        DirectCoordinator f(boardConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        auto a = namedClient(f, "dev-a", "Alice", "Red");
        auto b = namedClient(f, "dev-b", "Bob", "red");  // the same team, another spelling
        auto z = namedClient(f, "dev-z", "", "");        // anonymous
        const auto delta = smallDelta(c.parameterCount());

        // The oracle: each donor's and team's sums of what its receipts say.
        std::map<int64_t, double> credit;
        std::map<int64_t, int64_t> tokens, units;
        std::map<std::string, double> teamCredit;
        auto upload = [&](DirectClient& who, int64_t claimed, const std::string& team) {
            const auto m = f.work(who);
            QVERIFY(m.workUnitId > 0);
            auto receipt = f.upload(who, buildResult(m, delta, who.key, claimed));
            QVERIFY2(receipt.ok(), receipt.ok() ? "" : receipt.refusal().message.c_str());
            auto parsed = net::Receipt::fromJson(receipt.value());
            QVERIFY(parsed.ok());
            credit[who.id] += parsed->weight;
            tokens[who.id] += claimed;
            units[who.id] += 1;
            if (!team.empty())
                teamCredit[team] += parsed->weight;
        };
        // Round 0: a 100, b 60, z 100 tokens; round 1: a 20, b 50, z 20: a and z tie at 120,
        // b has 110.
        upload(a, 100, "red");
        upload(b, 60, "red");
        upload(z, 100, "");
        QCOMPARE(c.currentVersion(), int64_t{1});
        // b moves to team Blue: what it earns now counts for Blue, Red keeps the rest.
        QVERIFY(c.updateProfile(b.id, R"({"team": "Blue"})").ok());
        upload(a, 20, "red");
        upload(b, 50, "blue");
        upload(z, 20, "");
        QCOMPARE(c.currentVersion(), int64_t{2});

        auto board = c.leaderboard(c.runId(), a.id);
        QVERIFY(board.ok());
        const auto& l = board.value();
        QCOMPARE(l.donorCount, int64_t{3});
        QCOMPARE(l.teamCount, int64_t{2});
        QCOMPARE(l.donors.size(), size_t{3});
        // a and z share rank 1 (120 each); b is third, not second.
        std::map<std::string, net::DonorStanding> byName;
        for (const auto& d : l.donors)
            byName[d.displayName] = d;
        QCOMPARE(byName["Alice"].rank, int64_t{1});
        QCOMPARE(byName["anonymous"].rank, int64_t{1});
        QVERIFY(byName["anonymous"].anonymous);
        QCOMPARE(byName["Bob"].rank, int64_t{3});
        QCOMPARE(byName["Bob"].team, std::string("Blue"));
        for (auto [name, id] :
             {std::pair{"Alice", a.id}, std::pair{"Bob", b.id}, std::pair{"anonymous", z.id}}) {
            QCOMPARE(byName[name].credit, credit[id]);
            QCOMPARE(byName[name].tokens, tokens[id]);
            QCOMPARE(byName[name].units, units[id]);
        }
        QCOMPARE(l.teams.size(), size_t{2});
        QCOMPARE(l.teams[0].team, std::string("Red"));  // the first result's spelling
        QCOMPARE(l.teams[0].credit, teamCredit["red"]);
        QCOMPARE(l.teams[0].members, int64_t{1});  // only a is in it now
        QCOMPARE(l.teams[0].rank, int64_t{1});
        QCOMPARE(l.teams[1].team, std::string("Blue"));
        QCOMPARE(l.teams[1].credit, teamCredit["blue"]);
        QCOMPARE(l.teams[1].rank, int64_t{2});

        QVERIFY(l.you.has_value() && l.yourTeam.has_value());
        QCOMPARE(l.you->rank, int64_t{1});
        QCOMPARE(l.you->credit, credit[a.id]);
        QCOMPARE(l.yourTeam->team, std::string("Red"));
        QCOMPARE(l.yourTeam->rank, int64_t{1});
        // Without a caller: no standing. A donor without results: rank 0.
        QVERIFY(!c.leaderboard(c.runId(), std::nullopt).value().you);
        const auto fresh = namedClient(f, "dev-f", "Fresh", "Green");
        auto freshBoard = c.leaderboard(c.runId(), fresh.id);
        QCOMPARE(freshBoard.value().you->rank, int64_t{0});
        QCOMPARE(freshBoard.value().yourTeam->rank, int64_t{0});
        QCOMPARE(freshBoard.value().yourTeam->members, int64_t{1});
        QCOMPARE(c.leaderboard(c.runId() + 1, std::nullopt).refusal().httpStatus, 404);

        // The totals survive a restart (they are in the database, not only in the cache).
        f.t().close();
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto again = f.coordinator().leaderboard(f.coordinator().runId(), a.id);
        QVERIFY(again.ok());
        QCOMPARE(again.value().donors, l.donors);
        QCOMPARE(again.value().teams, l.teams);
    }

    void overHttpsWithoutPrivateData() {
        DirectCoordinator f(boardConfig(), 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.t().registerClient("secret-device-name");
        QVERIFY(!a.token.empty());
        auto put = a.http->Put("/v1/clients/self", a.auth(),
                               R"({"display_name": "<script>alert(1)</script>", "team": "T&T"})",
                               "application/json");
        QVERIFY(put);
        QCOMPARE(put->status, 200);
        QCOMPARE(nlohmann::json::parse(put->body)["team"].get<std::string>(), std::string("T&T"));

        auto http = f.t().connect();
        auto taken = http->Put("/v1/clients/self", R"({"display_name": "x"})", "application/json");
        QVERIFY(taken);
        QCOMPARE(taken->status, 401);
        auto b = f.t().registerClient("other-device");
        auto clash =
            b.http->Put("/v1/clients/self", b.auth(),
                        R"({"display_name": "<SCRIPT>alert(1)</SCRIPT>"})", "application/json");
        QVERIFY(clash);
        QCOMPARE(clash->status, 409);
        QVERIFY(clash->body.find("name_taken") != std::string::npos);

        // One round, so that the board has rows.
        auto& c = f.coordinator();
        DirectClient direct{a.id, std::move(a.key)};
        const auto delta = smallDelta(c.parameterCount());
        QVERIFY(f.upload(direct, buildResult(f.work(direct), delta, direct.key)).ok());

        const std::string path = "/v1/runs/" + std::to_string(c.runId()) + "/leaderboard";
        auto open = http->Get(path);
        QVERIFY(open);
        QCOMPARE(open->status, 200);
        auto j = nlohmann::json::parse(open->body);
        QCOMPARE(j["donors"].size(), size_t{1});
        QCOMPARE(j["donors"][0]["display_name"].get<std::string>(),
                 std::string("<script>alert(1)</script>"));
        QVERIFY(!j.contains("you"));
        auto mine = http->Get(path, a.auth());
        QVERIFY(mine);
        QCOMPARE(mine->status, 200);
        auto mj = nlohmann::json::parse(mine->body);
        QCOMPARE(mj["you"]["rank"].get<int64_t>(), int64_t{1});
        QCOMPARE(mj["your_team"]["team"].get<std::string>(), std::string("T&T"));
        auto parsed = net::Leaderboard::fromJson(mine->body);
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        for (const std::string& body : {open->body, mine->body}) {
            QVERIFY(body.find("secret-device-name") == std::string::npos);
            QVERIFY(body.find(a.token) == std::string::npos);
            QVERIFY(body.find(net::toBase64(direct.key.publicKey())) == std::string::npos);
            QVERIFY(body.find("127.0.0.1") == std::string::npos);
        }
        auto wrong = http->Get(path, {{"Authorization", "Bearer nope"}});
        QVERIFY(wrong);
        QCOMPARE(wrong->status, 401);
        auto other = http->Get("/v1/runs/999/leaderboard");
        QVERIFY(other);
        QCOMPARE(other->status, 404);
        auto self = http->Get("/v1/clients/self", a.auth());
        QVERIFY(self);
        QCOMPARE(self->status, 200);
        QCOMPARE(nlohmann::json::parse(self->body)["display_name"].get<std::string>(),
                 std::string("<script>alert(1)</script>"));
        auto huge =
            http->Put("/v1/clients/self", a.auth(),
                      "{\"team\": \"" + std::string(70000, 'x') + "\"}", "application/json");
        QVERIFY(huge);
        QCOMPARE(huge->status, 413);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorLeaderboard)
#include "test_coordinator_leaderboard.moc"
