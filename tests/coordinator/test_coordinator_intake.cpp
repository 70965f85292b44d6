// Result intake through the Coordinator without HTTP: the checks before the body, upload slots
// (per work unit, per client, in all), an accepted result (signed receipt, weight, stored
// payload, idempotent retry), a refusal that changes nothing, the norm bound, a full disk (507,
// nothing counted), and a work unit abandoned by a round close while its upload was arriving.
#include "codec.hpp"
#include "direct.hpp"
#include "small_disk.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

coord::CoordinatorConfig config() {
    auto c = directConfig();
    c.maxUploadsPerClient = 1;
    c.maxConcurrentUploads = 2;
    return c;
}

int64_t totalTokens(DirectCoordinator& f) {
    return f.coordinator().status().totalTokens;
}

// Moves the (closed) state directory onto a tmpfs of `bytes` (small_disk.hpp). Empty when it
// worked, otherwise why not.
std::string moveOntoSmallDisk(const std::filesystem::path& state, int64_t bytes) {
    const auto aside = state.parent_path() / "aside";
    std::filesystem::rename(state, aside);
    if (auto why = mountSmallDisk(state, bytes); !why.empty()) {
        std::filesystem::remove(state);
        std::filesystem::rename(aside, state);
        return why;
    }
    std::filesystem::copy(aside, state, std::filesystem::copy_options::recursive);
    return {};
}

}  // namespace

class TestCoordinatorIntake : public QObject {
    Q_OBJECT

