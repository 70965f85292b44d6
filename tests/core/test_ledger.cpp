// The SQLite ledger: opening, migrations, refusal of newer schemas and of files that are not a
// ledger, concurrent connections, idempotent recording of work units, receipts and transitions,
// integrity checks. The queries are test_ledger_queries'.
#include "ledger_fixture.hpp"

#include <atomic>
#include <fstream>
#include <thread>

using namespace tandem;
using namespace tandem::core;
using namespace tandem::core::testing;

class TestLedger : public QObject, LedgerFiles {
    Q_OBJECT

  private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // --- opening and migrations ---

    void createsCurrentSchemaFromEmptyFile() {
        const auto path = freshPath();
        auto l = must(Ledger::open(path));
        QCOMPARE(must(l->schemaVersion()), Ledger::currentSchemaVersion());
        QVERIFY(Ledger::currentSchemaVersion() >= 1);
        Raw raw(path);
        QCOMPARE(raw.text("PRAGMA journal_mode"), std::string("wal"));
        QCOMPARE(raw.scalar("PRAGMA user_version"), int64_t{Ledger::currentSchemaVersion()});
        for (const char* table : {"work_units", "work_unit_transitions", "receipts",
                                  "device_samples", "transfers", "events"}) {
            QCOMPARE(raw.scalar(std::string("SELECT count(*) FROM sqlite_schema WHERE name = '") +
                                table + "'"),
                     int64_t{1});
        }
        QVERIFY(l->integrityCheck().ok());
    }

    void migratesFromAnEmptyZeroLengthFile() {
        const auto path = freshPath();
        { std::ofstream touch(path); }
        QCOMPARE(std::filesystem::file_size(path), uintmax_t{0});
        auto l = must(Ledger::open(path));
        QCOMPARE(must(l->schemaVersion()), Ledger::currentSchemaVersion());
    }

    void reopeningKeepsDataAndDoesNotMigrateAgain() {
        const auto path = freshPath();
        {
            auto l = must(Ledger::open(path));
            must(l->recordEvent(5, EventLevel::Info, "hello"));
        }
        auto l = must(Ledger::open(path));
        auto events = must(l->events({}));
        QCOMPARE(events.size(), size_t{1});
        QCOMPARE(events[0].message, std::string("hello"));
    }

    // A hypothetical version 2 appended to the real list: applies on a version-1 file, keeps
    // the data, and a second open does nothing.
    void appliesAppendedMigrationToOlderFile() {
        const auto path = freshPath();
        {
            auto l = must(Ledger::open(path));
            must(l->recordEvent(7, EventLevel::Warning, "before the upgrade"));
        }
        std::vector<Migration> steps(Ledger::migrations().begin(), Ledger::migrations().end());
        const int next = Ledger::currentSchemaVersion() + 1;
        steps.push_back({next,
                         "ALTER TABLE events ADD COLUMN source TEXT NOT NULL DEFAULT 'old';"
                         "CREATE TABLE extra (x INTEGER) STRICT;"});
        {
            auto l = must(Ledger::open(path, steps));
            QCOMPARE(must(l->schemaVersion()), next);
            QCOMPARE(must(l->events({})).size(), size_t{1});
        }
        Raw raw(path);
        QCOMPARE(raw.text("SELECT source FROM events"), std::string("old"));
        // The current build refuses the upgraded file.
        auto refused = Ledger::open(path);
        QVERIFY(!refused.ok());
    }

