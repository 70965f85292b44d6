// The SQLite ledger: migrations, refusal of newer schemas, idempotent recording, every query
// against a fixture with hand-computed values (local day boundaries included), integrity checks.
// Instants below were computed independently (Python datetime) and written out as numbers.
#include "ledger.hpp"

#include <QtTest>

#include <sqlite3.h>

#include <atomic>
#include <fstream>
#include <thread>

using namespace tandem;
using namespace tandem::core;

namespace {

// Fixture zone: UTC+2, no daylight saving.
const FixedOffsetTimeZone kZone(7200);

constexpr int64_t kMar09_2330 = 1773091800000;     // 2026-03-09 23:30 local
constexpr int64_t kMar09_2359 = 1773093540000;     // 2026-03-09 23:59 local
constexpr int64_t kMar10_0000 = 1773093600000;     // 2026-03-10 00:00 local
constexpr int64_t kMar10_0010 = 1773094200000;     // 2026-03-10 00:10 local
constexpr int64_t kMar10_1200 = 1773136800000;     // 2026-03-10 12:00 local
constexpr int64_t kMar10_1205 = 1773137100000;     // 2026-03-10 12:05 local
constexpr int64_t kMar10_1500 = 1773147600000;     // 2026-03-10 15:00 local
constexpr int64_t kMar10_2359_59 = 1773179999999;  // 2026-03-10 23:59:59.999 local
constexpr int64_t kMar11_0800 = 1773208800000;     // 2026-03-11 08:00 local
constexpr int64_t kMar11_0900 = 1773212400000;     // 2026-03-11 09:00 local
constexpr int64_t kMar11_1200 = 1773223200000;     // 2026-03-11 12:00 local

std::string msg(const Error& e) {
    return e.message;
}

template <class T>
T must(Expected<T> e) {
    if (!e.ok())
        qFatal("unexpected error: %s", e.error().message.c_str());
    return std::move(e).value();
}
void must(Status s) {
    if (!s.ok())
        qFatal("unexpected error: %s", s.error().message.c_str());
}

// A raw connection for looking behind the ledger's back.
struct Raw {
    sqlite3* db = nullptr;
    explicit Raw(const std::filesystem::path& p) { sqlite3_open(p.c_str(), &db); }
    ~Raw() { sqlite3_close(db); }
    bool exec(const std::string& sql) {
        return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
    }
    int64_t scalar(const std::string& sql) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
            return -999;
        int64_t v = -998;
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        return v;
    }
    std::string text(const std::string& sql) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
            return "?";
        std::string v;
        if (sqlite3_step(s) == SQLITE_ROW) {
            v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        }
        sqlite3_finalize(s);
        return v;
    }
};

std::string readText(const std::string& path) {
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", path.c_str());
    return f.readAll().toStdString();
}

QByteArray slurp(const std::filesystem::path& p) {
    QFile f(QString::fromStdString(p.string()));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("unreadable");
}

WorkUnitRecord unit(const std::string& id, int64_t createdMs, WorkUnitState state, int64_t tokens,
                    double seconds, const std::string& device) {
    WorkUnitRecord u;
    u.id = id;
    u.run = "run-1";
    u.baseVersion = 3;
    u.config = "tiny";
    u.device = device;
    u.innerSteps = 50;
    u.batchSize = 8;
    u.seqLen = 64;
    u.tokens = tokens;
    u.steps = 50;
    u.computeSeconds = seconds;
    u.lossFirst = 5.5;
    u.lossLast = 3.25;
    u.state = state;
    u.createdAtMs = createdMs;
    u.updatedAtMs = createdMs;
    return u;
}

Receipt receiptFor(const std::string& id, int64_t atMs, double credit) {
    Receipt r;
    r.workUnitId = id;
    r.roundApplied = 4;
    r.weight = 0.5;
    r.credit = credit;
    r.receivedAtMs = atMs;
    r.signature = {1, 2, 3, 0, 255};
    r.body = {'{', '"', 'o', 'k', '"', '}', 0, 7};
    return r;
}

Transfer transfer(int64_t atMs, Direction d, const char* purpose, int64_t bytes, bool ok) {
    Transfer x;
    x.atMs = atMs;
    x.direction = d;
    x.purpose = purpose;
    x.bytes = bytes;
    x.durationMs = 1500;
    x.ok = ok;
    x.workUnitId = "wu-x";
    x.detail = ok ? "" : "connection reset";
    return x;
}