  private slots:
    void checksBeforeTheBody() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const auto m = f.work(a);
        const int64_t size = f.coordinator().maxUploadBytes();
        QCOMPARE(size, int64_t{128 + 2 * 7664});  // header + 2 bytes per parameter
        const auto r = buildResult(m, patternDelta(f.coordinator().parameterCount(), 1), a.key);
        auto& c = f.coordinator();
        auto check = [](const coord::Outcome<std::unique_ptr<coord::UploadSession>>& o, int status,
                        const char* code) {
            QVERIFY(!o.ok());
            QCOMPARE(o.refusal().httpStatus, status);
            QCOMPARE(o.refusal().code, std::string(code));
        };
        check(c.beginUpload(a.id, m.workUnitId, -1, r.signature), 411, "length_required");
        check(c.beginUpload(a.id, m.workUnitId, size + 1, r.signature), 413, "too_large");
        check(c.beginUpload(a.id, m.workUnitId, size - 1, r.signature), 400, "wrong_size");
        check(c.beginUpload(a.id, m.workUnitId, size, ""), 400, "bad_signature");
        check(c.beginUpload(a.id, m.workUnitId, size, "not base64!"), 400, "bad_signature");
        check(c.beginUpload(a.id, 999, size, r.signature), 404, "unknown_work_unit");
        check(c.beginUpload(b.id, m.workUnitId, size, r.signature), 403, "not_your_work_unit");
        // A dry run answers "go ahead" without a session and takes no slot.
        for (int i = 0; i < 3; ++i) {
            auto dry = c.beginUpload(a.id, m.workUnitId, size, r.signature, true);
            QVERIFY(dry.ok());
            QVERIFY(!dry.value());
        }
        QVERIFY(f.upload(a, r).ok());
    }

    void uploadSlots() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b"), c = f.registerClient("c");
        const int64_t P = f.coordinator().parameterCount();
        const auto a1 = f.work(a), a2 = f.work(a), b1 = f.work(b), c1 = f.work(c);
        const auto ra1 = buildResult(a1, patternDelta(P, 1), a.key);
        const auto ra2 = buildResult(a2, patternDelta(P, 1), a.key);
        const auto rb1 = buildResult(b1, patternDelta(P, 1), b.key);
        const auto rc1 = buildResult(c1, patternDelta(P, 1), c.key);
        const int64_t size = f.coordinator().maxUploadBytes();
        auto& co = f.coordinator();
        auto first = co.beginUpload(a.id, a1.workUnitId, size, ra1.signature);
        QVERIFY(first.ok() && first.value());
        auto again = co.beginUpload(a.id, a1.workUnitId, size, ra1.signature);
        QCOMPARE(again.refusal().httpStatus, 409);
        QCOMPARE(again.refusal().code, std::string("upload_in_progress"));
        auto second = co.beginUpload(a.id, a2.workUnitId, size, ra2.signature);
        QCOMPARE(second.refusal().httpStatus, 429);
        QCOMPARE(second.refusal().code, std::string("too_many_uploads"));
        QCOMPARE(second.refusal().retryAfterSeconds, 10);
        auto fromB = co.beginUpload(b.id, b1.workUnitId, size, rb1.signature);
        QVERIFY(fromB.ok() && fromB.value());
        auto fromC = co.beginUpload(c.id, c1.workUnitId, size, rc1.signature);
        QCOMPARE(fromC.refusal().httpStatus, 503);
        QCOMPARE(fromC.refusal().code, std::string("busy"));
        QCOMPARE(fromC.refusal().retryAfterSeconds, 15);
        // A session gives its slot back when it ends, finished or not.
        first.value().reset();
        fromB.value().reset();
        QVERIFY(f.upload(a, ra2).ok());
        QVERIFY(f.upload(c, rc1).ok());
        QVERIFY(f.upload(a, ra1).ok());
    }

    void acceptsAResult() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const int64_t P = f.coordinator().parameterCount();
        const auto m = f.work(a);
        const auto payload = patternDelta(P, 1);
        const auto r = buildResult(m, payload, a.key, 100);
        auto accepted = f.upload(a, r);
        QVERIFY(accepted.ok());
        auto receipt = net::Receipt::fromJson(accepted.value());
        QVERIFY(receipt);
        QVERIFY(receipt->verify(f.coordinator().publicKey()));
        QCOMPARE(receipt->workUnitId, m.workUnitId);
        QCOMPARE(receipt->clientId, a.id);
        QCOMPARE(receipt->round, int64_t{0});
        QCOMPARE(receipt->weight, 100.0);  // tokens, not stale
        QCOMPARE(receipt->timeUnix, *f.clock);
        QVERIFY(receipt->resultDigest == net::resultDigest(r.header));
        QCOMPARE(totalTokens(f), int64_t{100});
        // The payload is stored for a rebuild after a restart; nothing is left in staging.
        const auto stored = f.readStateFile("rounds/0/" + std::to_string(m.workUnitId) + ".f16");
        QVERIFY(stored == std::vector<uint8_t>(r.body.begin() + 128, r.body.end()));
        QVERIFY(std::filesystem::is_empty(f.t().stateDir() / "uploads"));
        auto hb = f.coordinator().progress(a.id, m.workUnitId, net::ProgressReport{}.toJson());
        QCOMPARE(hb.value().action, std::string("abandon"));

        // The same result again: the same receipt, counted once.
        auto retry = f.upload(a, r);
        QVERIFY(retry.ok());
        QCOMPARE(retry.value(), accepted.value());
        QCOMPARE(totalTokens(f), int64_t{100});
        auto other = f.upload(a, buildResult(m, patternDelta(P, 2), a.key, 100));
        QCOMPARE(other.refusal().httpStatus, 409);
        QCOMPARE(other.refusal().code, std::string("duplicate"));
        QCOMPARE(totalTokens(f), int64_t{100});
    }

    // A worker paused mid-unit uploads what it has: a result with fewer steps than assigned is
    // accepted from the stated minimum on (the heartbeat states it: the run's shortest unit, 2
    // steps here) and weighted by the tokens it trained; below it, 422 too_few_steps.
    void acceptsAPartialResultFromTheStatedMinimum() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const int64_t P = f.coordinator().parameterCount();
        const auto m = f.work(a);
        QCOMPARE(m.innerSteps, 8);
        auto hb = f.coordinator().progress(a.id, m.workUnitId, net::ProgressReport{1}.toJson());
        QVERIFY(hb.ok());
        QCOMPARE(hb.value().action, std::string("continue"));
        QCOMPARE(hb.value().minSteps, 2);
        const int64_t tokensPerStep = int64_t{m.batch} * m.seqLen;  // 2 x 16
        auto partial = [&](int steps, int64_t tokens) {
            auto r = buildResult(m, patternDelta(P, 1), a.key, tokens);
            r.header.steps = steps;
            r.body = net::buildResult(r.header, patternDelta(P, 1));
            r.header = *net::parseResultHeader(r.body);
            r.signature = net::toBase64(a.key.sign(net::resultDigest(r.header)));
            return r;
        };
        auto one = f.upload(a, partial(1, tokensPerStep));
        QCOMPARE(one.refusal().httpStatus, 422);
        QCOMPARE(one.refusal().code, std::string("too_few_steps"));
        QVERIFY2(
            one.refusal().message.find("needs at least 2 (of 8 assigned)") != std::string::npos,
            one.refusal().message.c_str());
        // More tokens than its steps can have trained: refused, whatever H allows.
        auto inflated = f.upload(a, partial(3, 4 * tokensPerStep));
        QCOMPARE(inflated.refusal().code, std::string("bad_header"));
        QVERIFY2(
            inflated.refusal().message.find("a step trains at most 32 tokens") != std::string::npos,
            inflated.refusal().message.c_str());
        QCOMPARE(totalTokens(f), int64_t{0});
        auto three = f.upload(a, partial(3, 3 * tokensPerStep));
        QVERIFY2(three.ok(), three.ok() ? "" : three.refusal().message.c_str());
        auto receipt = net::Receipt::fromJson(three.value());
        QCOMPARE(receipt->weight, double(3 * tokensPerStep));
        QCOMPARE(receipt->credit, std::optional<int64_t>(3 * tokensPerStep));
        QCOMPARE(totalTokens(f), 3 * tokensPerStep);
    }

    void aRefusalChangesNothing() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const int64_t P = f.coordinator().parameterCount();
        const auto m = f.work(a);
        auto damaged = buildResult(m, patternDelta(P, 1), a.key);
        damaged.body[200] ^= 0x10;  // the header still names the payload's old SHA-256
        auto refused = f.upload(a, damaged);
        QCOMPARE(refused.refusal().httpStatus, 422);
        QCOMPARE(refused.refusal().code, std::string("digest_mismatch"));
        QCOMPARE(totalTokens(f), int64_t{0});
        QVERIFY(std::filesystem::is_empty(f.t().stateDir() / "uploads"));
        QVERIFY(!std::filesystem::exists(f.t().stateDir() / "rounds" / "0" /
                                         (std::to_string(m.workUnitId) + ".f16")));
        // The work unit is still open for the right result.
        QVERIFY(f.upload(a, buildResult(m, patternDelta(P, 1), a.key)).ok());
        QCOMPARE(totalTokens(f), int64_t{m.innerSteps} * m.batch * m.seqLen);
    }

    void refusesAnOutlierNorm() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const int64_t P = f.coordinator().parameterCount();
        const auto ma = f.work(a), mb = f.work(b);
        QVERIFY(f.upload(a, buildResult(ma, patternDelta(P, 1), a.key)).ok());
        // Ten times the median is allowed; 10.5 times is not (maxNormRatio 10).
        auto outlier = f.upload(b, buildResult(mb, patternDelta(P, 10.5f), b.key));
        QCOMPARE(outlier.refusal().httpStatus, 422);
        QCOMPARE(outlier.refusal().code, std::string("outlier_norm"));
        QVERIFY(outlier.refusal().message.find("times the reference") != std::string::npos);
        QVERIFY(f.upload(b, buildResult(f.work(b), patternDelta(P, 9.5f), b.key)).ok());
    }

    // A full disk: the upload is answered 507 before its body (its 2P bytes cannot be reserved),
    // nothing is counted or left in staging, and once there is room the same result is accepted.
    void aFullDiskAnswers507() {
        DirectCoordinator f(config());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        const auto state = f.t().stateDir();
        f.t().close();
        int64_t used = 0;
        for (const auto& e : std::filesystem::recursive_directory_iterator(state))
            if (e.is_regular_file())
                used += static_cast<int64_t>(e.file_size());
        if (auto why = moveOntoSmallDisk(state, used + (4 << 20)); !why.empty())
            QSKIP(why.c_str());
        f.t().open();
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        const int64_t P = f.coordinator().parameterCount();
        const auto m = f.work(a);
        const auto r = buildResult(m, patternDelta(P, 1), a.key);
        // Fill the disk to less than one payload (2P bytes) free.
        const auto filler = state / "filler";
        {
            std::ofstream out(filler, std::ios::binary);
            const std::vector<char> block(4096, 'x');
            while (freeBytes(state) >= 2 * P && out.write(block.data(), block.size()))
                out.flush();
        }
        QVERIFY(freeBytes(state) < 2 * P);
        auto full = f.upload(a, r);
        QVERIFY(!full.ok());
        QCOMPARE(full.refusal().httpStatus, 507);
        QCOMPARE(full.refusal().code, std::string("insufficient_storage"));
        QVERIFY2(full.refusal().message.find("disk is full") != std::string::npos,
                 full.refusal().message.c_str());
        QCOMPARE(totalTokens(f), int64_t{0});
        QVERIFY(std::filesystem::is_empty(state / "uploads"));
        QVERIFY(!std::filesystem::exists(state / "rounds" / "0" /
                                         (std::to_string(m.workUnitId) + ".f16")));
        // Room again: the same result counts, once.
        std::filesystem::remove(filler);
        auto accepted = f.upload(a, r);
        QVERIFY2(accepted.ok(), accepted.ok() ? "" : accepted.refusal().message.c_str());
        QCOMPARE(totalTokens(f), int64_t{m.innerSteps} * m.batch * m.seqLen);
        f.t().close();
        ::umount2(state.c_str(), MNT_DETACH);
    }

    void abandonedWhileUploading() {
        auto cfg = config();
        cfg.quorum = 1;
        cfg.maxStaleness = 0;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a"), b = f.registerClient("b");
        const int64_t P = f.coordinator().parameterCount();
        const auto ma = f.work(a), mb = f.work(b);
        const auto ra = buildResult(ma, patternDelta(P, 1), a.key);
        auto session = f.coordinator().beginUpload(
            a.id, ma.workUnitId, static_cast<int64_t>(ra.body.size()), ra.signature);
        QVERIFY(session.ok());
        QVERIFY(!session.value()->feed(ra.body));
        // b's result closes the round; a's unit is now beyond the staleness bound.
        QVERIFY(f.upload(b, buildResult(mb, patternDelta(P, 1), b.key)).ok());
        QCOMPARE(f.coordinator().currentVersion(), int64_t{1});
        auto late = session.value()->finish(true);
        QCOMPARE(late.refusal().httpStatus, 409);
        QCOMPARE(late.refusal().code, std::string("work_unit_abandoned"));
        QVERIFY2(late.refusal().message.find("was abandoned while uploading: the run moved on; "
                                             "its base version is beyond the staleness bound") !=
                     std::string::npos,
                 late.refusal().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorIntake)
#include "test_coordinator_intake.moc"
