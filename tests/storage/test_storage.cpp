// The shared SQLite wrapper (storage/database.hpp) on its own: what open() sets, migrations and
// the refusal of a newer file, values that must not turn into NULL, bind and SQL errors, cached
// statements, and transactions that roll back. The ledger and coordinator tests cover its use.
#include "database.hpp"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <array>

using namespace tandem;
using namespace tandem::storage;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

QByteArray slurp(const std::filesystem::path& p) {
    QFile f(QString::fromStdString(p.string()));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

int64_t scalar(Database& db, const char* sql) {
    auto q = db.prepare(sql);
    if (!q || !q->step())
        return -1;
    return q->integer(0);
}

// (Designated initializers that leave out the last members warn under -Wextra with g++ 12.)
OpenOptions options(std::span<const std::string_view> migrations, std::string prefix = "thing",
                    std::string newerHint = {}, Synchronous synchronous = Synchronous::Full) {
    OpenOptions o;
    o.errorPrefix = std::move(prefix);
    o.synchronous = synchronous;
    o.migrations = migrations;
    o.newerHint = std::move(newerHint);
    return o;
}

constexpr std::array<std::string_view, 2> kTwo = {
    "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL, s TEXT NOT NULL);",
    "ALTER TABLE t ADD COLUMN n INTEGER;",
};

}  // namespace

