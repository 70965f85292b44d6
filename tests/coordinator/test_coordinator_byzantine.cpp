// The Byzantine gate at the coordinator (coordinator/robust_gate.hpp): the norm bound from the
// run's first result on (relative to the weights, and absolute), all-zero, sign-flipped, NaN and
// replayed deltas refused, large ones down-weighted, the ratchet attack (an attacker uploading
// first each round just under the bound) unable to raise the reference, and the reference and
// the direction kept across a restart. The oracles decode the uploaded halves and compute norms,
// lower medians and weights here, from the rules as docs/protocol.md states them.
#include "checkpoint.hpp"
#include "codec.hpp"
#include "direct.hpp"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace tandem;
using namespace tandem::testing;

namespace {

double normOf(const std::vector<uint16_t>& halves) {
    double s = 0;
    for (uint16_t h : halves)
        s += double(halfToFloat(h)) * double(halfToFloat(h));
    return std::sqrt(s);
}

double lowerMedian(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[(v.size() - 1) / 2];
}

// Numbers in the coordinator's messages: 4 significant digits.
std::string fourDigits(double x) {
    std::ostringstream s;
    s.precision(4);
    s << x;
    return s.str();
}

coord::CoordinatorConfig config(int quorum) {
    auto c = directConfig();
    c.quorum = quorum;
    c.refuseRepeatedPayloads = true;  // the default, which directConfig turns off
    c.minCosine = 0;                  // the direction check, off by default
    c.maxWorkUnitsPerClient = 4;
    return c;
}

double weightsNorm(DirectCoordinator& f, int64_t version) {
    auto ck =
        loadCheckpoint(f.t().stateDir() / "weights" / ("v" + std::to_string(version) + ".ckpt"));
    if (!ck)
        return -1;
    double s = 0;
    for (float x : ck->parameters)
        s += double(x) * double(x);
    return std::sqrt(s);
}

double receiptWeight(const coord::Outcome<std::string>& o) {
    if (!o.ok())
        return -1;
    auto r = net::Receipt::fromJson(o.value());
    return r ? r->weight : -1;
}

std::string codeOf(const coord::Outcome<std::string>& o) {
    return o.ok() ? std::string("accepted") : o.refusal().code;
}

}  // namespace

class TestCoordinatorByzantine : public QObject {
    Q_OBJECT

  private slots:
    void normBoundFromTheFirstResult() {
        DirectCoordinator f(config(3));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const double theta = weightsNorm(f, 0);
        QVERIFY(theta > 1);
        auto a = f.registerClient("a");
        const auto m = f.work(a);
        // The unit pattern's norm, scaled to just above and below ||theta|| (bound 1 x).
        const double unit = normOf(patternDelta(P, 1));
        const auto above = patternDelta(P, float(1.02 * theta / unit));
        const auto below = patternDelta(P, float(0.98 * theta / unit));
        QVERIFY(normOf(above) > theta && normOf(below) < theta);
        auto refused = f.upload(a, buildResult(m, above, a.key));
        QCOMPARE(codeOf(refused), std::string("norm_above_bound"));
        QVERIFY(refused.refusal().message.find("times the norm " + fourDigits(theta)) !=
                std::string::npos);
        QCOMPARE(f.coordinator().status().totalTokens, int64_t{0});
        // A refused result ends its unit (its worker drops the result), and the unit's data goes
        // to the next request.
        QCOMPARE(codeOf(f.upload(a, buildResult(m, below, a.key))),
                 std::string("work_unit_abandoned"));
        const auto m2 = f.work(a);
        QCOMPARE(m2.dataOffset, m.dataOffset);
        QCOMPARE(codeOf(f.upload(a, buildResult(m2, below, a.key))), std::string("accepted"));

        // An absolute bound applies as well, also to a run's first result.
        auto cfg = config(3);
        cfg.maxAbsoluteNorm = 0.5;
        DirectCoordinator g(cfg);
        QVERIFY2(g.t().ok(), g.t().error().c_str());
        auto b = g.registerClient("b");
        const auto mb = g.work(b);
        const auto big = patternDelta(P, float(0.55 / unit)),
                   fine = patternDelta(P, float(0.45 / unit));
        auto r = g.upload(b, buildResult(mb, big, b.key));
        QCOMPARE(codeOf(r), std::string("norm_above_bound"));
        QVERIFY(r.refusal().message.find("above the run's bound 0.5") != std::string::npos);
        QCOMPARE(codeOf(g.upload(b, buildResult(g.work(b), fine, b.key))), std::string("accepted"));
    }

