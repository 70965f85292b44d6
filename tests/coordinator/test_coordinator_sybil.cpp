// Sybil limits (coordinator/admission.hpp, work_limits.cpp): registrations per source address
// through a token bucket (429 with Retry-After), the registration secret (401, 403) over HTTPS,
// one unit at a time for a client without an accepted result, and units whose heartbeats report
// no progress reclaimed after --stall-timeout (but not a trained result waiting for its upload).
#include "admission.hpp"
#include "codec.hpp"
#include "direct.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

httplib::Result registerOver(TestCoordinator& t, const std::string& name,
                             const std::string& secret) {
    auto http = t.connect();
    httplib::Headers h;
    if (!secret.empty())
        h.emplace(coord::kRegistrationSecretHeader, secret);
    const auto key = net::SigningKey::generate().value();
    return http->Post("/v1/clients", h, net::RegisterRequest{name, key.publicKey(), "t"}.toJson(),
                      "application/json");
}

std::string codeOf(const httplib::Result& res) {
    if (!res)
        return "no answer";
    auto e = net::ApiError::fromJson(res->body);
    return e ? e->code : "200";
}

}  // namespace

class TestCoordinatorSybil : public QObject {
    Q_OBJECT

  private slots:
    void tokenBucketPerAddress() {
        double now = 1000;
        // 60 an hour: one token a minute, 3 at once.
        coord::RegistrationLimiter limiter(60, 3, [&now] { return now; });
        for (int i = 0; i < 3; ++i)
            QVERIFY(!limiter.admit("10.0.0.1"));
        auto refused = limiter.admit("10.0.0.1");
        QVERIFY(refused);
        QCOMPARE(refused->httpStatus, 429);
        QCOMPARE(refused->code, std::string("too_many_registrations"));
        QCOMPARE(refused->retryAfterSeconds, 60);
        // Another address has its own bucket.
        QVERIFY(!limiter.admit("10.0.0.2"));
        now += 30;  // half a token
        refused = limiter.admit("10.0.0.1");
        QVERIFY(refused);
        QCOMPARE(refused->retryAfterSeconds, 30);
        now += 30;
        QVERIFY(!limiter.admit("10.0.0.1"));
        QVERIFY(limiter.admit("10.0.0.1"));
        // An hour refills the burst, never more.
        now += 3600;
        for (int i = 0; i < 3; ++i)
            QVERIFY(!limiter.admit("10.0.0.1"));
        QVERIFY(limiter.admit("10.0.0.1"));
        // 0 an hour: no limit.
        coord::RegistrationLimiter open(0, 1, [&now] { return now; });
        for (int i = 0; i < 100; ++i)
            QVERIFY(!open.admit("10.0.0.1"));
    }

    void secretCompared() {
        QVERIFY(!coord::checkRegistrationSecret("", ""));
        QVERIFY(!coord::checkRegistrationSecret("", "anything"));
        QVERIFY(!coord::checkRegistrationSecret("s3cret", "s3cret"));
        auto none = coord::checkRegistrationSecret("s3cret", "");
        QVERIFY(none);
        QCOMPARE(none->httpStatus, 401);
        QCOMPARE(none->code, std::string("registration_secret_required"));
        QVERIFY(none->message.find("--register-secret") != std::string::npos);
        for (const char* wrong : {"s3creT", "s3cre", "s3cret!"}) {
            auto w = coord::checkRegistrationSecret("s3cret", wrong);
            QVERIFY(w);
            QCOMPARE(w->httpStatus, 403);
            QCOMPARE(w->code, std::string("bad_registration_secret"));
        }
    }

