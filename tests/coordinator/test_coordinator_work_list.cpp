// Work units over the HTTPS API: requests (sizing, limits, no work), the request id that makes a
// request idempotent, listing and releasing a client's units, heartbeats and the timeout that
// reassigns a silent unit's data.
#include "api_helpers.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

class TestCoordinatorWorkList : public QObject {
    Q_OBJECT
  private slots:
    void workRequests() {
        auto cfg = smallConfig();
        cfg.maxWorkUnitsPerClient = 2;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto c = t.registerClient("alice");
        net::WorkRequest w{"cpu", 1 << 30, 0, 1 << 30};
        auto noToken = t.connect()->Post("/v1/work", w.toJson(), "application/json");
        QCOMPARE(noToken->status, 401);
        QCOMPARE(errorCode(noToken), std::string("unauthorized"));
        QCOMPARE(noToken->get_header_value("WWW-Authenticate"), std::string("Bearer"));
        auto badToken = t.connect()->Post("/v1/work", {{"Authorization", "Bearer nope"}},
                                          w.toJson(), "application/json");
        QCOMPARE(badToken->status, 401);
        QVERIFY(contains(badToken->body, "not known"));
        auto malformed =
            c.http->Post("/v1/work", c.auth(), "{\"device\":\"cpu\"}", "application/json");
        QCOMPARE(malformed->status, 400);
        QVERIFY(contains(malformed->body, "memory_bytes"));

        auto res = c.http->Post("/v1/work", c.auth(), w.toJson(), "application/json");
        QVERIFY(res);
        QCOMPARE(res->status, 200);
        auto m = net::Manifest::fromJson(res->body);
        QVERIFY2(m.ok(), res->body.c_str());
        QVERIFY(m->verify(t.coordinator().publicKey()));
        QCOMPARE(m->baseVersion, 0);
        QCOMPARE(m->innerSteps, 4);  // no throughput reported: the full H
        QCOMPARE(m->batch, 2);
        QCOMPARE(m->seqLen, 16);
        QCOMPARE(m->dataLength, int64_t(4 * 2 * 16));
        QCOMPARE(m->maxUploadBytes, t.coordinator().maxUploadBytes());
        // Sized from throughput: 2 tokens/s x 300 s / 32 tokens per step = 18 -> clamped to H=4;
        // a slow worker gets the minimum.
        auto m2res = c.http->Post("/v1/work", c.auth(),
                                  net::WorkRequest{"cpu", 1 << 30, 0.01, 1 << 30}.toJson(),
                                  "application/json");
        auto m2 = net::Manifest::fromJson(m2res->body);
        QVERIFY(m2.ok());
        QCOMPARE(m2->innerSteps, 1);
        QVERIFY(m2->dataOffset >= m->dataOffset + m->dataLength);  // no overlap in a round
        auto third = c.http->Post("/v1/work", c.auth(), w.toJson(), "application/json");
        QCOMPARE(third->status, 409);
        QCOMPARE(errorCode(third), std::string("too_many_work_units"));
    }

    void noWorkWhenTheDataIsAssigned() {
        auto cfg = smallConfig();
        cfg.innerSteps = 4000;  // 128000 train bytes per work unit; the train split is ~190000
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        QVERIFY(requestWork(a).workUnitId > 0);
        auto res =
            b.http->Post("/v1/work", b.auth(),
                         net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson(), "application/json");
        QVERIFY(res);
        QCOMPARE(res->status, 204);
        QVERIFY(std::atoi(res->get_header_value("Retry-After").c_str()) >= 5);
    }