class TestStorage : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    int m_count = 0;
    std::filesystem::path freshPath() {
        return std::filesystem::path(m_dir.path().toStdString()) /
               ("db" + std::to_string(++m_count) + ".sqlite");
    }

  private slots:
    void openSetsWalForeignKeysAndSynchronous() {
        auto db = Database::open(freshPath(), options({}, "thing", {}, Synchronous::Normal));
        QVERIFY(db.ok());
        auto q = db->prepare("PRAGMA journal_mode");
        QVERIFY(q.ok() && q->step());
        QCOMPARE(q->text(0), std::string("wal"));
        QCOMPARE(scalar(*db, "PRAGMA foreign_keys"), int64_t{1});
        QCOMPARE(scalar(*db, "PRAGMA synchronous"), int64_t{1});  // NORMAL
        auto full = Database::open(freshPath());
        QVERIFY(full.ok());
        QCOMPARE(scalar(*full, "PRAGMA synchronous"), int64_t{2});  // FULL
    }

    void migratesStepByStepAndRefusesANewerFileUntouched() {
        const auto path = freshPath();
        {
            auto db = Database::open(path, options(std::span(kTwo).first(1)));
            QVERIFY(db.ok());
            QCOMPARE(*db->userVersion(), 1);
        }
        {
            auto db = Database::open(path, options(kTwo));
            QVERIFY(db.ok());
            QCOMPARE(*db->userVersion(), 2);
            QVERIFY(db->exec("PRAGMA user_version = 7").ok());
            QVERIFY(db->exec("PRAGMA journal_mode = DELETE").ok());
        }
        const QByteArray before = slurp(path);
        QVERIFY(!before.isEmpty());
        auto db = Database::open(path, options(kTwo, "thing", "update the program"));
        QVERIFY(!db.ok());
        const std::string m = db.error().message;
        QVERIFY2(contains(m, "thing: schema version 7 is newer"), m.c_str());
        QVERIFY2(contains(m, "knows versions up to 2; update the program"), m.c_str());
        QCOMPARE(slurp(path), before);
        QVERIFY(!std::filesystem::exists(path.string() + "-wal"));
    }

    void failedMigrationLeavesTheVersion() {
        const auto path = freshPath();
        const std::array<std::string_view, 2> bad = {kTwo[0], "INSERT INTO missing VALUES (1);"};
        auto db = Database::open(path, options(bad));
        QVERIFY(!db.ok());
        QVERIFY2(contains(db.error().message,
                          "thing: migrating from schema version 1 to 2: "
                          "no such table: missing"),
                 db.error().message.c_str());
        auto again = Database::open(path);
        QVERIFY(again.ok());
        QCOMPARE(*again->userVersion(), 1);
    }

    // An empty blob and an empty string are values: NOT NULL columns accept them.
    void emptyBlobAndTextAreNotNull() {
        auto db = Database::open(freshPath(), options(kTwo));
        QVERIFY(db.ok());
        auto q = db->prepare("INSERT INTO t (v, s) VALUES (?, ?)");
        QVERIFY(q.ok());
        q->bind(1, std::span<const uint8_t>()).bind(2, std::string_view());
        QVERIFY2(q->run().ok(), q->status().ok() ? "" : q->status().error().message.c_str());
        auto r = db->prepare("SELECT typeof(v), length(v), typeof(s), v FROM t");
        QVERIFY(r.ok() && r->step());
        QCOMPARE(r->text(0), std::string("blob"));
        QCOMPARE(r->integer(1), int64_t{0});
        QCOMPARE(r->text(2), std::string("text"));
        QVERIFY(!r->isNull(3));
        QCOMPARE(r->blob(3), std::vector<uint8_t>());
    }

    void errorsNameTheOperationOrQuoteTheSql() {
        auto db = Database::open(freshPath(), options(kTwo));
        QVERIFY(db.ok());
        auto bad = db->prepare("SELEC 1");
        QVERIFY(!bad.ok());
        QVERIFY2(
            contains(bad.error().message, "thing: ") && contains(bad.error().message, "in SELEC 1"),
            bad.error().message.c_str());
        auto q = db->prepare("INSERT INTO t (v, s) VALUES (?, ?)", "adding a row");
        QVERIFY(q.ok());
        q->bind(3, int64_t{1});  // out of range: reported by the step
        QVERIFY(!q->step());
        QVERIFY2(contains(q->status().error().message, "thing: adding a row: "),
                 q->status().error().message.c_str());
        auto n = db->prepare("INSERT INTO t (v, s) VALUES (NULL, 'x')");
        QVERIFY(n.ok());
        QVERIFY(!n->run().ok());
        QVERIFY2(contains(n->status().error().message, "NOT NULL"),
                 n->status().error().message.c_str());
    }

    // A cached statement is reset after each use, so its bindings and cursor do not leak.
    void cachedStatementsAreResetAfterUse() {
        auto db = Database::open(freshPath(), options(kTwo));
        QVERIFY(db.ok());
        for (int i = 0; i < 3; ++i) {
            auto q = db->prepareCached("INSERT INTO t (v, s, n) VALUES (x'01', 's', ?)");
            QVERIFY(q.ok());
            if (i != 1)
                q->bind(1, int64_t{i});
            QVERIFY(q->run().ok());
        }
        QCOMPARE(scalar(*db, "SELECT count(*) FROM t WHERE n IS NULL"), int64_t{1});
        for (int i = 0; i < 2; ++i) {
            auto q = db->prepareCached("SELECT n FROM t ORDER BY id");
            QVERIFY(q.ok() && q->step());
            QCOMPARE(q->optionalInteger(0), std::optional<int64_t>(0));  // the first row again
        }
    }

    void transactionRollsBackUnlessCommitted() {
        auto db = Database::open(freshPath(), options(kTwo));
        QVERIFY(db.ok());
        {
            Transaction t(*db);
            QVERIFY(t.started().ok());
            QVERIFY(db->exec("INSERT INTO t (v, s) VALUES (x'01', 'a')").ok());
        }
        QCOMPARE(scalar(*db, "SELECT count(*) FROM t"), int64_t{0});
        {
            Transaction t(*db);
            QVERIFY(db->exec("INSERT INTO t (v, s) VALUES (x'01', 'b')").ok());
            QVERIFY(t.commit().ok());
        }
        QCOMPARE(scalar(*db, "SELECT count(*) FROM t"), int64_t{1});
        QCOMPARE(db->changes(), 1);
        QVERIFY(db->lastInsertId() > 0);
    }
};

QTEST_APPLESS_MAIN(TestStorage)
#include "test_storage.moc"
