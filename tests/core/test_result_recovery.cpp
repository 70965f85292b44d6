// The result files of a unit (results/<id>.result + .json) across a kill: removing a sent result
// takes the .json first, so every state a kill can leave has its own answer in recovery, and
// only a result that was really lost is reported as one ("dropping a result that cannot be
// sent", both files removed, the ledger row Failed).
#include "engine_parts_fixture.hpp"
#include "fake_coordinator.hpp"

#include "file_io.hpp"
#include "recovery.hpp"
#include "result_format.hpp"

#include <QtTest>

#include <fstream>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kUnit = 5;

struct Leftover {
    bool json = false;
    bool result = false;
};

// A data directory whose ledger has unit kUnit in `state`, with the result files `files`
// (a valid result of the fake's manifest, or damaged bytes when `damaged`).
struct ResultDir {
    EnginePartsFixture f;
    FakeCoordinator api;
    net::Manifest m = api.manifestFor(kUnit);

    ResultDir(WorkUnitState state, Leftover files, bool damaged = false) {
        if (!f.shared)
            return;
        fs::create_directories(f.shared->files.resultsDir());
        f.shared->recordNewUnit(m);
        if (state != WorkUnitState::Assigned)
            f.shared->transition(kUnit, state);
        if (files.result) {
            net::ResultHeader h;
            h.workUnitId = kUnit;
            h.parameterCount = api.model().parameterCount();
            h.tokens = 64;
            h.steps = 2;
            std::vector<uint16_t> payload(static_cast<size_t>(h.parameterCount), 0x3c00);
            auto body = net::buildResult(h, payload);
            if (damaged)
                body[body.size() / 2] ^= 0xff;
            (void)writeFileAtomically(f.shared->files.resultFile(kUnit), body);
        }
        if (files.json)
            (void)writeResultInfo(f.shared->files.resultInfoFile(kUnit),
                                  ResultInfo{kUnit, m.uploadUrl, m.runId, m.baseVersion, {}});
    }
    std::optional<ActiveUnit> recover() { return recoverDataDir(*f.shared, api.key().publicKey()); }
    bool logged(const std::string& needle) {
        std::lock_guard lock(f.recorder.mu);
        for (const auto& l : f.recorder.logs)
            if (l.find(needle) != std::string::npos)
                return true;
        return false;
    }
    bool anyResultFile() const {
        return fs::exists(f.shared->files.resultFile(kUnit)) ||
               fs::exists(f.shared->files.resultInfoFile(kUnit));
    }
    WorkUnitState state() { return f.ledger->workUnit(wuKey(kUnit)).value()->state; }
};

}  // namespace

class TestResultRecovery : public QObject {
    Q_OBJECT

  private slots:
    // A sent result is removed .json first: when the .json cannot go, the .result stays too
    // (the pair stays whole, so recovery never sees a .json without its result).
    void sentResultLosesItsJsonFirst() {
        ResultDir d(WorkUnitState::Accepted, {true, true});
        QVERIFY(d.f.shared);
        PendingResult p;
        p.workUnitId = kUnit;
        p.file = d.f.shared->files.resultFile(kUnit);
        p.infoFile = d.f.shared->files.resultInfoFile(kUnit);
        // A .json that cannot be removed (a non-empty directory in its place).
        fs::remove(p.infoFile);
        fs::create_directories(p.infoFile / "x");
        removePendingResult(p);
        QVERIFY(fs::exists(p.file));
        fs::remove_all(p.infoFile);
        QVERIFY(writeResultInfo(p.infoFile, ResultInfo{kUnit, d.m.uploadUrl, 1, 0, {}}).ok());
        removePendingResult(p);
        QVERIFY(!fs::exists(p.file));
        QVERIFY(!fs::exists(p.infoFile));
    }

    // Killed while removing the files of a settled unit, in either order (the old order left a
    // .json alone): removed quietly, nothing queued, the ledger untouched.
    void filesOfASettledUnitGoQuietly() {
        for (auto state :
             {WorkUnitState::Accepted, WorkUnitState::Rejected, WorkUnitState::Abandoned}) {
            for (Leftover left : {Leftover{false, true}, Leftover{true, false}}) {
                ResultDir d(state, left);
                QVERIFY(d.f.shared);
                QVERIFY(!d.recover());
                QVERIFY(!d.anyResultFile());
                QVERIFY(!d.logged("dropping"));
                QCOMPARE(d.f.shared->pendingUploads(), size_t{0});
                QCOMPARE(d.state(), state);
            }
        }
    }

