// Replication spot-checks (coordinator/replication.hpp, docs/protocol.md): twins assigned to
// another client with the same base version, data range, seed and H; the first result held until
// the second arrives; an agreeing pair committed at half weight each (exact float oracle of the
// round, as test_coordinator_aggregation's), a disagreeing pair held out and counted against
// both clients, strikes that block a client, a twin that times out, a held result across a
// restart, and replayed or blocked twins.
//
// Dimensions: P parameters.
#include "codec.hpp"
#include "direct.hpp"
#include "replication.hpp"
#include "state_store.hpp"

#include <QtTest>

#include <cmath>

using namespace tandem;
using namespace tandem::testing;

namespace {

// Every unit gets a twin; a quorum no test reaches by accident.
coord::CoordinatorConfig twinConfig(int quorum = 10) {
    auto c = directConfig();
    c.replicateFraction = 1;
    c.replicateTolerance = 0.5;
    c.replicateStrikes = 3;
    c.quorum = quorum;
    return c;
}

std::string codeOf(const coord::Outcome<std::string>& o) {
    return o.ok() ? std::string("accepted") : o.refusal().code;
}

double weightOf(const coord::Outcome<std::string>& o) {
    if (!o.ok())
        return -1;
    auto r = net::Receipt::fromJson(o.value());
    return r ? r->weight : -1;
}

double tokensOf(const net::Manifest& m) {
    return double(m.innerSteps) * m.batch * m.seqLen;
}

// One integer from the coordinator's database (a second, read-only connection).
int64_t sqlInteger(DirectCoordinator& f, const std::string& sql) {
    auto db = coord::openStateStore(f.t().stateDir(), f.t().config().databaseUrl);
    if (!db)
        return -1;
    auto q = db->prepare(sql);
    return q && q->step() ? q->integer(0) : -1;
}

// Independent IEEE half decoder.
float decodeHalf(uint16_t h) {
    const int sign = (h >> 15) & 1, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return static_cast<float>(sign ? -v : v);
}

// The round of DESIGN.md §3 in float, the results summed in acceptance order.
std::vector<float> oracleRound(std::vector<float> theta,
                               const std::vector<std::pair<std::vector<uint16_t>, double>>& parts,
                               float lr, float mu) {
    double W = 0;
    for (auto& p : parts)
        W += p.second;
    std::vector<float> sum(theta.size(), 0.0f);
    for (auto& [delta, w] : parts)
        for (size_t i = 0; i < theta.size(); ++i)
            sum[i] = sum[i] + static_cast<float>(w) * decodeHalf(delta[i]);
    const float scale = static_cast<float>(1.0 / W);
    for (size_t i = 0; i < theta.size(); ++i) {
        const float d = scale * sum[i];
        const float v = d;  // mu x 0 + d: the first round's momentum
        theta[i] = theta[i] - lr * (d + mu * v);
    }
    return theta;
}

// A delta of another shape than patternDelta (unrelated direction, similar size).
std::vector<uint16_t> otherDelta(int64_t P) {
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i)
        d[size_t(i)] = floatToHalf(0.001f * float((i * 5) % 11 - 5));
    return d;
}

}  // namespace

class TestCoordinatorReplication : public QObject {
    Q_OBJECT

