// The worker engine against a fake coordinator, a hand-set clock and fake rule inputs: every state,
// pause/resume/snooze/finish-then-pause, rules holding and releasing, backoff with Retry-After,
// overlap of upload and training, NaN refusal, receipt verification and the ledger rows. Restarts
// after a crash or quit are in test_engine_restart, lost work units in test_engine_orphans.
#include "engine_harness.hpp"

#include "checkpoint.hpp"

#include <sys/stat.h>

#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

class TestEngine : public QObject {
    Q_OBJECT

  private slots:
    void backoffDelays() {
        EngineConfig c;
        c.backoffInitialMs = 1000;
        c.backoffMaxMs = 10000;
        c.backoffJitter = 0.5;
        QCOMPARE(backoffDelayMs(c, 1, 0.0, std::nullopt), int64_t{1000});
        QCOMPARE(backoffDelayMs(c, 2, 0.0, std::nullopt), int64_t{2000});
        QCOMPARE(backoffDelayMs(c, 3, 0.0, std::nullopt), int64_t{4000});
        QCOMPARE(backoffDelayMs(c, 5, 0.0, std::nullopt), int64_t{10000});  // capped
        QCOMPARE(backoffDelayMs(c, 50, 0.0, std::nullopt), int64_t{10000});
        QCOMPARE(backoffDelayMs(c, 3, 1.0, std::nullopt), int64_t{2000});  // half off at most
        QCOMPARE(backoffDelayMs(c, 3, 0.5, std::nullopt), int64_t{3000});
        QCOMPARE(backoffDelayMs(c, 3, 0.5, int64_t{7000}), int64_t{7000});  // Retry-After wins
        QCOMPARE(backoffDelayMs(c, 1, 0.0, int64_t{999999999}), c.maxRetryAfterMs);
    }