// The fixture described in the comments of each query test.
void fillFixture(Ledger& l) {
    // wu1: cuda, trained Mar 9 23:30, accepted Mar 10 00:10 with credit 1.5.
    must(l.recordWorkUnit(
        unit("wu1", kMar09_2330 - 600000, WorkUnitState::Training, 1000, 100, "cuda:0")));
    must(l.recordTransition("wu1", WorkUnitState::Trained, kMar09_2330));
    must(l.recordTransition("wu1", WorkUnitState::Uploaded, kMar09_2330 + 60000));
    must(l.recordReceipt(receiptFor("wu1", kMar10_0010, 1.5)));
    // wu2: cpu, trained exactly at Mar 10 00:00 (the boundary belongs to Mar 10), pending.
    must(l.recordWorkUnit(unit("wu2", kMar09_2359, WorkUnitState::Training, 2000, 200, "cpu")));
    must(l.recordTransition("wu2", WorkUnitState::Trained, kMar10_0000));
    must(l.recordTransition("wu2", WorkUnitState::Uploaded, kMar10_1200));
    // wu3: cuda, trained at the last millisecond of Mar 10, accepted Mar 11 12:00, credit 2.25.
    must(l.recordWorkUnit(unit("wu3", kMar10_1500, WorkUnitState::Training, 4000, 400, "cuda:0")));
    must(l.recordTransition("wu3", WorkUnitState::Trained, kMar10_2359_59));
    must(l.recordReceipt(receiptFor("wu3", kMar11_1200, 2.25)));
    // wu4 still training, wu5 failed: neither counts.
    must(l.recordWorkUnit(unit("wu4", kMar11_0800, WorkUnitState::Training, 500, 50, "cuda:0")));
    must(l.recordWorkUnit(unit("wu5", kMar11_0900, WorkUnitState::Training, 300, 30, "cpu")));
    must(l.recordTransition("wu5", WorkUnitState::Failed, kMar11_0900 + 1000, "loss is NaN"));

    must(l.recordTransfer(transfer(kMar09_2359, Direction::Down, "data", 100, true)));
    must(l.recordTransfer(transfer(kMar10_0000, Direction::Down, "weights", 1000, true)));
    must(l.recordTransfer(transfer(kMar10_1200, Direction::Up, "result", 500, false)));
    must(l.recordTransfer(transfer(kMar10_1205, Direction::Up, "result", 500, true)));
    must(l.recordTransfer(transfer(kMar11_0800, Direction::Down, "probe", 7, true)));
    must(l.recordTransfer(transfer(kMar11_0800, Direction::Up, "probe", 3, true)));
}

}  // namespace