    void zeroFlippedNanAndReplayedRefused() {
        DirectCoordinator f(config(3));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto ma = f.work(a), mb = f.work(b), mc = f.work(c);
        const auto d = patternDelta(P, 1);
        // All zeros is refused even as a run's first result.
        auto zero = f.upload(a, buildResult(ma, std::vector<uint16_t>(size_t(P), 0), a.key));
        QCOMPARE(codeOf(zero), std::string("zero_delta"));
        QCOMPARE(codeOf(f.upload(a, buildResult(f.work(a), d, a.key))), std::string("accepted"));
        // Almost zero: below 0.001 x the reference (the norm of d).
        auto tiny = f.upload(b, buildResult(mb, patternDelta(P, 0.0005f), b.key));
        QCOMPARE(codeOf(tiny), std::string("zero_delta"));
        // A NaN never gets as far as the gate (and leaves the unit open).
        const auto mb2 = f.work(b);
        auto nan = d;
        nan[17] = 0x7e00;
        QCOMPARE(codeOf(f.upload(b, buildResult(mb2, nan, b.key))), std::string("non_finite"));
        // a's payload again, from another client: a replay.
        auto replay = f.upload(b, buildResult(mb2, d, b.key));
        QCOMPARE(codeOf(replay), std::string("replayed_result"));
        QVERIFY(replay.refusal().message.find("work unit ") != std::string::npos);
        QCOMPARE(f.coordinator().status().totalTokens,
                 int64_t{ma.innerSteps} * ma.batch * ma.seqLen);
        QCOMPARE(codeOf(f.upload(b, buildResult(f.work(b), patternDelta(P, 1.1f), b.key))),
                 std::string("accepted"));
        QCOMPARE(codeOf(f.upload(c, buildResult(mc, patternDelta(P, 0.9f), c.key))),
                 std::string("accepted"));
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        // Sign flipped: cosine -1 to the last outer step (a positive multiple of the mean of d,
        // 1.1 d and 0.9 d, as the momentum started at zero).
        auto a2 = f.work(a);
        auto first = f.upload(a, buildResult(a2, patternDelta(P, -1.05f), a.key));
        QCOMPARE(codeOf(first), std::string("wrong_direction"));
        QVERIFY2(first.refusal().message.find("cosine similarity to the last outer step is -1") !=
                     std::string::npos,
                 first.refusal().message.c_str());
        QCOMPARE(codeOf(f.upload(a, buildResult(f.work(a), patternDelta(P, 1.05f), a.key))),
                 std::string("accepted"));
    }

    // An attacker uploads first in every round at 9.9 x the reference it sees: accepted at a
    // reduced weight, but the reference stays among the honest norms, and 9.9 x its own last
    // norm is refused. Before the gate, this raised the reference tenfold per round.
    void theRatchetDoesNotRatchet() {
        // One attacker and one honest client per round, as in the report of issue 19: an upper
        // median of their two norms is the attacker's.
        DirectCoordinator f(config(2));
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const double unit = normOf(patternDelta(P, 1));
        auto attacker = f.registerClient("attacker");
        std::vector<DirectClient> honest;
        for (int k = 0; k < 1; ++k)
            honest.push_back(f.registerClient("honest" + std::to_string(k)));
        std::vector<std::pair<int64_t, double>> accepted;  // (round, norm)
        double maxHonest = 0;
        const int64_t window = 4;
        for (int64_t round = 0; round < 6; ++round) {
            QCOMPARE(f.coordinator().currentVersion(), round);
            std::vector<double> recent;
            for (auto& [r, n] : accepted)
                if (r > round - window)
                    recent.push_back(n);
            if (!recent.empty()) {  // just beyond 10 x the honest reference: refused
                const double honestRef = lowerMedian(recent);
                auto up = patternDelta(P, float(10.5 * honestRef / unit));
                auto r = f.upload(attacker, buildResult(f.work(attacker), up, attacker.key));
                QCOMPARE(codeOf(r), std::string("outlier_norm"));
                QVERIFY2(r.refusal().message.find("times the reference " + fourDigits(honestRef)) !=
                             std::string::npos,
                         r.refusal().message.c_str());
            }
            const double ref = recent.empty() ? 1.5 * unit : lowerMedian(recent);
            const auto m = f.work(attacker);
            const auto attack = patternDelta(P, float(9.9 * ref / unit));
            auto r = f.upload(attacker, buildResult(m, attack, attacker.key));
            QCOMPARE(codeOf(r), std::string("accepted"));
            const double attackNorm = normOf(attack);
            accepted.emplace_back(round, attackNorm);
            const double tokens = double(m.innerSteps) * m.batch * m.seqLen;
            if (!recent.empty())  // down-weighted to count as 3 x the reference
                QVERIFY(std::abs(receiptWeight(r) - tokens * 3 * ref / attackNorm) < 1e-4 * tokens);
            else
                QCOMPARE(receiptWeight(r), tokens);
            for (size_t k = 0; k < honest.size(); ++k) {
                const auto mh = f.work(honest[k]);
                const auto d = patternDelta(P, 1.0f + 0.01f * float(k + 4 * round));
                QCOMPARE(codeOf(f.upload(honest[k], buildResult(mh, d, honest[k].key))),
                         std::string("accepted"));
                accepted.emplace_back(round, normOf(d));
                maxHonest = std::max(maxHonest, normOf(d));
            }
            if (!recent.empty())  // round 0 had none: the attacker scaled its own norm
                QVERIFY2(ref <= maxHonest,
                         ("round " + std::to_string(round) + ": reference " + std::to_string(ref))
                             .c_str());
        }
        QCOMPARE(f.coordinator().currentVersion(), int64_t{6});
    }