    // Register, two work units trained and accepted, then Stopped (maxWorkUnits).
    void lifecycle() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 2;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        h.engine->wait();
        QCOMPARE(api.registrations.load(), 1);
        QCOMPARE(api.acceptCount.size(), size_t{2});
        for (const auto& [id, count] : api.acceptCount)
            QCOMPARE(count, 1);
        // Every state of a unit's life was shown.
        for (auto s : {EngineState::Fetching, EngineState::Downloading, EngineState::Training,
                       EngineState::Stopped})
            QVERIFY2(h.recorder.saw(s), toString(s));
        // Files: identity and registration are private.
        struct stat st {};
        QCOMPARE(::stat((h.dataDir / "identity.pem").c_str(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        QCOMPARE(::stat((h.dataDir / "registration.json").c_str(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        // Ledger: both accepted with receipts that verify against the coordinator's key.
        const int64_t P = api.model().parameterCount();
        for (const char* id : {"1", "2"}) {
            auto u = unit(*h.engine, id);
            QVERIFY(u);
            QCOMPARE(u->state, WorkUnitState::Accepted);
            QCOMPARE(u->steps, int64_t{6});
            QCOMPARE(u->tokens, int64_t{6 * 2 * 16});
            QVERIFY(u->trainedAtMs.has_value());
            auto r = h.engine->ledger().receipt(id);
            QVERIFY(r && *r);
            auto parsed = net::Receipt::fromJson(std::string((*r)->body.begin(), (*r)->body.end()));
            QVERIFY(parsed);
            QVERIFY(parsed->verify(api.key().publicKey()));
            // Upload = 2 bytes per parameter plus the header.
            QCOMPARE(static_cast<int64_t>(api.accepted[std::stoll(id)].size()),
                     int64_t{128} + 2 * P);
            auto tr = h.engine->ledger().transitions(id);
            QVERIFY(tr);
            std::vector<WorkUnitState> seq;
            for (auto& t : *tr)
                seq.push_back(t.state);
            QVERIFY(seq.front() == WorkUnitState::Assigned);
            QVERIFY(seq.back() == WorkUnitState::Accepted);
            QVERIFY(std::find(seq.begin(), seq.end(), WorkUnitState::Training) != seq.end());
            QVERIFY(std::find(seq.begin(), seq.end(), WorkUnitState::Trained) != seq.end());
        }
        // Transfers: result uploads of the right size, downloads recorded.
        auto transfers = h.engine->ledger().recentTransfers(100);
        QVERIFY(transfers);
        int results = 0, weights = 0;
        for (const auto& t : *transfers) {
            if (t.purpose == "result") {
                ++results;
                QCOMPARE(t.bytes, int64_t{128} + 2 * P);
                QCOMPARE(t.direction, Direction::Up);
            }
            if (t.purpose == "weights")
                ++weights;
        }
        QCOMPARE(results, 2);
        QCOMPARE(weights, 1);  // the second unit found the weights in the cache
        auto totals = h.engine->ledger().totals();
        QVERIFY(totals);
        QCOMPARE(totals->workUnitsAccepted, int64_t{2});
        QCOMPARE(totals->workUnitsPending, int64_t{0});
        auto s = h.snap();
        QCOMPARE(s.totals.workUnitsAccepted, int64_t{2});
        QVERIFY(s.lastUpload && s.lastUpload->state == WorkUnitState::Accepted);
        QCOMPARE(s.pendingUploads, 0);
        // Nothing left behind but the moments for the next unit; they carried over (2H updates).
        QVERIFY(fs::is_empty(h.dataDir / "results"));
        QVERIFY(fs::is_empty(h.dataDir / "work"));
        auto opt = loadCheckpoint(h.dataDir / "optimizer.ckpt");
        QVERIFY(opt && opt->optimizer);
        QCOMPARE(opt->optimizer->step, int64_t{12});
        // The work request told the device, free disk and, the second time, a measured speed.
        QVERIFY(api.requests.size() >= 2);
        QCOMPARE(api.requests[0].device, std::string("cpu"));
        QVERIFY(api.requests[0].freeDiskBytes > 0);
        QVERIFY(api.requests[1].tokensPerSecond > 0);
        QVERIFY(h.engine->ledger().integrityCheck().ok());
    }

    void samplesSpanShortWorkUnits() {
        // Units of 6 steps x 100 ms are shorter than the 1 s sample interval; samples are
        // spaced by the clock across units, so three units still give one.
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 3;
        h.cfg.sampleIntervalMs = 1000;
        h.recorder.onProgress = [&](const std::string&, int64_t) { h.clock.advanceMs(100); };
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        h.engine->wait();
        QCOMPARE(api.acceptCount.size(), size_t{3});
        auto points = h.engine->ledger().throughput(kStart, h.clock.nowMs() + 1);
        QVERIFY(points.ok());
        QVERIFY2(!points->empty(), "no device sample across three short units");
        QVERIFY(points->size() <= 2);  // 1.8 s of training at one sample a second
    }

    void pauseResumeAtStepBoundaryWithCheckpoint() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 8);
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        Engine* e = nullptr;
        h.recorder.onProgress = [&](const std::string&, int64_t step) {
            if (step == 3)
                e->pause();
        };
        e = h.engine.get();
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        auto s = h.snap();
        QVERIFY(s.current);
        QCOMPARE(s.current->step, int64_t{3});
        QCOMPARE(s.stateText, std::string("Paused"));
        // The pause wrote a checkpoint of step 3.
        QVERIFY(fs::exists(h.dataDir / "work" / "1" / "ckpt-3.ckpt"));
        QCOMPARE(unit(*h.engine, "1")->steps, int64_t{3});
        QCOMPARE(h.backendsMade->load(), 1);
        h.recorder.onProgress = nullptr;
        h.engine->resume();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        // The backend was given back while paused and built again from the checkpoint.
        QCOMPARE(h.backendsMade->load(), 2);
    }

    void snoozeUntilTheClockSaysSo() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->snooze(kStart + 3600000);
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Snoozed));
        auto s = h.snap();
        QCOMPARE(s.snoozedUntilMs, std::optional<int64_t>(kStart + 3600000));
        QVERIFY2(s.stateText.rfind("Snoozed, resumes at ", 0) == 0, s.stateText.c_str());
        QCOMPARE(s.nextActionAtMs, std::optional<int64_t>(kStart + 3600000));
        QCOMPARE(s.next.step, NextStep::ResumeAt);
        QCOMPARE(api.workRequests.load(), 0);
        h.clock.advanceMs(3599000);
        h.engine->wake();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        QCOMPARE(h.snap().state, EngineState::Snoozed);
        h.clock.advanceMs(1000);
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(api.acceptCount.size(), size_t{1});
    }

    // Without a unit in hand it pauses at once; with one, after that unit is trained.
    void finishThenPauseWithoutUnitPausesNow() {
        FakeCoordinator api;
        Harness h(api);
        QVERIFY(h.make().ok());
        h.engine->setFinishThenPause();
        QVERIFY(h.snap().finishThenPause);
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        QCOMPARE(api.workRequests.load(), 0);
    }