    void failedMigrationRollsBackEntirely() {
        const auto path = freshPath();
        { auto l = must(Ledger::open(path)); }
        std::vector<Migration> steps(Ledger::migrations().begin(), Ledger::migrations().end());
        const int next = Ledger::currentSchemaVersion() + 1;
        steps.push_back({next, "CREATE TABLE half (x INTEGER); INSERT INTO missing VALUES (1);"});
        auto r = Ledger::open(path, steps);
        QVERIFY(!r.ok());
        QVERIFY2(msg(r.error()).find("migrating from schema version " + std::to_string(next - 1) +
                                     " to " + std::to_string(next)) != std::string::npos,
                 msg(r.error()).c_str());
        QVERIFY2(msg(r.error()).find("no such table: missing") != std::string::npos,
                 msg(r.error()).c_str());
        Raw raw(path);
        QCOMPARE(raw.scalar("PRAGMA user_version"), int64_t{Ledger::currentSchemaVersion()});
        QCOMPARE(raw.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'half'"), int64_t{0});
    }

    // Migrating from scratch through a multi-step list applies each step in order.
    void appliesEveryStepFromVersionZero() {
        const auto path = freshPath();
        const Migration steps[] = {{1, "CREATE TABLE a (x INTEGER);"},
                                   {2, "INSERT INTO a VALUES (41);"},
                                   {3, "UPDATE a SET x = x + 1;"}};
        for (int upTo = 1; upTo <= 3; ++upTo) {
            auto l = must(Ledger::open(path, std::span(steps, upTo)));
            QCOMPARE(must(l->schemaVersion()), upTo);
        }
        Raw raw(path);
        QCOMPARE(raw.scalar("SELECT x FROM a"), int64_t{42});
    }

    // Version 1 as shipped (tests/core/ledger_v1.sql) must match what migration 1 creates:
    // a shipped migration is never edited.
    void shippedVersion1IsFrozen() {
        const auto fromCode = freshPath();
        { auto l = must(Ledger::open(fromCode, Ledger::migrations().first(1))); }
        const auto fromFile = freshPath();
        {
            Raw raw(fromFile);
            QVERIFY(raw.exec(readText(TANDEM_SOURCE_DIR "/tests/core/ledger_v1.sql")));
        }
        const std::string schemaSql =
            "SELECT group_concat(type || ' ' || name || ' ' || coalesce(sql, ''), char(10)) "
            "FROM (SELECT * FROM sqlite_schema ORDER BY type, name)";
        const std::string a = Raw(fromCode).text(schemaSql);
        const std::string b = Raw(fromFile).text(schemaSql);
        QVERIFY(!a.empty());
        QCOMPARE(a, b);
    }

    // Each older shipped version, with data, migrates to the current one and keeps its rows.
    // Protocol v6: the outcome of each piece of a result, the first one kept.
    void pieceOutcomes() {
        const auto path = freshPath();
        auto l = must(Ledger::open(path));
        must(l->recordWorkUnit(unit("7", 1000, WorkUnitState::Trained, 0, 0, "cpu")));
        QVERIFY(must(l->pieceOutcomes("7")).empty());
        PieceOutcome accepted{1, true, 2000, {}, {1, 2}, {'{', '}'}};
        PieceOutcome refused{0, false, 2100, "norm_mismatch", {}, {}};
        QVERIFY(l->recordPieceOutcome("7", accepted).ok());
        QVERIFY(l->recordPieceOutcome("7", refused).ok());
        PieceOutcome again = accepted;
        again.accepted = false;
        again.detail = "later";
        QVERIFY(l->recordPieceOutcome("7", again).ok());  // the first outcome stays
        QCOMPARE(must(l->pieceOutcomes("7")), (std::vector<PieceOutcome>{refused, accepted}));
        QVERIFY(must(l->pieceOutcomes("8")).empty());
    }

    void migratesEveryShippedVersion() {
        for (int version = 1; version <= Ledger::currentSchemaVersion(); ++version) {
            const auto path = freshPath();
            {
                Raw raw(path);
                QVERIFY(raw.exec(readText(TANDEM_SOURCE_DIR "/tests/core/ledger_v" +
                                          std::to_string(version) + ".sql")));
                QCOMPARE(raw.scalar("PRAGMA user_version"), int64_t{version});
            }
            auto l = must(Ledger::open(path));
            QCOMPARE(must(l->schemaVersion()), Ledger::currentSchemaVersion());
            const Totals t = must(l->totals());
            QCOMPARE(t.workUnitsTrained, int64_t{2});
            QCOMPARE(t.workUnitsAccepted, int64_t{1});
            QCOMPARE(t.workUnitsPending, int64_t{1});
            QCOMPARE(t.tokens, int64_t{51200});
            QCOMPARE(t.gpuSeconds, 120.5);
            QCOMPARE(t.credit, 1.5);
            QCOMPARE(t.bytesUp, int64_t{500});
            QCOMPARE(t.bytesDown, int64_t{1000});
            QCOMPARE(must(l->transitions("wu-b")).size(), size_t{3});
            QCOMPARE(must(l->receipt("wu-a"))->body, (std::vector<uint8_t>{'{', '}'}));
            QCOMPARE(must(l->events({})).size(), size_t{1});
            QCOMPARE(must(l->throughput(0, 2000)).size(), size_t{1});
            QVERIFY(l->integrityCheck().ok());
            // And it keeps working: the next unit goes in.
            must(l->recordWorkUnit(unit("wu-c", 7000, WorkUnitState::Assigned, 0, 0, "cpu")));
        }
    }

    void refusesBadlyNumberedMigrations() {
        const Migration steps[] = {{1, "SELECT 1;"}, {3, "SELECT 1;"}};
        auto r = Ledger::open(freshPath(), steps);
        QVERIFY(!r.ok());
        QVERIFY(msg(r.error()).find("numbered") != std::string::npos);
    }

    void refusesNewerSchemaAndLeavesFileUntouched() {
        const auto path = freshPath();
        {
            Raw raw(path);
            QVERIFY(raw.exec("CREATE TABLE future (x); INSERT INTO future VALUES (1);"));
            QVERIFY(raw.exec("PRAGMA user_version = 99"));
        }
        const QByteArray before = slurp(path);
        auto r = Ledger::open(path);
        QVERIFY(!r.ok());
        const std::string m = msg(r.error());
        QVERIFY2(m.find("schema version 99") != std::string::npos, m.c_str());
        QVERIFY2(m.find("knows versions up to " + std::to_string(Ledger::currentSchemaVersion())) !=
                     std::string::npos,
                 m.c_str());
        QVERIFY2(m.find("newer Tandem") != std::string::npos, m.c_str());
        QVERIFY2(m.find(path.string()) != std::string::npos, m.c_str());
        QCOMPARE(slurp(path), before);
        QVERIFY(!std::filesystem::exists(path.string() + "-wal"));
    }

    void refusesAFileThatIsNotADatabase() {
        const auto path = freshPath();
        {
            std::ofstream out(path, std::ios::binary);
            out << std::string(4096, 'x');
        }
        auto r = Ledger::open(path);
        QVERIFY(!r.ok());
        QVERIFY2(msg(r.error()).find("not a database") != std::string::npos,
                 msg(r.error()).c_str());
    }

    void reportsAnUnopenablePath() {
        auto r = Ledger::open(std::filesystem::path(m_dir.path().toStdString()) / "no" / "such" /
                              "dir" / "ledger.db");
        QVERIFY(!r.ok());
        QVERIFY2(msg(r.error()).find("cannot open") != std::string::npos, msg(r.error()).c_str());
    }

    void twoConnectionsShareTheFile() {
        const auto path = freshPath();
        auto a = must(Ledger::open(path));
        auto b = must(Ledger::open(path));
        must(a->recordEvent(1, EventLevel::Info, "from a"));
        must(b->recordEvent(2, EventLevel::Info, "from b"));
        QCOMPARE(must(a->events({})).size(), size_t{2});
        QCOMPARE(must(b->events({})).size(), size_t{2});
    }

    // Writers on one shared Ledger from several threads, and a second connection at once.
    void concurrentWriters() {
        const auto path = freshPath();
        auto shared = must(Ledger::open(path));
        auto other = must(Ledger::open(path));
        std::atomic<int> failures{0};
        auto writer = [&](Ledger* l, int64_t base) {
            for (int64_t i = 0; i < 40; ++i) {
                if (!l->recordEvent(base + i, EventLevel::Info, "event").ok())
                    ++failures;
                if (i % 10 == 0 && !l->totals().ok())
                    ++failures;
            }
        };
        std::thread a(writer, shared.get(), 0);
        std::thread b(writer, shared.get(), 1000);
        std::thread c(writer, other.get(), 2000);
        a.join();
        b.join();
        c.join();
        QCOMPARE(failures.load(), 0);
        EventFilter all;
        all.limit = 1000;
        QCOMPARE(must(shared->events(all)).size(), size_t{120});
        QVERIFY(shared->integrityCheck().ok());
    }

    // --- integrity ---

    void integrityCheckFindsOrphans() {
        const auto path = freshPath();
        auto l = must(Ledger::open(path));
        fillFixture(*l);
        QVERIFY(l->integrityCheck().ok());
        {
            Raw raw(path);  // foreign keys are off on this connection
            QVERIFY(
                raw.exec("INSERT INTO work_unit_transitions(work_unit_id, state, at_ms, detail) "
                         "VALUES ('ghost', 'training', 1, '')"));
        }
        Status s = l->integrityCheck();
        QVERIFY(!s.ok());
        QVERIFY2(msg(s.error()).find("work_unit_transitions") != std::string::npos,
                 msg(s.error()).c_str());
        QVERIFY2(msg(s.error()).find("missing row of work_units") != std::string::npos,
                 msg(s.error()).c_str());
    }

    // --- recording ---

    void workUnitRoundTripAndTransitions() {
        auto l = openFresh();
        WorkUnitRecord u = unit("wu1", 1000, WorkUnitState::Assigned, 0, 0, "cpu");
        u.lossFirst.reset();
        u.lossLast.reset();
        must(l->recordWorkUnit(u));
        auto back = must(l->workUnit("wu1"));
        QVERIFY(back.has_value());
        QCOMPARE(back->run, std::string("run-1"));
        QCOMPARE(back->baseVersion, int64_t{3});
        QCOMPARE(back->innerSteps, int64_t{50});
        QCOMPARE(back->batchSize, int64_t{8});
        QCOMPARE(back->seqLen, int64_t{64});
        QVERIFY(!back->lossFirst.has_value());
        QVERIFY(!back->trainedAtMs.has_value());
        QCOMPARE(back->state, WorkUnitState::Assigned);

        must(l->recordTransition("wu1", WorkUnitState::Downloading, 2000));
        must(l->recordTransition("wu1", WorkUnitState::Training, 3000));
        must(l->updateWorkUnitProgress("wu1", 512, 1, 1.5, 5.5, 5.5, 3500));
        must(l->updateWorkUnitProgress("wu1", 1024, 2, 3.0, std::nullopt, 5.0, 4000));
        must(l->recordTransition("wu1", WorkUnitState::Trained, 5000));
        must(l->recordTransition("wu1", WorkUnitState::Uploading, 6000, "attempt 1"));
        back = must(l->workUnit("wu1"));
        QCOMPARE(back->tokens, int64_t{1024});
        QCOMPARE(back->steps, int64_t{2});
        QCOMPARE(back->computeSeconds, 3.0);
        QCOMPARE(back->lossFirst.value(), 5.5);  // kept when the update passes none
        QCOMPARE(back->lossLast.value(), 5.0);
        QCOMPARE(back->trainedAtMs.value(), int64_t{5000});  // set once, at Trained
        QCOMPARE(back->updatedAtMs, int64_t{6000});
        QCOMPARE(back->state, WorkUnitState::Uploading);

        auto ts = must(l->transitions("wu1"));
        QCOMPARE(ts.size(), size_t{5});
        QCOMPARE(ts[0].state, WorkUnitState::Assigned);
        QCOMPARE(ts[0].atMs, int64_t{1000});
        QCOMPARE(ts[4].state, WorkUnitState::Uploading);
        QCOMPARE(ts[4].detail, std::string("attempt 1"));
    }

    void sameStateTwiceIsRecordedOnce() {
        auto l = openFresh();
        must(l->recordWorkUnit(unit("wu1", 1000, WorkUnitState::Training, 0, 0, "cpu")));
        must(l->recordTransition("wu1", WorkUnitState::Training, 2000));
        must(l->recordTransition("wu1", WorkUnitState::Uploading, 3000));
        must(l->recordTransition("wu1", WorkUnitState::Uploading, 4000));
        // Recording the whole unit again in the same state adds no transition either.
        WorkUnitRecord again = unit("wu1", 1000, WorkUnitState::Uploading, 99, 9, "cpu");
        again.updatedAtMs = 5000;
        must(l->recordWorkUnit(again));
        auto ts = must(l->transitions("wu1"));
        QCOMPARE(ts.size(), size_t{2});
        QCOMPARE(must(l->workUnit("wu1"))->tokens, int64_t{99});
        // A state change through recordWorkUnit is a transition at updatedAtMs.
        again.state = WorkUnitState::Uploaded;
        again.updatedAtMs = 6000;
        must(l->recordWorkUnit(again));
        ts = must(l->transitions("wu1"));
        QCOMPARE(ts.size(), size_t{3});
        QCOMPARE(ts[2].atMs, int64_t{6000});
    }

    void unknownWorkUnitIsAnError() {
        auto l = openFresh();
        Status s = l->recordTransition("nope", WorkUnitState::Training, 1);
        QVERIFY(!s.ok());
        QVERIFY2(msg(s.error()).find("no work unit 'nope'") != std::string::npos,
                 msg(s.error()).c_str());
        s = l->updateWorkUnitProgress("nope", 1, 1, 1, std::nullopt, std::nullopt, 1);
        QVERIFY(!s.ok());
        s = l->recordReceipt(receiptFor("nope", 1, 1));
        QVERIFY(!s.ok());
        QVERIFY2(msg(s.error()).find("does not know") != std::string::npos, msg(s.error()).c_str());
        QVERIFY(!must(l->receipt("nope")).has_value());
    }

    void receiptIsIdempotentAndVerbatim() {
        auto l = openFresh();
        must(l->recordWorkUnit(unit("wu1", 1000, WorkUnitState::Uploaded, 10, 1, "cpu")));
        const Receipt r = receiptFor("wu1", 2000, 1.25);
        must(l->recordReceipt(r));
        must(l->recordReceipt(r));  // a retry after a crash
        auto back = must(l->receipt("wu1"));
        QVERIFY(back.has_value());
        QCOMPARE(back->body, r.body);  // including the NUL byte
        QCOMPARE(back->signature, r.signature);
        QCOMPARE(back->roundApplied, int64_t{4});
        QCOMPARE(back->weight, 0.5);
        QCOMPARE(back->credit, 1.25);
        QCOMPARE(must(l->workUnit("wu1"))->state, WorkUnitState::Accepted);
        auto ts = must(l->transitions("wu1"));
        QCOMPARE(ts.size(), size_t{2});  // uploaded, accepted
        QCOMPARE(ts[1].atMs, int64_t{2000});
        QCOMPARE(must(l->totals()).workUnitsAccepted, int64_t{1});

        Receipt other = r;
        other.body.push_back('!');
        Status s = l->recordReceipt(other);
        QVERIFY(!s.ok());
        QVERIFY2(msg(s.error()).find("already has a different receipt") != std::string::npos,
                 msg(s.error()).c_str());
        QCOMPARE(must(l->receipt("wu1"))->body, r.body);
        QVERIFY(l->integrityCheck().ok());
    }

    void emptyReceiptBodyStaysABlob() {
        auto l = openFresh();
        must(l->recordWorkUnit(unit("wu1", 1000, WorkUnitState::Uploaded, 10, 1, "cpu")));
        Receipt r = receiptFor("wu1", 2000, 1);
        r.body.clear();
        must(l->recordReceipt(r));
        QVERIFY(must(l->receipt("wu1"))->body.empty());
        must(l->recordReceipt(r));
    }

    void pendingWorkUnitsAreThoseWithoutReceipt() {
        auto l = openFresh();
        fillFixture(*l);
        auto pending = must(l->pendingWorkUnits());
        QCOMPARE(pending.size(), size_t{1});
        QCOMPARE(pending[0].id, std::string("wu2"));
    }

    void fixturePassesIntegrityCheck() {
        auto l = openFresh();
        fillFixture(*l);
        Status s = l->integrityCheck();
        QVERIFY2(s.ok(), s.ok() ? "" : msg(s.error()).c_str());
    }
};

QTEST_APPLESS_MAIN(TestLedger)
#include "test_ledger.moc"