class TestLedger : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    int m_n = 0;

    std::filesystem::path freshPath() {
        return std::filesystem::path(m_dir.path().toStdString()) /
               ("ledger" + std::to_string(++m_n) + ".db");
    }
    std::unique_ptr<Ledger> openFresh() { return must(Ledger::open(freshPath())); }

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

    // --- queries over the fixture ---

    void totals() {
        auto l = openFresh();
        Totals empty = must(l->totals());
        QCOMPARE(empty.workUnitsTrained, int64_t{0});
        QCOMPARE(empty.bytesUp, int64_t{0});
        fillFixture(*l);
        const Totals t = must(l->totals());
        QCOMPARE(t.workUnitsTrained, int64_t{3});  // wu1, wu2, wu3
        QCOMPARE(t.workUnitsAccepted, int64_t{2});
        QCOMPARE(t.workUnitsPending, int64_t{1});
        QCOMPARE(t.tokens, int64_t{7000});
        QCOMPARE(t.computeSeconds, 700.0);
        QCOMPARE(t.gpuSeconds, 500.0);
        QCOMPARE(t.credit, 3.75);
        QCOMPARE(t.bytesUp, int64_t{1003});
        QCOMPARE(t.bytesDown, int64_t{1107});
    }

    void totalsPerDay() {
        auto l = openFresh();
        fillFixture(*l);
        auto days = must(l->totalsPerDay({2026, 3, 9}, {2026, 3, 12}, kZone));
        QCOMPARE(days.size(), size_t{4});
        QCOMPARE(days[0].date, (LocalDate{2026, 3, 9}));
        QCOMPARE(days[3].date, (LocalDate{2026, 3, 12}));
        // Mar 9: wu1 (23:30). Mar 10: wu2 (00:00 sharp) and wu3 (23:59:59.999).
        QCOMPARE(days[0].workUnits, int64_t{1});
        QCOMPARE(days[0].tokens, int64_t{1000});
        QCOMPARE(days[0].computeSeconds, 100.0);
        QCOMPARE(days[0].gpuSeconds, 100.0);
        QCOMPARE(days[0].credit, 0.0);
        QCOMPARE(days[0].bytesDown, int64_t{100});
        QCOMPARE(days[1].workUnits, int64_t{2});
        QCOMPARE(days[1].tokens, int64_t{6000});
        QCOMPARE(days[1].computeSeconds, 600.0);
        QCOMPARE(days[1].gpuSeconds, 400.0);
        QCOMPARE(days[1].credit, 1.5);  // wu1's receipt at 00:10
        QCOMPARE(days[1].bytesUp, int64_t{1000});
        QCOMPARE(days[1].bytesDown, int64_t{1000});
        QCOMPARE(days[2].workUnits, int64_t{0});
        QCOMPARE(days[2].credit, 2.25);
        QCOMPARE(days[2].bytesUp, int64_t{3});
        QCOMPARE(days[2].bytesDown, int64_t{7});
        QCOMPARE(days[3].workUnits, int64_t{0});
        QCOMPARE(days[3].bytesUp + days[3].bytesDown, int64_t{0});

        // In UTC the same rows fall on other days: wu1 (21:30Z) and wu2 (22:00Z) on Mar 9.
        auto utc = must(l->totalsPerDay({2026, 3, 9}, {2026, 3, 10}, FixedOffsetTimeZone(0)));
        QCOMPARE(utc[0].workUnits, int64_t{2});
        QCOMPARE(utc[0].tokens, int64_t{3000});
        QCOMPARE(utc[0].credit, 1.5);  // 22:10Z
        QCOMPARE(utc[1].workUnits, int64_t{1});

        auto bad = l->totalsPerDay({2026, 3, 10}, {2026, 3, 9}, kZone);
        QVERIFY(!bad.ok());
        QVERIFY(msg(bad.error()).find("before the first") != std::string::npos);
        QVERIFY(!l->totalsPerDay({2000, 1, 1}, {2026, 1, 1}, kZone).ok());
    }

    void transfersPerDay() {
        auto l = openFresh();
        fillFixture(*l);
        auto days = must(l->transfersPerDay({2026, 3, 9}, {2026, 3, 12}, kZone));
        QCOMPARE(days.size(), size_t{4});
        QCOMPARE(days[0].bytesDown, int64_t{100});  // 23:59
        QCOMPARE(days[0].bytesUp, int64_t{0});
        QCOMPARE(days[0].transfers, int64_t{1});
        QCOMPARE(days[1].bytesDown, int64_t{1000});  // 00:00 sharp
        QCOMPARE(days[1].bytesUp, int64_t{1000});    // a failed 500 counts: it used the link
        QCOMPARE(days[1].transfers, int64_t{3});
        QCOMPARE(days[1].failed, int64_t{1});
        QCOMPARE(days[2].bytesUp, int64_t{3});
        QCOMPARE(days[2].bytesDown, int64_t{7});
        QCOMPARE(days[2].transfers, int64_t{2});
        QCOMPARE(days[3].transfers, int64_t{0});
    }

    // A 23-hour local day: UTC+1 until 2026-03-29 01:00Z, UTC+2 after.
    void daysFollowDaylightSaving() {
        const SwitchingTimeZone zone(3600, 1774746000, 7200);
        auto l = openFresh();
        must(l->recordTransfer(transfer(1774738799999, Direction::Up, "x", 1, true)));     // 28th
        must(l->recordTransfer(transfer(1774738800000, Direction::Up, "x", 10, true)));    // 29th
        must(l->recordTransfer(transfer(1774821540000, Direction::Up, "x", 100, true)));   // 29th
        must(l->recordTransfer(transfer(1774823400000, Direction::Up, "x", 1000, true)));  // 30th
        auto days = must(l->transfersPerDay({2026, 3, 28}, {2026, 3, 30}, zone));
        QCOMPARE(days[0].bytesUp, int64_t{1});
        QCOMPARE(days[1].bytesUp, int64_t{110});
        QCOMPARE(days[2].bytesUp, int64_t{1000});
        QCOMPARE(startOfLocalDay({2026, 3, 30}, zone) - startOfLocalDay({2026, 3, 29}, zone),
                 int64_t{23 * 3600 * 1000});
    }

    void bytesUsedToday() {
        auto l = openFresh();
        fillFixture(*l);
        BytesUsed b = must(l->bytesUsedToday(kMar10_1500, kZone));
        QCOMPARE(b.up, int64_t{1000});
        QCOMPARE(b.down, int64_t{1000});
        b = must(l->bytesUsedToday(kMar10_0000, kZone));
        QCOMPARE(b.up, int64_t{1000});
        b = must(l->bytesUsedToday(kMar10_0000 - 1, kZone));
        QCOMPARE(b.up, int64_t{0});
        QCOMPARE(b.down, int64_t{100});
        b = must(l->bytesUsed(kMar10_1200, kMar10_1205 + 1));
        QCOMPARE(b.up, int64_t{1000});
        QCOMPARE(b.down, int64_t{0});
    }

    void recentTransfers() {
        auto l = openFresh();
        fillFixture(*l);
        auto recent = must(l->recentTransfers(3));
        QCOMPARE(recent.size(), size_t{3});
        // Two at Mar 11 08:00: the later-recorded first.
        QCOMPARE(recent[0].atMs, kMar11_0800);
        QCOMPARE(recent[0].direction, Direction::Up);
        QCOMPARE(recent[0].bytes, int64_t{3});
        QCOMPARE(recent[1].direction, Direction::Down);
        QCOMPARE(recent[1].purpose, std::string("probe"));
        QCOMPARE(recent[2].atMs, kMar10_1205);
        QVERIFY(recent[2].ok);
        auto all = must(l->recentTransfers(100));
        QCOMPARE(all.size(), size_t{6});
        QCOMPARE(all[3].atMs, kMar10_1200);
        QVERIFY(!all[3].ok);
        QCOMPARE(all[3].detail, std::string("connection reset"));
        QCOMPARE(all[3].durationMs, int64_t{1500});
        QCOMPARE(all[3].workUnitId, std::string("wu-x"));
    }

    void throughputRawAndBucketed() {
        auto l = openFresh();
        const int64_t t0 = 1'000'000;
        auto sample = [&](int64_t dtS, double tps, std::optional<double> util,
                          std::optional<double> temp, const char* device) {
            DeviceSample s;
            s.atMs = t0 + dtS * 1000;
            s.device = device;
            s.tokensPerSecond = tps;
            s.utilisation = util;
            s.temperatureC = temp;
            s.memoryUsedBytes = 1 << 20;
            must(l->recordSample(s));
        };
        sample(-1, 999, 0.1, 99, "cuda:0");  // before the range
        sample(0, 100, 0.5, 60, "cuda:0");
        sample(30, 200, std::nullopt, 70, "cuda:0");
        sample(60, 300, 1.0, std::nullopt, "cuda:0");
        sample(90, 400, std::nullopt, std::nullopt, "cuda:1");
        sample(150, 500, 0.9, 50, "cuda:0");  // at the exclusive end

        auto raw = must(l->throughput(t0, t0 + 150'000));
        QCOMPARE(raw.size(), size_t{4});
        QCOMPARE(raw[0].atMs, t0);
        QCOMPARE(raw[0].tokensPerSecond, 100.0);
        QCOMPARE(raw[0].utilisation.value(), 0.5);
        QVERIFY(!raw[1].utilisation.has_value());
        QCOMPARE(raw[3].tokensPerSecond, 400.0);

        auto b = must(l->throughput(t0, t0 + 150'000, 60'000));
        QCOMPARE(b.size(), size_t{2});
        QCOMPARE(b[0].atMs, t0);
        QCOMPARE(b[0].samples, int64_t{2});
        QCOMPARE(b[0].tokensPerSecond, 150.0);
        QCOMPARE(b[0].utilisation.value(), 0.5);    // only one sample had one
        QCOMPARE(b[0].temperatureC.value(), 70.0);  // the maximum
        QCOMPARE(b[1].atMs, t0 + 60'000);
        QCOMPARE(b[1].tokensPerSecond, 350.0);
        QCOMPARE(b[1].utilisation.value(), 1.0);
        QVERIFY(!b[1].temperatureC.has_value());

        auto one = must(l->throughput(t0, t0 + 150'000, 60'000, "cuda:0"));
        QCOMPARE(one.size(), size_t{2});
        QCOMPARE(one[1].samples, int64_t{1});
        QCOMPARE(one[1].tokensPerSecond, 300.0);

        // Buckets without samples are left out: 30 s buckets, 90 s..120 s has only cuda:1.
        auto sparse = must(l->throughput(t0, t0 + 200'000, 30'000, "cuda:0"));
        QCOMPARE(sparse.size(), size_t{4});
        QCOMPARE(sparse[3].atMs, t0 + 150'000);
        QVERIFY(must(l->throughput(t0, t0, 0)).empty());
        QCOMPARE(must(l->pruneSamplesBefore(t0 + 30'000)), int64_t{2});  // -1 s and 0 s
        QCOMPARE(must(l->throughput(t0 - 10'000, t0 + 200'000)).size(), size_t{4});
        QVERIFY(!l->throughput(t0, t0 + 1, -5).ok());
    }

    void eventsFilteredByLevelTextAndTime() {
        auto l = openFresh();
        must(l->recordEvent(1000, EventLevel::Debug, "Starting up"));
        must(l->recordEvent(2000, EventLevel::Info, "Downloaded weights v3"));
        must(l->recordEvent(3000, EventLevel::Warning, "Upload slow: 12 kB/s (50% of cap_limit)"));
        must(l->recordEvent(4000, EventLevel::Error, "UPLOAD failed: timeout"));
        must(l->recordEvent(4000, EventLevel::Info, "upload resumed"));

        auto all = must(l->events({}));
        QCOMPARE(all.size(), size_t{5});
        QCOMPARE(all[0].message, std::string("upload resumed"));  // same time: later id first
        QCOMPARE(all[4].level, EventLevel::Debug);

        EventFilter f;
        f.minLevel = EventLevel::Warning;
        auto warn = must(l->events(f));
        QCOMPARE(warn.size(), size_t{2});
        QCOMPARE(warn[0].level, EventLevel::Error);
        QCOMPARE(warn[1].atMs, int64_t{3000});

        f = {};
        f.text = "UpLoad";
        QCOMPARE(must(l->events(f)).size(), size_t{3});
        f.minLevel = EventLevel::Error;
        QCOMPARE(must(l->events(f)).size(), size_t{1});

        // LIKE wildcards are plain characters.
        f = {};
        f.text = "50%";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "%";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "cap_l";
        QCOMPARE(must(l->events(f)).size(), size_t{1});
        f.text = "s_ow";  // would match "slow" as a LIKE pattern
        QCOMPARE(must(l->events(f)).size(), size_t{0});

        f = {};
        f.fromMs = 2000;
        f.toMs = 4000;
        auto range = must(l->events(f));
        QCOMPARE(range.size(), size_t{2});
        QCOMPARE(range[0].atMs, int64_t{3000});
        QCOMPARE(range[1].atMs, int64_t{2000});

        f = {};
        f.limit = 2;
        auto limited = must(l->events(f));
        QCOMPARE(limited.size(), size_t{2});
        QCOMPARE(limited[1].message, std::string("UPLOAD failed: timeout"));
    }

    void workUnitsListWithReceiptState() {
        auto l = openFresh();
        fillFixture(*l);
        auto rows = must(l->workUnits(10));
        QCOMPARE(rows.size(), size_t{5});
        // Newest created first: wu5, wu4, wu3, wu2, wu1.
        QCOMPARE(rows[0].unit.id, std::string("wu5"));
        QCOMPARE(rows[0].unit.state, WorkUnitState::Failed);
        QVERIFY(!rows[0].receipt.has_value());
        QCOMPARE(rows[2].unit.id, std::string("wu3"));
        QVERIFY(rows[2].receipt.has_value());
        QCOMPARE(rows[2].receipt->credit, 2.25);
        QCOMPARE(rows[2].receipt->receivedAtMs, kMar11_1200);
        QCOMPARE(rows[2].unit.trainedAtMs.value(), kMar10_2359_59);
        QCOMPARE(rows[3].unit.id, std::string("wu2"));
        QCOMPARE(rows[3].unit.state, WorkUnitState::Uploaded);
        QVERIFY(!rows[3].receipt.has_value());
        QCOMPARE(rows[4].receipt->roundApplied, int64_t{4});
        auto page = must(l->workUnits(2, 3));
        QCOMPARE(page.size(), size_t{2});
        QCOMPARE(page[0].unit.id, std::string("wu2"));
        QCOMPARE(page[1].unit.id, std::string("wu1"));
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