    void finishThenPause() {
        FakeCoordinator api;
        Harness h(api);
        QVERIFY(h.make().ok());
        Engine* e = h.engine.get();
        std::atomic<bool> flagShown{false};
        h.recorder.onProgress = [&](const std::string&, int64_t step) {
            if (step == 2) {
                e->setFinishThenPause();
                flagShown = e->snapshot().finishThenPause;
            }
        };
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Paused));
        // The unit in hand was finished (and uploads go on); no second unit was fetched.
        QVERIFY(eventually([&] { return h.snap().totals.workUnitsAccepted == 1; }));
        QVERIFY(flagShown);
        QCOMPARE(api.workRequests.load(), 1);
        QCOMPARE(unit(*h.engine, "1")->steps, int64_t{6});
        QVERIFY(!h.snap().finishThenPause);
        QVERIFY(!h.snap().current);
        // Paused between units, the backend was given back: the next unit builds a new one.
        QCOMPARE(h.backendsMade->load(), 1);
        h.recorder.onProgress = nullptr;
        h.engine->resume();
        QVERIFY(eventually([&] { return h.snap().totals.workUnitsAccepted == 2; }));
        QCOMPARE(h.backendsMade->load(), 2);
        h.engine->quit();
        h.engine->wait();
        QCOMPARE(h.snap().state, EngineState::Stopped);
    }

    void ruleHoldsBeforeWorkAndReleases() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.probe.setPower(PowerSource::Battery);
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Waiting));
        QCOMPARE(h.snap().reason, std::string("Waiting: on battery"));
        QCOMPARE(h.snap().stateText, std::string("Waiting: on battery"));
        QCOMPARE(h.snap().hold.value().rule, Rule::OnBattery);
        QCOMPARE(h.snap().next.step, NextStep::CheckRulesOnChange);
        QCOMPARE(api.registrations.load(), 0);
        h.probe.setPower(PowerSource::Mains);
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(api.acceptCount.size(), size_t{1});
    }

    void ruleHoldsDuringTraining() {
        FakeCoordinator api("L=1,NH=2,C=16,T=16", 8);
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.cfg.rulesCheckIntervalMs = 0;  // every step
        QVERIFY(h.make().ok());
        h.recorder.onProgress = [&](const std::string&, int64_t step) {
            if (step == 4)
                h.probe.setPower(PowerSource::Battery);
        };
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Waiting));
        QCOMPARE(h.snap().current->step, int64_t{4});
        QVERIFY(fs::exists(h.dataDir / "work" / "1" / "ckpt-4.ckpt"));
        h.recorder.onProgress = nullptr;
        h.probe.setPower(PowerSource::Mains);
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->steps, int64_t{8});
        QCOMPARE(h.backendsMade->load(), 2);  // released during the hold
        // The held run, its backend rebuilt from the checkpoint, gives exactly the result of an
        // uninterrupted one.
        FakeCoordinator api2("L=1,NH=2,C=16,T=16", 8);
        Harness ref(api2);
        ref.cfg.maxWorkUnits = 1;
        QVERIFY(ref.make().ok());
        ref.engine->start();
        QVERIFY(ref.waitState(EngineState::Stopped));
        QVERIFY(api.accepted[1] == api2.accepted[1]);
    }

    void downloadCapHoldsDownloads() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.cfg.rules.dailyDownloadCapBytes = 1000000;
        QVERIFY(h.make().ok());
        Transfer t;
        t.atMs = kStart - 1000;
        t.direction = Direction::Down;
        t.purpose = "weights";
        t.bytes = 999000;  // the next download would exceed the cap
        QVERIFY(h.engine->ledger().recordTransfer(t).ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Waiting));
        QVERIFY2(h.snap().reason.find("daily download cap") != std::string::npos,
                 h.snap().reason.c_str());
        QCOMPARE(api.workRequests.load(), 1);  // fetched, then held before downloading
        QVERIFY(h.snap().nextActionAtMs.has_value());
        QCOMPARE(h.snap().hold.value().rule, Rule::DownloadCap);
        QCOMPARE(h.snap().hold->capBytes, int64_t{1000000});
        QVERIFY(h.snap().hold->usedBytes > 999000);  // and the manifest's bytes
        QVERIFY(!h.snap().hold->capReached);         // the next download would pass it
        QCOMPARE(h.snap().next.step, NextStep::CheckRulesAt);
        QCOMPARE(h.snap().next.atMs, h.snap().nextActionAtMs);
        // The next local day the cap resets.
        h.clock.setMs(*h.snap().nextActionAtMs + 1);
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(api.acceptCount.size(), size_t{1});
    }

    void backoffWithRetryAfter() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.cfg.backoffJitter = 0;  // exact delays
        h.cfg.backoffInitialMs = 2000;
        h.cfg.backoffMaxMs = 5000;
        for (int i = 0; i < 3; ++i)
            api.workFailures.push_back(apiFailure("connection refused", true));
        ApiFailure busy = apiFailure("busy", true, int64_t{7000}, "busy", 503);
        api.workFailures.push_back(busy);
        QVERIFY(h.make().ok());
        h.engine->start();
        for (int64_t expected : {2000, 4000, 5000, 7000}) {
            QVERIFY(eventually([&] {
                auto s = h.snap();
                return s.state == EngineState::Backoff && s.nextActionAtMs &&
                       *s.nextActionAtMs > h.clock.nowMs();
            }));
            auto s = h.snap();
            QCOMPARE(*s.nextActionAtMs - h.clock.nowMs(), expected);
            QVERIFY(s.reason.find(expected == 7000 ? "busy" : "connection refused") !=
                    std::string::npos);
            const int before = api.workRequests.load();
            h.clock.advanceMs(expected - 1);
            h.engine->wake();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            QCOMPARE(api.workRequests.load(), before);  // not a moment early
            h.clock.advanceMs(1);
            h.engine->wake();
            QVERIFY(eventually([&] { return api.workRequests.load() == before + 1; }));
        }
        QVERIFY(h.waitState(EngineState::Stopped));
    }

    void noWorkIsIdleUntilRetryAfter() {
        FakeCoordinator api;
        api.maxWorkUnits = 0;
        api.noWorkRetryAfterMs = 30000;
        Harness h(api);
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Idle));
        QVERIFY(eventually([&] { return h.snap().nextActionAtMs.has_value(); }));
        QCOMPARE(*h.snap().nextActionAtMs, kStart + 30000);
        QCOMPARE(h.snap().reason, std::string("no work available"));
        h.engine->pause();
        QVERIFY(h.waitState(EngineState::Paused));
        h.engine->resume();
        QVERIFY(h.waitState(EngineState::Idle));
        QCOMPARE(api.workRequests.load(), 1);
        h.clock.advanceMs(30000);
        h.engine->wake();
        QVERIFY(eventually([&] { return api.workRequests.load() == 2; }));
    }

    // While a result uploads, the next unit trains; with two results pending it waits.
    void overlapTrainsWhileUploading() {
        FakeCoordinator api;
        api.blockUploads = true;
        struct Unblock {  // also when a check fails, so the engine can stop
            FakeCoordinator& api;
            ~Unblock() {
                {
                    std::lock_guard lock(api.mu);
                    api.blockUploads = false;
                }
                api.cv.notify_all();
            }
        };
        Harness h(api);
        Unblock unblock{api};
        h.cfg.maxWorkUnits = 3;
        QVERIFY(h.make().ok());
        h.engine->start();
        // Unit 2 finishes training while unit 1's upload hangs; then the engine only uploads.
        QVERIFY(eventually([&] {
            auto u = unit(*h.engine, "2");
            return u && u->state == WorkUnitState::Trained;
        }));
        QVERIFY(h.waitState(EngineState::Uploading));
        // The upload thread may still be on its way into unit 1's (blocked) upload.
        QVERIFY(eventually([&] { return h.snap().upload.has_value(); }));
        auto s = h.snap();
        QCOMPARE(s.pendingUploads, 2);
        QVERIFY2(s.upload && s.upload->id == "1",
                 formatSnapshot(s, 0, FixedOffsetTimeZone(0)).c_str());
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Uploading);
        QVERIFY(!unit(*h.engine, "3"));
        {
            std::lock_guard lock(api.mu);
            api.blockUploads = false;
        }
        api.cv.notify_all();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(api.acceptCount.size(), size_t{3});
        QCOMPARE(h.snap().totals.workUnitsAccepted, int64_t{3});
    }

    void nanFailsLocallyAndSendsNothing() {
        FakeCoordinator api;
        api.nanUnits.insert(1);
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        auto u1 = unit(*h.engine, "1");
        QCOMPARE(u1->state, WorkUnitState::Failed);
        auto tr = h.engine->ledger().transitions("1");
        QVERIFY(tr->back().detail.find("loss") != std::string::npos ||
                tr->back().detail.find("finite") != std::string::npos);
        QCOMPARE(api.acceptCount.count(1), size_t{0});
        QCOMPARE(unit(*h.engine, "2")->state, WorkUnitState::Accepted);  // went on with the next
        QVERIFY(!fs::exists(h.dataDir / "work" / "1"));
        QVERIFY(!h.snap().lastError.empty());
    }

    void receiptMustVerify() {
        FakeCoordinator api;
        api.badReceiptKey = true;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Rejected);
        auto r = h.engine->ledger().receipt("1");
        QVERIFY(r && !*r);
        auto s = h.snap();
        QVERIFY(s.lastUpload && s.lastUpload->state == WorkUnitState::Rejected);
        QVERIFY2(
            s.lastUpload->detail.find("not signed by the coordinator key") != std::string::npos,
            s.lastUpload->detail.c_str());
    }

    void manifestMustVerify() {
        FakeCoordinator api;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        // A registration that pins another key: every manifest is refused.
        {
            std::string json = std::string("{\"coordinator_url\":\"https://127.0.0.1:1\",") +
                               "\"client_id\":1,\"token\":\"t\",\"coordinator_public_key\":\"" +
                               net::toBase64(net::SigningKey::generate()->publicKey()) + "\"}";
            QVERIFY(writePrivateFileAtomically(h.dataDir / "registration.json", json).ok());
        }
        h.engine.reset();
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Backoff));
        QVERIFY(h.snap().reason.find("not signed by the coordinator key") != std::string::npos);
        QVERIFY(!unit(*h.engine, "1"));
        h.engine->quit();
        h.engine->wait();
    }

    void abandonWhenTold() {
        FakeCoordinator api;
        api.abandonOnProgress = true;
        api.maxWorkUnits = 1;
        Harness h(api);
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            auto u = unit(*h.engine, "1");
            return u && u->state == WorkUnitState::Abandoned;
        }));
        QVERIFY(h.waitState(EngineState::Idle));
        QVERIFY(!fs::exists(h.dataDir / "work" / "1"));
        QCOMPARE(api.uploadAttempts.load(), 0);
        h.engine->quit();
        h.engine->wait();
    }

    // Credit is the receipt's credit (the tokens trained), not its weight: a result one version
    // late (weight 0.5 x tokens) earns full credit; without a credit field, the weight.
    void creditIsTheTokensNotTheWeight() {
        for (const bool withCredit : {true, false}) {
            FakeCoordinator api;
            api.staleWeight = 0.5;
            api.receiptCredit = withCredit;
            Harness h(api);
            h.cfg.maxWorkUnits = 1;
            QVERIFY(h.make().ok());
            h.engine->start();
            QVERIFY(h.waitState(EngineState::Stopped));
            auto receipt = h.engine->ledger().receipt("1");
            QVERIFY(receipt && *receipt);
            const double tokens = 6 * 2 * 16;  // H x B x T of the fake's units
            QCOMPARE((*receipt)->weight, 0.5 * tokens);
            QCOMPARE((*receipt)->credit, withCredit ? tokens : 0.5 * tokens);
            QCOMPARE(h.snap().totals.credit, (*receipt)->credit);
        }
    }

    // A result the coordinator abandoned while it waited is not uploaded.
    void abandonedResultIsNotSent() {
        FakeCoordinator api;
        api.abandonFinishedUnits = true;
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Abandoned);
        QCOMPARE(api.uploadAttempts.load(), 0);
        QVERIFY(fs::is_empty(h.dataDir / "results"));
        QVERIFY(h.snap().lastUpload && h.snap().lastUpload->state == WorkUnitState::Abandoned);
    }

    // A refused upload (not transient) is settled as Rejected; a transient one is retried.
    void uploadRetriesThenSettles() {
        FakeCoordinator api;
        api.uploadFailures.push_back(apiFailure("connection reset", true));
        Harness h(api);
        h.cfg.maxWorkUnits = 1;
        h.cfg.backoffJitter = 0;
        h.cfg.backoffInitialMs = 1000;
        QVERIFY(h.make().ok());
        h.engine->start();
        QVERIFY(eventually([&] {
            return api.uploadAttempts.load() == 1 &&
                   unit(*h.engine, "1")->state == WorkUnitState::Trained;
        }));
        h.clock.advanceMs(1000);
        h.engine->wake();
        QVERIFY(h.waitState(EngineState::Stopped));
        QCOMPARE(api.uploadAttempts.load(), 2);
        QCOMPARE(unit(*h.engine, "1")->state, WorkUnitState::Accepted);
        auto transfers = h.engine->ledger().recentTransfers(100);
        int failed = 0;
        for (auto& t : *transfers)
            failed += t.purpose == "result" && !t.ok;
        QCOMPARE(failed, 1);
    }
};

QTEST_APPLESS_MAIN(TestEngine)
#include "test_engine.moc"