    void registrationOverHttps() {
        auto cfg = directConfig();
        cfg.backgroundThreads = false;
        TestCoordinator t(cfg, true, [](coord::ServerConfig& sc) {
            sc.registerSecret = "open sesame";
            sc.registerPerHour = 1;
            sc.registerBurst = 3;
        });
        QVERIFY2(t.ok(), t.error().c_str());
        auto missing = registerOver(t, "a", "");
        QCOMPARE(missing->status, 401);
        QCOMPARE(codeOf(missing), std::string("registration_secret_required"));
        auto wrong = registerOver(t, "a", "open sesam");
        QCOMPARE(wrong->status, 403);
        QCOMPARE(codeOf(wrong), std::string("bad_registration_secret"));
        // The refusals took tokens too (guessing the secret is rate-limited): one left.
        auto right = registerOver(t, "a", "open sesame");
        QCOMPARE(right->status, 200);
        QVERIFY(net::RegisterResponse::fromJson(right->body));
        auto limited = registerOver(t, "b", "open sesame");
        QCOMPARE(limited->status, 429);
        QCOMPARE(codeOf(limited), std::string("too_many_registrations"));
        // One an hour: the next token in 3600 s.
        QCOMPARE(limited->get_header_value("Retry-After"), std::string("3600"));
        bool logged = false;
        for (const auto& line : t.log())
            logged =
                logged || line.find("registration from 127.0.0.1 refused") != std::string::npos;
        QVERIFY(logged);
    }

    void newClientsHoldOneUnit() {
        auto cfg = directConfig();
        cfg.newClientWorkUnits = 1;  // the default, which directConfig raises
        cfg.maxWorkUnitsPerClient = 2;
        cfg.quorum = 5;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const auto first = f.work(a);
        QVERIFY(first.workUnitId > 0);
        auto second = f.request(a, 0);
        QVERIFY(!second.ok());
        QCOMPARE(second.refusal().httpStatus, 409);
        QCOMPARE(second.refusal().code, std::string("too_many_work_units"));
        QVERIFY2(second.refusal().message.find("holds 1 at a time until one of its results") !=
                     std::string::npos,
                 second.refusal().message.c_str());
        QVERIFY(
            f.upload(a, buildResult(first, patternDelta(f.coordinator().parameterCount()), a.key))
                .ok());
        // With an accepted result: up to maxWorkUnitsPerClient.
        QVERIFY(f.work(a).workUnitId > 0);
        QVERIFY(f.work(a).workUnitId > 0);
        auto third = f.request(a, 0);
        QVERIFY(!third.ok());
        QVERIFY(third.refusal().message.find("at a time") == std::string::npos);
    }

    void heartbeatsWithoutProgressAreReclaimed() {
        auto cfg = directConfig();
        cfg.heartbeatTimeoutSeconds = 180;
        cfg.stallTimeoutSeconds = 300;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const auto stuck = f.work(a), moving = f.work(b), trained = f.work(c);
        auto beat = [&](const DirectClient& client, int64_t wu, int64_t step) {
            auto r = f.coordinator().progress(client.id, wu,
                                              net::ProgressReport{step, 3.0f, 1}.toJson());
            return r.ok() ? r.value().action : std::string("refused");
        };
        // Heartbeats every 100 s, well inside the heartbeat timeout; a stays at step 1.
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(beat(a, stuck.workUnitId, 1), std::string("continue"));
            QCOMPARE(beat(b, moving.workUnitId, 1 + i), std::string("continue"));
            // c's result is trained and waits behind other uploads: its last step, unchanged.
            QCOMPARE(beat(c, trained.workUnitId, trained.innerSteps), std::string("continue"));
            f.coordinator().tick();
            *f.clock += 100;
        }
        // 300 s after a's step last moved (its first heartbeat): reclaimed; b is not.
        QCOMPARE(beat(b, moving.workUnitId, 4), std::string("continue"));
        f.coordinator().tick();
        QVERIFY(f.logged("work unit " + std::to_string(stuck.workUnitId) +
                         " abandoned: heartbeats without progress for 300 s (still at step 1)"));
        QVERIFY(!f.logged("work unit " + std::to_string(moving.workUnitId) + " abandoned"));
        QVERIFY(!f.logged("work unit " + std::to_string(trained.workUnitId) + " abandoned"));
        QCOMPARE(beat(c, trained.workUnitId, trained.innerSteps), std::string("continue"));
        QCOMPARE(beat(a, stuck.workUnitId, 1), std::string("abandon"));
        QCOMPARE(beat(b, moving.workUnitId, 5), std::string("continue"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorSybil)
#include "test_coordinator_sybil.moc"