    void progressHeartbeats() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto m = requestWork(a);
        const std::string url = "/v1/work/" + std::to_string(m.workUnitId) + "/progress";
        net::ProgressReport p{2, 4.5f, 100.0};
        auto ok = a.http->Post(url.c_str(), a.auth(), p.toJson(), "application/json");
        QCOMPARE(ok->status, 200);
        QCOMPARE(net::ProgressReply::fromJson(ok->body)->action, std::string("continue"));
        auto other = b.http->Post(url.c_str(), b.auth(), p.toJson(), "application/json");
        QCOMPARE(other->status, 403);
        QCOMPARE(errorCode(other), std::string("not_your_work_unit"));
        auto unknown =
            a.http->Post("/v1/work/999999/progress", a.auth(), p.toJson(), "application/json");
        QCOMPARE(unknown->status, 404);
        QCOMPARE(errorCode(unknown), std::string("unknown_work_unit"));
        auto bad =
            a.http->Post(url.c_str(), a.auth(), "{\"step\":-1,\"loss\":1,\"tokens_per_second\":1}",
                         "application/json");
        QCOMPARE(bad->status, 400);
        auto anonymous = t.connect()->Post(url.c_str(), p.toJson(), "application/json");
        QCOMPARE(anonymous->status, 401);
        QCOMPARE(t.coordinator().status().activeWorkers, 1);
    }

    void heartbeatTimeoutReassignsData() {
        auto cfg = smallConfig();
        int64_t now = 1'800'000'000;
        cfg.clock = [&now] { return now; };
        cfg.heartbeatTimeoutSeconds = 60;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto m = requestWork(a);
        now += 61;
        t.coordinator().tick();
        auto hb = a.http->Post(("/v1/work/" + std::to_string(m.workUnitId) + "/progress").c_str(),
                               a.auth(), net::ProgressReport{1, 1, 1}.toJson(), "application/json");
        auto reply = net::ProgressReply::fromJson(hb->body);
        QCOMPARE(reply->action, std::string("abandon"));
        QVERIFY(contains(reply->reason, "no heartbeat"));
        auto m2 = requestWork(b);  // gets the abandoned data range
        QCOMPARE(m2.dataOffset, m.dataOffset);
        QCOMPARE(m2.dataLength, m.dataLength);
        const int64_t P = t.coordinator().parameterCount();
        auto late = upload(a, m.workUnitId, buildResult(m, smallDelta(P), a.key));
        QCOMPARE(late->status, 409);
        QCOMPARE(errorCode(late), std::string("work_unit_abandoned"));
        // Round deadline: with one result the round closes when it expires.
        QCOMPARE(upload(b, m2.workUnitId, buildResult(m2, smallDelta(P), b.key))->status, 200);
        QCOMPARE(t.coordinator().currentVersion(), 0);
        now += cfg.roundTimeoutSeconds;
        t.coordinator().tick();
        QCOMPARE(t.coordinator().currentVersion(), 1);
    }

    // POST /v1/work with an Idempotency-Key: a repeat gets the same unit (also at the limit, where
    // a new request is refused), another id a new one, a bad id a 400 naming the field; ids are per
    // client; once the unit is gone (released, abandoned) the id brings a new unit.
    void requestIdMakesTheRequestIdempotent() {
        auto cfg = smallConfig();
        cfg.maxWorkUnitsPerClient = 2;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto first = requestWork(a, "req-1");
        QVERIFY(first.workUnitId > 0);
        auto again = requestWork(a, "req-1");
        QCOMPARE(again.workUnitId, first.workUnitId);
        QCOMPARE(again.dataOffset, first.dataOffset);
        QCOMPARE(again.seed, first.seed);
        QVERIFY(again.verify(t.coordinator().publicKey()));
        auto second = requestWork(a, "req-2");
        QVERIFY(second.workUnitId > first.workUnitId);
        QVERIFY(second.dataOffset >= first.dataOffset + first.dataLength);  // a new range
        // At the limit: a new request is refused, a repeat still answered.
        const net::WorkRequest w{"cpu", 1 << 30, 0, 1 << 30};
        httplib::Headers withId = a.auth();
        withId.emplace(net::kRequestIdHeader, "req-3");
        auto third = a.http->Post("/v1/work", withId, w.toJson(), "application/json");
        QCOMPARE(third->status, 409);
        QCOMPARE(errorCode(third), std::string("too_many_work_units"));
        QVERIFY(contains(third->body, "DELETE /v1/work/{id}"));
        QCOMPARE(requestWork(a, "req-2").workUnitId, second.workUnitId);
        // Another client's same id is its own request.
        auto other = requestWork(b, "req-1");
        QVERIFY(other.workUnitId > second.workUnitId);
        // Bad ids: refused before anything is assigned.
        for (const std::string& bad :
             std::vector<std::string>{"a b", "\xc3\xa9", "a.b", std::string(65, 'x')}) {
            httplib::Headers h = b.auth();
            h.emplace(net::kRequestIdHeader, bad);
            auto res = b.http->Post("/v1/work", h, w.toJson(), "application/json");
            QCOMPARE(res->status, 400);
            QVERIFY2(contains(res->body, "the Idempotency-Key header must be 1 to 64 letters"),
                     res->body.c_str());
        }
        QCOMPARE(t.coordinator().heldWork(b.id).value().units.size(), size_t{1});
        // Released: the same id now brings a new unit (on the released data range).
        QVERIFY(t.coordinator().releaseWork(a.id, first.workUnitId).ok());
        auto renewed = requestWork(a, "req-1");
        QVERIFY(renewed.workUnitId > other.workUnitId);
        QCOMPARE(renewed.dataOffset, first.dataOffset);
        QCOMPARE(requestWork(a, "req-1").workUnitId, renewed.workUnitId);
        // Without an id every request is new (the limit holds).
        auto plain =
            a.http->Post("/v1/work", a.auth(),
                         net::WorkRequest{"cpu", 1 << 30, 0, 1 << 30}.toJson(), "application/json");
        QCOMPARE(plain->status, 409);
    }

    // A repeat renews the unit's lease: asking again is a sign of life.
    void repeatedRequestRenewsTheLease() {
        auto cfg = smallConfig();
        int64_t now = 1'800'000'000;
        cfg.clock = [&now] { return now; };
        cfg.heartbeatTimeoutSeconds = 60;
        TestCoordinator t(cfg);
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto m = requestWork(a, "lease");
        now += 50;
        QCOMPARE(requestWork(a, "lease").workUnitId, m.workUnitId);
        now += 50;  // 100 s after the assignment, 50 s after the repeat
        t.coordinator().tick();
        auto held = t.coordinator().heldWork(a.id).value().units;
        QCOMPARE(held.size(), size_t{1});
        QCOMPARE(held[0].heartbeatUnix, now - 50);
        now += 11;
        t.coordinator().tick();
        QVERIFY(t.coordinator().heldWork(a.id).value().units.empty());
    }

    // GET /v1/work lists the caller's assigned units (not another client's, not accepted ones);
    // DELETE /v1/work/{id} releases one: 404 unknown, 403 another client's, 409 not assigned;
    // a released unit is abandoned like a timed-out one (its heartbeat says so, its upload is
    // refused, its data range goes to the next request).
    void listAndRelease() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto b = t.registerClient("b");
        auto list = [](ApiClient& c) {
            auto res = c.http->Get("/v1/work", c.auth());
            if (!res || res->status != 200)
                return std::vector<net::HeldWorkUnit>{{-1, "", 0, 0, 0, 0}};
            return net::HeldWorkUnits::fromJson(res->body).value().units;
        };
        auto release = [](ApiClient& c, int64_t id) {
            return c.http->Delete(("/v1/work/" + std::to_string(id)).c_str(), c.auth());
        };
        QVERIFY(list(a).empty());
        auto m1 = requestWork(a, "r1");
        auto m2 = requestWork(a);
        auto mb = requestWork(b, "rb");
        auto held = list(a);
        QCOMPARE(held.size(), size_t{2});
        QCOMPARE(held[0].workUnitId, m1.workUnitId);
        QCOMPARE(held[0].requestId, std::string("r1"));
        QCOMPARE(held[0].deadlineUnix, m1.deadlineUnix);
        QCOMPARE(held[0].baseVersion, int64_t{0});
        QCOMPARE(held[1].workUnitId, m2.workUnitId);
        QCOMPARE(held[1].requestId, std::string());
        QCOMPARE(list(b).size(), size_t{1});
        // Refusals, none of which changes anything.
        QCOMPARE(t.connect()->Get("/v1/work")->status, 401);
        QCOMPARE(t.connect()->Delete(("/v1/work/" + std::to_string(m1.workUnitId)).c_str())->status,
                 401);
        auto foreign = release(b, m1.workUnitId);
        QCOMPARE(foreign->status, 403);
        QCOMPARE(errorCode(foreign), std::string("not_your_work_unit"));
        auto unknown = release(a, 999999);
        QCOMPARE(unknown->status, 404);
        QCOMPARE(errorCode(unknown), std::string("unknown_work_unit"));
        QCOMPARE(list(a).size(), size_t{2});
        // Released.
        auto ok = release(a, m1.workUnitId);
        QCOMPARE(ok->status, 204);
        held = list(a);
        QCOMPARE(held.size(), size_t{1});
        QCOMPARE(held[0].workUnitId, m2.workUnitId);
        auto twice = release(a, m1.workUnitId);
        QCOMPARE(twice->status, 409);
        QCOMPARE(errorCode(twice), std::string("not_assigned"));
        QVERIFY(contains(twice->body, "abandoned"));
        auto hb = a.http->Post(("/v1/work/" + std::to_string(m1.workUnitId) + "/progress").c_str(),
                               a.auth(), net::ProgressReport{1, 1, 1}.toJson(), "application/json");
        auto reply = net::ProgressReply::fromJson(hb->body);
        QCOMPARE(reply->action, std::string("abandon"));
        QVERIFY(contains(reply->reason, "released by its client"));
        const int64_t P = t.coordinator().parameterCount();
        auto late = upload(a, m1.workUnitId, buildResult(m1, smallDelta(P), a.key));
        QCOMPARE(late->status, 409);
        QCOMPARE(errorCode(late), std::string("work_unit_abandoned"));
        auto next = requestWork(b);  // the released data range, first
        QCOMPARE(next.dataOffset, m1.dataOffset);
        QCOMPARE(next.dataLength, m1.dataLength);
        // An accepted unit is not held and cannot be released.
        QCOMPARE(upload(b, mb.workUnitId, buildResult(mb, smallDelta(P), b.key))->status, 200);
        QCOMPARE(list(b).size(), size_t{1});
        auto accepted = release(b, mb.workUnitId);
        QCOMPARE(accepted->status, 409);
        QVERIFY(contains(accepted->body, "accepted"));
        QVERIFY(t.coordinator().releaseWork(b.id, next.workUnitId).ok());
        QVERIFY(list(b).empty());
    }

    // A body on GET or DELETE /v1/work is bounded like every JSON body.
    void listAndReleaseBodiesAreBounded() {
        TestCoordinator t(smallConfig());
        QVERIFY2(t.ok(), t.error().c_str());
        auto a = t.registerClient("a");
        auto m = requestWork(a);
        const std::string big(128 * 1024, 'x');
        auto res = a.http->Delete(("/v1/work/" + std::to_string(m.workUnitId)).c_str(), a.auth(),
                                  big, "application/json");
        QCOMPARE(res->status, 413);
        QCOMPARE(t.coordinator().heldWork(a.id).value().units.size(), size_t{1});
    }
};

QTEST_APPLESS_MAIN(TestCoordinatorWorkList)
#include "test_coordinator_work_list.moc"