    // Killed inside the result writer, after the .result and before its .json: the .result goes
    // quietly and the unit resumes from work/ (its checkpoint is still there).
    void halfWrittenResultGoesAndTheUnitResumes() {
        ResultDir d(WorkUnitState::Training, {false, true});
        QVERIFY(d.f.shared);
        const fs::path unitDir = d.f.shared->files.unitDir(kUnit);
        fs::create_directories(unitDir);
        QVERIFY(writeTextAtomically(DataDir::manifestFile(unitDir), d.m.toJson()).ok());
        auto active = d.recover();
        QVERIFY(active);
        QCOMPARE(active->manifest.workUnitId, kUnit);
        QVERIFY(!d.anyResultFile());
        QVERIFY(
            d.logged("work unit 5: removed a result file whose results/5.json was never "
                     "written"));
        QVERIFY(!d.logged("dropping"));
        QCOMPARE(d.state(), WorkUnitState::Training);
    }

    // Killed inside the result writer of a sharded run's result, after some piece files and
    // before the .json: the pieces go quietly with the .result, and the unit resumes.
    void halfWrittenPiecesGoAndTheUnitResumes() {
        ResultDir d(WorkUnitState::Training, {false, true});
        QVERIFY(d.f.shared);
        for (int k = 0; k < 2; ++k)
            QVERIFY(writeFileAtomically(d.f.shared->files.pieceFile(kUnit, k),
                                        std::vector<uint8_t>(200, 1))
                        .ok());
        const fs::path unitDir = d.f.shared->files.unitDir(kUnit);
        fs::create_directories(unitDir);
        QVERIFY(writeTextAtomically(DataDir::manifestFile(unitDir), d.m.toJson()).ok());
        auto active = d.recover();
        QVERIFY(active);
        QVERIFY(!d.anyResultFile());
        QVERIFY(!fs::exists(d.f.shared->files.pieceFile(kUnit, 0)));
        QVERIFY(!fs::exists(d.f.shared->files.pieceFile(kUnit, 1)));
        QVERIFY(!d.logged("dropping"));
        QCOMPARE(d.state(), WorkUnitState::Training);
    }

    // A damaged result: both files go (not only the .json), said as an error; the row is Failed.
    void damagedResultLosesBothFiles() {
        ResultDir d(WorkUnitState::Trained, {true, true}, true);
        QVERIFY(d.f.shared);
        QVERIFY(!d.recover());
        QVERIFY(d.logged("dropping a result that cannot be sent: "));
        QVERIFY(d.logged("is damaged"));
        QVERIFY(!d.anyResultFile());
        QCOMPARE(d.state(), WorkUnitState::Failed);
        QCOMPARE(d.f.shared->pendingUploads(), size_t{0});
    }

    // A finished unit with one of its two files gone is a lost result, reported as one.
    void finishedUnitMissingAFileIsALostResult() {
        for (Leftover left : {Leftover{false, true}, Leftover{true, false}}) {
            ResultDir d(WorkUnitState::Trained, left);
            QVERIFY(d.f.shared);
            QVERIFY(!d.recover());
            QVERIFY(d.logged("dropping a result that cannot be sent: "));
            QVERIFY(!d.anyResultFile());
            QCOMPARE(d.state(), WorkUnitState::Failed);
        }
    }

    // An intact result goes back into the upload queue, files kept.
    void intactResultIsQueuedAgain() {
        for (auto state : {WorkUnitState::Trained, WorkUnitState::Uploading}) {
            ResultDir d(state, {true, true});
            QVERIFY(d.f.shared);
            QVERIFY(!d.recover());
            QCOMPARE(d.f.shared->pendingUploads(), size_t{1});
            QVERIFY(fs::exists(d.f.shared->files.resultFile(kUnit)));
            QVERIFY(fs::exists(d.f.shared->files.resultInfoFile(kUnit)));
            QVERIFY(d.logged("work unit 5: result on disk, waiting for its receipt"));
            QCOMPARE(d.state(), WorkUnitState::Trained);
        }
    }
};

QTEST_GUILESS_MAIN(TestResultRecovery)
#include "test_result_recovery.moc"