  private slots:
    void rules() {
        // About the fraction, and a fixed function of (seed, id).
        int chosen = 0;
        for (int64_t id = 1; id <= 20000; ++id)
            chosen += coord::chosenForTwin(7, id, 0.05) ? 1 : 0;
        QVERIFY2(chosen > 850 && chosen < 1150, qPrintable(QString::number(chosen)));
        QCOMPARE(coord::chosenForTwin(7, 123, 0.05), coord::chosenForTwin(7, 123, 0.05));
        QVERIFY(!coord::chosenForTwin(7, 123, 0));
        // Distances by hand: equal, b = 2a, b = -a, orthogonal of equal norm, both zero.
        const std::vector<float> a = {3, 4}, twice = {6, 8}, flipped = {-3, -4}, ortho = {4, -3};
        QCOMPARE(coord::twinDistance(a, a), 0.0);
        QCOMPARE(coord::twinDistance(a, twice), 0.5);
        QCOMPARE(coord::twinDistance(a, flipped), 2.0);
        QCOMPARE(coord::twinDistance(a, ortho), std::sqrt(2.0));
        QCOMPARE(coord::twinDistance(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 0.0);
        // Blocked at `strikes` disagreements, only when they outnumber the agreements.
        QVERIFY(coord::blockedByTwins(0, 3, 3));
        QVERIFY(coord::blockedByTwins(2, 3, 3));
        QVERIFY(!coord::blockedByTwins(3, 3, 3));
        QVERIFY(!coord::blockedByTwins(0, 2, 3));
        QVERIFY(coord::blockedByTwins(5, 6, 3));
    }

    void twinsAreTheSameUnitForAnotherClient() {
        DirectCoordinator f(twinConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto u1 = f.work(a);
        // a holds a unit: a second one for a is new work, never the twin of its own unit.
        const auto u2 = f.work(a);
        QVERIFY(u2.workUnitId > u1.workUnitId);
        QVERIFY(u2.dataOffset != u1.dataOffset);
        // b holds nothing: the twin of the oldest waiting unit.
        const auto t1 = f.work(b);
        QVERIFY(t1.workUnitId != u1.workUnitId && t1.workUnitId != u2.workUnitId);
        QCOMPARE(t1.baseVersion, u1.baseVersion);
        QCOMPARE(t1.dataShard, u1.dataShard);
        QCOMPARE(t1.dataOffset, u1.dataOffset);
        QCOMPARE(t1.dataLength, u1.dataLength);
        QCOMPARE(t1.dataSha256, u1.dataSha256);
        QCOMPARE(t1.seed, u1.seed);
        QCOMPARE(t1.innerSteps, u1.innerSteps);
        QCOMPARE(t1.batch, u1.batch);
        QCOMPARE(t1.seqLen, u1.seqLen);
        QCOMPARE(t1.lrStartStep, u1.lrStartStep);
        QCOMPARE(t1.uploadUrl, "/v1/results/" + std::to_string(t1.workUnitId));
        QVERIFY(t1.verify(f.coordinator().publicKey()));
        // b now holds the twin: its next unit is new work.
        const auto b2 = f.work(b);
        QVERIFY(b2.dataOffset != u1.dataOffset && b2.dataOffset != u2.dataOffset);
        // c gets the twin of u2 (u1's twin is taken), b2's and its own wait.
        const auto t2 = f.work(c);
        QCOMPARE(t2.dataOffset, u2.dataOffset);
        QCOMPARE(t2.seed, u2.seed);
        QVERIFY(f.logged("twin of work unit " + std::to_string(u1.workUnitId)));

        // Off: every unit is new work.
        auto cfg = twinConfig();
        cfg.replicateFraction = 0;
        DirectCoordinator g(cfg);
        auto x = g.registerClient("x"), y = g.registerClient("y");
        const auto ux = g.work(x), uy = g.work(y);
        QVERIFY(ux.dataOffset != uy.dataOffset);
    }

    // A worker asks for its next unit while its last result uploads: a client holding units
    // without twins gets a twin too; one holding a unit with a twin does not (docs/protocol.md).
    void pipelinedClientsGetTwins() {
        auto cfg = twinConfig();
        cfg.replicateFraction = 0.3;
        // With the run's seed 1, units 1 and 2 get no twin and unit 3 does.
        QVERIFY(!coord::chosenForTwin(cfg.seed, 1, 0.3) && !coord::chosenForTwin(cfg.seed, 2, 0.3));
        QVERIFY(coord::chosenForTwin(cfg.seed, 3, 0.3));
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto u1 = f.work(a), u2 = f.work(b), u3 = f.work(c);
        QCOMPARE(u3.workUnitId, int64_t{3});
        const auto again = f.work(c);  // c holds unit 3, which waits for a twin: new work
        QVERIFY(again.dataOffset != u3.dataOffset);
        const auto twin = f.work(a);  // a holds unit 1, without a twin
        QCOMPARE(twin.dataOffset, u3.dataOffset);
        QCOMPARE(twin.seed, u3.seed);
        QVERIFY(u1.dataOffset != u2.dataOffset);
    }

    void agreeingPairCountsOnceAtHalfWeight() {
        DirectCoordinator f(twinConfig(3));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const auto theta0 = f.coordinator().weights();
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto u1 = f.work(a), t1 = f.work(b);
        QCOMPARE(t1.dataOffset, u1.dataOffset);
        const auto da = patternDelta(P, 1.0f), db = patternDelta(P, 1.02f);
        // The first result waits for its twin's: 503 awaiting_replica, retry later.
        auto first = f.upload(a, buildResult(u1, da, a.key));
        QCOMPARE(codeOf(first), std::string("awaiting_replica"));
        QCOMPARE(first.refusal().httpStatus, 503);
        QVERIFY(first.refusal().retryAfterSeconds > 0);
        QVERIFY(f.readStateFile("held/" + std::to_string(u1.workUnitId) + ".f16").size() ==
                size_t(2 * P));
        // A retry is answered before its body, while the twin trains.
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, da, a.key))), std::string("awaiting_replica"));
        QCOMPARE(f.coordinator().status().totalTokens, int64_t{0});
        // The twin's result agrees: both accepted at half their weight.
        auto second = f.upload(b, buildResult(t1, db, b.key));
        QCOMPARE(codeOf(second), std::string("accepted"));
        QCOMPARE(weightOf(second), tokensOf(t1) / 2);
        auto retried = f.upload(a, buildResult(u1, da, a.key));
        QCOMPARE(codeOf(retried), std::string("accepted"));
        QCOMPARE(weightOf(retried), tokensOf(u1) / 2);
        QVERIFY(f.readStateFile("held/" + std::to_string(u1.workUnitId) + ".f16").empty());
        QCOMPARE(sqlInteger(f, "SELECT COUNT(*) FROM replica_checks WHERE agreed = 1"), int64_t{1});
        QCOMPARE(sqlInteger(f, "SELECT replica_agreements FROM clients WHERE id = " +
                                   std::to_string(a.id)),
                 int64_t{1});
        // c's unit has no twin yet: its result is committed alone, at full weight, and closes
        // the round (3 results).
        const auto uc = f.work(c);
        const auto dc = patternDelta(P, 0.9f);
        auto third = f.upload(c, buildResult(uc, dc, c.key));
        QCOMPARE(weightOf(third), tokensOf(uc));
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        // The oracle: a's held result first (it was committed first), then b's, then c's.
        const auto cfg = twinConfig(3);
        const auto expected = oracleRound(
            theta0, {{da, tokensOf(u1) / 2}, {db, tokensOf(t1) / 2}, {dc, tokensOf(uc)}},
            cfg.outer.lr, cfg.outer.momentum);
        QVERIFY2(f.coordinator().weights() == expected, "weights differ from the float oracle");
        const auto metrics = f.coordinator().metricsText();
        QVERIFY(metrics.find("tandem_replica_checks_total{outcome=\"agreed\"} 1") !=
                std::string::npos);
        QVERIFY(metrics.find("tandem_results_held_total 1") != std::string::npos);
    }

    void disagreeingPairIsHeldOut() {
        DirectCoordinator f(twinConfig(1));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const auto theta0 = f.coordinator().weights();
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto u1 = f.work(a), t1 = f.work(b);
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, patternDelta(P, 1.0f), a.key))),
                 std::string("awaiting_replica"));
        // Three times the honest delta: distance 2/3, above the tolerance 0.5.
        auto second = f.upload(b, buildResult(t1, patternDelta(P, 3.0f), b.key));
        QCOMPARE(codeOf(second), std::string("replica_mismatch"));
        QCOMPARE(second.refusal().httpStatus, 422);
        QVERIFY2(second.refusal().message.find("differ by 0.6667") != std::string::npos,
                 second.refusal().message.c_str());
        // Both are told so; nothing counted, the round still open (quorum 1).
        auto retried = f.upload(a, buildResult(u1, patternDelta(P, 1.0f), a.key));
        QCOMPARE(codeOf(retried), std::string("replica_mismatch"));
        QCOMPARE(f.coordinator().status().totalTokens, int64_t{0});
        QCOMPARE(f.coordinator().currentVersion(), int64_t{0});
        QVERIFY(f.coordinator().weights() == theta0);
        QCOMPARE(
            sqlInteger(f,
                       "SELECT COUNT(*) FROM replica_checks WHERE agreed = 0 AND "
                       "first_client = " +
                           std::to_string(a.id) + " AND second_client = " + std::to_string(b.id)),
            int64_t{1});
        for (const int64_t client : {a.id, b.id})
            QCOMPARE(sqlInteger(f, "SELECT replica_disagreements FROM clients WHERE id = " +
                                       std::to_string(client)),
                     int64_t{1});
        QVERIFY(f.logged("disagree: distance 0.6667"));
        QVERIFY(f.coordinator().metricsText().find(
                    "tandem_replica_checks_total{outcome=\"disagreed\"} 1") != std::string::npos);
        // The unit's data is trained again by someone else: c gets u1's range.
        const auto again = f.work(c);
        QCOMPARE(again.dataOffset, u1.dataOffset);
        QVERIFY(again.workUnitId != u1.workUnitId && again.workUnitId != t1.workUnitId);
        // One disagreement blocks nobody (strikes 3).
        QVERIFY(f.request(a, 0).ok());
    }

    // An int8 run's twins: the held payload is the int8 one, and the pair's distance is read
    // from both files through the run's layout. The same int8 values at 3x the scale differ by
    // ||3a - a|| / ||3a|| = 2/3, exactly.
    void int8TwinsAreCompared() {
        auto config = twinConfig(1);
        config.resultEncoding = net::kEncodingInt8;
        DirectCoordinator f(config);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto u1 = f.work(a), t1 = f.work(b);
        QCOMPARE(t1.resultEncoding, net::kEncodingInt8);
        std::vector<int8_t> values(static_cast<size_t>(P));
        for (int64_t i = 0; i < P; ++i)
            values[size_t(i)] = static_cast<int8_t>(40 * (i % 7 - 3));
        const std::vector<float> scale1((size_t(P) + 255) / 256, 1.0f / 4096);
        const std::vector<float> scale3(scale1.size(), 3.0f / 4096);
        const auto pa = net::int8Payload(values, scale1).value();
        const auto pb = net::int8Payload(values, scale3).value();
        QCOMPARE(codeOf(f.upload(a, buildEncodedResult(u1, net::kEncodingInt8, pa, a.key))),
                 std::string("awaiting_replica"));
        QVERIFY(f.readStateFile("held/" + std::to_string(u1.workUnitId) + ".f16") == pa);
        auto second = f.upload(b, buildEncodedResult(t1, net::kEncodingInt8, pb, b.key));
        QCOMPARE(codeOf(second), std::string("replica_mismatch"));
        QVERIFY2(second.refusal().message.find("differ by 0.6667") != std::string::npos,
                 second.refusal().message.c_str());
    }

    void strikesBlockAClient() {
        DirectCoordinator f(twinConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        auto x = f.registerClient("attacker");
        net::Manifest later;
        for (int k = 0; k < 3; ++k) {
            auto h = f.registerClient("honest" + std::to_string(k));
            const auto u = f.work(h);
            const auto t = f.work(x);  // x holds nothing: the twin
            QCOMPARE(t.dataOffset, u.dataOffset);
            if (k == 2)
                later = f.work(x);  // x also holds new work when it is blocked
            QCOMPARE(codeOf(f.upload(h, buildResult(u, patternDelta(P, 1.0f), h.key))),
                     std::string("awaiting_replica"));
            QCOMPARE(codeOf(f.upload(x, buildResult(t, otherDelta(P), x.key))),
                     std::string("replica_mismatch"));
            // One strike each for the honest clients: none blocked.
            QCOMPARE(sqlInteger(f,
                                "SELECT COUNT(*) FROM clients WHERE blocked_unix IS NOT NULL "
                                "AND id != " +
                                    std::to_string(x.id)),
                     int64_t{0});
        }
        // The third disagreement blocked x: its unit is taken back, it gets no work and its
        // results are refused.
        QVERIFY(later.workUnitId > 0);
        auto refused = f.upload(x, buildResult(later, patternDelta(P, 1.0f), x.key));
        QCOMPARE(codeOf(refused), std::string("client_blocked"));
        QCOMPARE(refused.refusal().httpStatus, 403);
        auto noWork = f.request(x, 0);
        QVERIFY(!noWork.ok());
        QCOMPARE(noWork.refusal().code, std::string("client_blocked"));
        QVERIFY(f.logged("client " + std::to_string(x.id) + " blocked"));
        const auto metrics = f.coordinator().metricsText();
        QVERIFY(metrics.find("tandem_clients_blocked 1") != std::string::npos);
        // What `tandem-coordinator status` prints.
        auto summary = coord::readTwinSummary(f.t().stateDir(), f.coordinator().runId(),
                                              f.t().config().databaseUrl);
        QVERIFY(summary.ok());
        QCOMPARE(summary->disagreed, int64_t{3});
        QCOMPARE(summary->blocked.size(), size_t{1});
        QCOMPARE(summary->blocked[0].id, x.id);
        QCOMPARE(summary->blocked[0].name, std::string("attacker"));
        QCOMPARE(summary->blocked[0].disagreements, int64_t{3});
    }

    void twinTimedOutFirstAcceptedAlone() {
        DirectCoordinator f(twinConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto u1 = f.work(a), t1 = f.work(b);
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, patternDelta(P, 1.0f), a.key))),
                 std::string("awaiting_replica"));
        // b goes silent; a's held unit needs no heartbeat of its own.
        *f.clock += 200;
        f.coordinator().tick();
        QVERIFY(f.logged("work unit " + std::to_string(t1.workUnitId) + " abandoned"));
        // The ticker accepted the held result alone, before any retry of its worker.
        QCOMPARE(f.coordinator().status().totalTokens, int64_t(tokensOf(u1)));
        auto retried = f.upload(a, buildResult(u1, patternDelta(P, 1.0f), a.key));
        QCOMPARE(codeOf(retried), std::string("accepted"));
        QCOMPARE(weightOf(retried), tokensOf(u1));  // alone: full weight
        QVERIFY(f.logged("accepted alone: its twin was abandoned"));
        QCOMPARE(codeOf(f.upload(b, buildResult(t1, patternDelta(P, 1.0f), b.key))),
                 std::string("work_unit_abandoned"));
        // The range was trained: it is not handed out again.
        const auto next = f.work(c);
        QVERIFY(next.dataOffset != u1.dataOffset);
        QCOMPARE(sqlInteger(f, "SELECT COUNT(*) FROM replica_checks"), int64_t{0});
    }

    void heldResultSurvivesARestart() {
        DirectCoordinator f(twinConfig(2));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const auto theta0 = f.coordinator().weights();
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto u1 = f.work(a), t1 = f.work(b);
        const auto da = patternDelta(P, 1.0f), db = patternDelta(P, 0.98f);
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, da, a.key))), std::string("awaiting_replica"));
        // A stop, with what a crash between a file and its row leaves: a held payload without a
        // row, and a half-linked payload in the round.
        f.t().close();
        const auto state = f.t().stateDir();
        {
            std::ofstream((state / "held" / "999.f16").string()) << "orphan";
            std::filesystem::create_directories(state / "rounds" / "0");
            std::ofstream(
                (state / "rounds" / "0" / (std::to_string(u1.workUnitId) + ".f16")).string())
                << "partial";
        }
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        QVERIFY(!std::filesystem::exists(state / "held" / "999.f16"));
        QVERIFY(std::filesystem::exists(state / "held" / (std::to_string(u1.workUnitId) + ".f16")));
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, da, a.key))), std::string("awaiting_replica"));
        auto second = f.upload(b, buildResult(t1, db, b.key));
        QCOMPARE(codeOf(second), std::string("accepted"));
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, da, a.key))), std::string("accepted"));
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        const auto cfg = twinConfig(2);
        const auto expected = oracleRound(theta0, {{da, tokensOf(u1) / 2}, {db, tokensOf(t1) / 2}},
                                          cfg.outer.lr, cfg.outer.momentum);
        QVERIFY2(f.coordinator().weights() == expected, "weights differ from the float oracle");
    }

    void replayedAndBlockedTwins() {
        auto cfg = twinConfig();
        cfg.refuseRepeatedPayloads = true;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        // c's result (no twin yet) is accepted first.
        const auto uc = f.work(c);
        const auto dc = patternDelta(P, 1.1f);
        QCOMPARE(codeOf(f.upload(c, buildResult(uc, dc, c.key))), std::string("accepted"));
        const auto u1 = f.work(a), t1 = f.work(b);
        const auto da = patternDelta(P, 1.0f);
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, da, a.key))), std::string("awaiting_replica"));
        // While held, another result for the unit does not replace the held one.
        QCOMPARE(codeOf(f.upload(a, buildResult(u1, otherDelta(P), a.key))),
                 std::string("awaiting_replica"));
        QCOMPARE(sqlInteger(f, "SELECT COUNT(*) FROM held_results"), int64_t{1});
        // The twin's own result: compared with a's first payload, which agrees.
        const auto db = patternDelta(P, 1.01f);
        auto second = f.upload(b, buildResult(t1, db, b.key));
        QCOMPARE(codeOf(second), std::string("accepted"));
        // Replayed after the decision: the same receipt; another result is a duplicate.
        auto again = f.upload(b, buildResult(t1, db, b.key));
        QCOMPARE(codeOf(again), std::string("accepted"));
        QCOMPARE(again.value(), second.value());
        QCOMPARE(codeOf(f.upload(b, buildResult(t1, patternDelta(P, 1.03f), b.key))),
                 std::string("duplicate"));
        // A twin refused by the gate (it replays c's accepted payload) ends, as its worker drops
        // the result: the held result is accepted alone, as when a twin times out.
        const auto u2 = f.work(a), t2 = f.work(b);
        QCOMPARE(t2.dataOffset, u2.dataOffset);
        const auto da2 = patternDelta(P, 0.98f);
        QCOMPARE(codeOf(f.upload(a, buildResult(u2, da2, a.key))), std::string("awaiting_replica"));
        QCOMPARE(codeOf(f.upload(b, buildResult(t2, dc, b.key))), std::string("replayed_result"));
        QCOMPARE(sqlInteger(f, "SELECT COUNT(*) FROM held_results"), int64_t{0});
        QVERIFY(f.logged("accepted alone: its twin was abandoned"));
        QCOMPARE(codeOf(f.upload(a, buildResult(u2, da2, a.key))), std::string("accepted"));
        QCOMPARE(codeOf(f.upload(b, buildResult(t2, patternDelta(P, 0.99f), b.key))),
                 std::string("work_unit_abandoned"));

        // A held result whose twin's worker is blocked meanwhile (by another pair): accepted
        // alone, and the blocked worker's result for the twin refused.
        auto g2 = twinConfig();
        g2.replicateStrikes = 1;  // the first disagreement blocks (both sides of it)
        DirectCoordinator g(g2);
        QVERIFY2(g.t().ok(), g.t().error().c_str());
        auto h = g.registerClient("honest"), x = g.registerClient("attacker"),
             y = g.registerClient("checker");
        const auto uh = g.work(h), tx = g.work(x);  // x holds the twin of h's unit
        QCOMPARE(tx.dataOffset, uh.dataOffset);
        const auto ux = g.work(x), ty = g.work(y);  // and y the twin of x's own unit
        QCOMPARE(ty.dataOffset, ux.dataOffset);
        QCOMPARE(codeOf(g.upload(h, buildResult(uh, patternDelta(P, 1.0f), h.key))),
                 std::string("awaiting_replica"));
        QCOMPARE(codeOf(g.upload(x, buildResult(ux, otherDelta(P), x.key))),
                 std::string("awaiting_replica"));
        QCOMPARE(codeOf(g.upload(y, buildResult(ty, patternDelta(P, 1.0f), y.key))),
                 std::string("replica_mismatch"));
        QVERIFY(g.logged("client " + std::to_string(x.id) + " blocked"));
        auto alone = g.upload(h, buildResult(uh, patternDelta(P, 1.0f), h.key));
        QCOMPARE(codeOf(alone), std::string("accepted"));
        QCOMPARE(weightOf(alone), tokensOf(uh));
        auto late = g.upload(x, buildResult(tx, patternDelta(P, 1.0f), x.key));
        QCOMPARE(codeOf(late), std::string("client_blocked"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorReplication)
#include "test_coordinator_replication.moc"