    // An upload measures its cosine as it streams, against the last outer step it began with; a
    // round that closes meanwhile moves the direction, and the gate must judge the result by the
    // new one (as an upload that began after the close would be judged).
    void aCloseDuringAnUploadMovesTheDirection() {
        auto cfg = config(3);
        cfg.outer = OuterConfig{0.7f, 0.0f};  // no momentum: the step is the round's mean delta
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        // p = (i % 7 - 3) and q = (i % 5 - 2) are orthogonal over every 35 values.
        auto mix = [P](float pScale, float qScale) {
            std::vector<uint16_t> d(static_cast<size_t>(P));
            for (int64_t i = 0; i < P; ++i)
                d[size_t(i)] =
                    floatToHalf(0.001f * (pScale * float(i % 7 - 3) + qScale * float(i % 5 - 2)));
            return d;
        };
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c"),
             d = f.registerClient("d");
        float scale = 1.0f;
        for (auto* client : {&b, &c, &d}) {  // round 0: the step points along p
            const auto m = f.work(*client);
            QCOMPARE(codeOf(f.upload(*client, buildResult(m, mix(scale, 0), client->key))),
                     std::string("accepted"));
            scale += 0.1f;
        }
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        // a's result u = p - 2q: cosine +0.58 to p, -0.73 to q + 0.1p (round 1's step).
        const auto ma = f.work(a);
        const auto r = buildResult(ma, mix(1, -2), a.key);
        auto session =
            f.coordinator().beginUpload(a.id, ma.workUnitId, int64_t(r.body.size()), r.signature);
        QVERIFY(session.ok());
        const size_t half = r.body.size() / 2;
        QVERIFY(!session.value()->feed(std::span(r.body).first(half)));
        scale = 1.0f;
        for (auto* client : {&b, &c, &d}) {  // round 1: the step points along q + 0.1p
            const auto m = f.work(*client);
            QCOMPARE(
                codeOf(f.upload(*client, buildResult(m, mix(0.1f * scale, scale), client->key))),
                std::string("accepted"));
            scale += 0.1f;
        }
        QCOMPARE(f.coordinator().currentVersion(), int64_t{2});
        QVERIFY(!session.value()->feed(std::span(r.body).subspan(half)));
        auto judged = session.value()->finish(true);
        QCOMPARE(codeOf(judged), std::string("wrong_direction"));
        QVERIFY2(judged.refusal().message.find(
                     "cosine similarity to the last outer step is -0.7") != std::string::npos,
                 judged.refusal().message.c_str());
        session.value().reset();
        // The same payload begun after the close is judged the same (on a new unit: the refusal
        // ended ma).
        QCOMPARE(codeOf(f.upload(a, r)), std::string("work_unit_abandoned"));
        QCOMPARE(codeOf(f.upload(a, buildResult(f.work(a), mix(1, -2), a.key))),
                 std::string("wrong_direction"));
    }

    void aRestartKeepsTheReferenceAndTheDirection() {
        auto cfg = config(3);
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const int64_t P = f.coordinator().parameterCount();
        const double unit = normOf(patternDelta(P, 1));
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        std::vector<double> norms;
        int n = 0;
        for (auto* client : {&a, &b, &c}) {
            const auto m = f.work(*client);
            const auto d = patternDelta(P, 1.0f + 0.2f * float(n++));
            QCOMPARE(codeOf(f.upload(*client, buildResult(m, d, client->key))),
                     std::string("accepted"));
            norms.push_back(normOf(d));
        }
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        f.t().close();
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const double ref = lowerMedian(norms);  // the middle one: 1.2 x unit
        const auto m = f.work(a);
        // Against the reference of round 0, which only the database still holds.
        auto over = f.upload(a, buildResult(m, patternDelta(P, float(10.3 * ref / unit)), a.key));
        QCOMPARE(codeOf(over), std::string("outlier_norm"));
        QVERIFY(over.refusal().message.find("times the reference " + fourDigits(ref)) !=
                std::string::npos);
        // The last outer step, rebuilt from the weights of versions 0 and 1.
        QCOMPARE(codeOf(f.upload(a, buildResult(f.work(a), patternDelta(P, -1.3f), a.key))),
                 std::string("wrong_direction"));
        QCOMPARE(codeOf(f.upload(a, buildResult(f.work(a), patternDelta(P, 1.3f), a.key))),
                 std::string("accepted"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorByzantine)
#include "test_coordinator_byzantine.moc"
