// What the ledger's tests share: the fixture's time zone and instants (computed independently
// with Python's datetime and written out as numbers), records, the fixture itself, a raw SQLite
// connection for looking behind the ledger's back, and small helpers.
#pragma once

#include "ledger.hpp"

#include <QtTest>

#include <sqlite3.h>

#include <filesystem>
#include <string>

namespace tandem::core::testing {

// Fixture zone: UTC+2, no daylight saving.
inline const FixedOffsetTimeZone kZone(7200);

inline constexpr int64_t kMar09_2330 = 1773091800000;     // 2026-03-09 23:30 local
inline constexpr int64_t kMar09_2359 = 1773093540000;     // 2026-03-09 23:59 local
inline constexpr int64_t kMar10_0000 = 1773093600000;     // 2026-03-10 00:00 local
inline constexpr int64_t kMar10_0010 = 1773094200000;     // 2026-03-10 00:10 local
inline constexpr int64_t kMar10_1200 = 1773136800000;     // 2026-03-10 12:00 local
inline constexpr int64_t kMar10_1205 = 1773137100000;     // 2026-03-10 12:05 local
inline constexpr int64_t kMar10_1500 = 1773147600000;     // 2026-03-10 15:00 local
inline constexpr int64_t kMar10_2359_59 = 1773179999999;  // 2026-03-10 23:59:59.999 local
inline constexpr int64_t kMar11_0800 = 1773208800000;     // 2026-03-11 08:00 local
inline constexpr int64_t kMar11_0900 = 1773212400000;     // 2026-03-11 09:00 local
inline constexpr int64_t kMar11_1200 = 1773223200000;     // 2026-03-11 12:00 local

inline std::string msg(const Error& e) {
    return e.message;
}

template <class T>
T must(Expected<T> e) {
    if (!e.ok())
        qFatal("unexpected error: %s", e.error().message.c_str());
    return std::move(e).value();
}
inline void must(Status s) {
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

inline std::string readText(const std::string& path) {
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", path.c_str());
    return f.readAll().toStdString();
}

inline QByteArray slurp(const std::filesystem::path& p) {
    QFile f(QString::fromStdString(p.string()));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("unreadable");
}

inline WorkUnitRecord unit(const std::string& id, int64_t createdMs, WorkUnitState state,
                           int64_t tokens, double seconds, const std::string& device) {
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

inline Receipt receiptFor(const std::string& id, int64_t atMs, double credit) {
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

inline Transfer transfer(int64_t atMs, Direction d, const char* purpose, int64_t bytes, bool ok) {
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
inline void fillFixture(Ledger& l) {
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

// A fresh ledger file per test in one temporary directory.
class LedgerFiles {
  protected:
    QTemporaryDir m_dir;
    int m_n = 0;

    std::filesystem::path freshPath() {
        return std::filesystem::path(m_dir.path().toStdString()) /
               ("ledger" + std::to_string(++m_n) + ".db");
    }
    std::unique_ptr<Ledger> openFresh() { return must(Ledger::open(freshPath())); }
};

}  // namespace tandem::core::testing
