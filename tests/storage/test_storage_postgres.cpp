// The PostgreSQL backend of storage::Database against a real PostgreSQL 15 (a cluster of the
// test's own, tests/tools/with_postgres): every bind type read back exactly, NULLs, empty blobs
// and text, cached statements, changes and ids, transactions that roll back, migrations from 0
// and the refusal of a newer schema, relaxed commits, and clear errors for a wrong URL, a wrong
// password, a down server and a connection lost in use.
#include "postgres.hpp"
#include "postgres_cluster.hpp"

#include <QtTest>

#include <array>
#include <bit>
#include <cmath>
#include <limits>

using namespace tandem;
using namespace tandem::storage;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

OpenOptions options(std::span<const std::string_view> migrations, std::string newerHint = {}) {
    OpenOptions o;
    o.errorPrefix = "store";
    o.migrations = migrations;
    o.newerHint = std::move(newerHint);
    return o;
}

int64_t scalar(Database& db, const char* sql) {
    auto q = db.prepare(sql);
    if (!q || !q->step())
        return -1;
    return q->integer(0);
}

constexpr std::array<std::string_view, 3> kThree = {
    "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL, s TEXT NOT NULL);",
    "ALTER TABLE t ADD COLUMN n INTEGER;",
    "CREATE TABLE u (k TEXT PRIMARY KEY, x REAL);",
};

}  // namespace

class TestStoragePostgres : public QObject {
    Q_OBJECT

    int m_count = 0;
    std::string m_url;

    // A fresh database for each test function.
    Database fresh(std::span<const std::string_view> migrations = kThree) {
        auto url = testing::freshPostgresDatabase("storage_" + std::to_string(++m_count));
        if (!url)
            qFatal("%s", url.error().message.c_str());
        m_url = *url;
        auto db = openPostgres(m_url, options(migrations));
        if (!db)
            qFatal("%s", db.error().message.c_str());
        return std::move(*db);
    }

  private slots:
    void initTestCase() {
        if (!testing::postgresUrl())
            QSKIP(
                "no PostgreSQL cluster: run through tests/tools/with_postgres (ctest -L "
                "postgres)");
    }

    void everyBindTypeReadsBackExactly() {
        Database db = fresh();
        QVERIFY(db.exec("CREATE TABLE v (i BIGINT, r DOUBLE PRECISION, s TEXT, b BYTEA)").ok());
        const std::vector<int64_t> ints = {0, -1, 42, std::numeric_limits<int64_t>::max(),
                                           std::numeric_limits<int64_t>::min()};
        const std::vector<double> reals = {0.1,
                                           -2.5e-300,
                                           1.0 / 3.0,
                                           std::numeric_limits<double>::max(),
                                           std::numeric_limits<double>::denorm_min(),
                                           std::numeric_limits<double>::infinity()};
        std::vector<uint8_t> allBytes(256);
        for (int i = 0; i < 256; ++i)
            allBytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
        const std::string text = "it's \"quoted\", ?, $1, \\x00 and \xc3\xa4\xe2\x82\xac";
        for (size_t i = 0; i < ints.size(); ++i) {
            auto q = db.prepare("INSERT INTO v(i, r, s, b) VALUES (?, ?, ?, ?)");
            QVERIFY(q.ok());
            q->bind(1, ints[i]).bind(2, reals[i]).bind(3, text).bind(4, std::span(allBytes));
            QVERIFY2(q->run().ok(), q->status().ok() ? "" : q->status().error().message.c_str());
        }
        auto q = db.prepare("SELECT i, r, s, b FROM v ORDER BY i");
        QVERIFY(q.ok());
        std::vector<int64_t> sorted = ints;
        std::sort(sorted.begin(), sorted.end());
        size_t row = 0;
        while (q->step()) {
            QCOMPARE(q->integer(0), sorted[row]);
            const auto at = std::find(ints.begin(), ints.end(), sorted[row]) - ints.begin();
            // Bit for bit: the text form of float8 is the shortest exact one.
            QCOMPARE(std::bit_cast<uint64_t>(q->real(1)),
                     std::bit_cast<uint64_t>(reals[static_cast<size_t>(at)]));
            QCOMPARE(q->text(2), text);
            QCOMPARE(q->blob(3), allBytes);
            ++row;
        }
        QVERIFY(q->status().ok());
        QCOMPARE(row, ints.size());
    }

    void nullsEmptyBlobsAndEmptyTextStayApart() {
        Database db = fresh();
        QVERIFY(db.exec("CREATE TABLE v (k BIGINT, i BIGINT, r DOUBLE PRECISION, s TEXT, b BYTEA)")
                    .ok());
        {
            auto q = db.prepare("INSERT INTO v VALUES (1, ?, ?, ?, ?)");
            q->bindNull(1).bind(2, std::optional<double>()).bind(3, std::optional<int64_t>());
            q->bindNull(4);
            QVERIFY(q->run().ok());
        }
        {
            auto q = db.prepare("INSERT INTO v VALUES (2, ?, ?, ?, ?)");
            q->bind(1, std::optional<int64_t>(0)).bind(2, std::optional<double>(0.0));
            q->bind(3, std::string_view()).bind(4, std::span<const uint8_t>());
            QVERIFY(q->run().ok());
        }
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM v WHERE b IS NULL"), 1);
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM v WHERE b = ''::bytea AND s = ''"), 1);
        auto q = db.prepare("SELECT i, r, s, b FROM v ORDER BY k");
        QVERIFY(q->step());
        for (int c = 0; c < 4; ++c)
            QVERIFY(q->isNull(c));
        QCOMPARE(q->optionalInteger(0), std::optional<int64_t>());
        QCOMPARE(q->optionalReal(1), std::optional<double>());
        QVERIFY(q->step());
        for (int c = 0; c < 4; ++c)
            QVERIFY(!q->isNull(c));
        QCOMPARE(q->optionalInteger(0), std::optional<int64_t>(0));
        QCOMPARE(q->optionalReal(1), std::optional<double>(0.0));
        QCOMPARE(q->text(2), std::string());
        QVERIFY(q->blob(3).empty());
        QVERIFY(!q->step());
    }

    void placeholdersSumsAndBooleansReadAsSqliteWould() {
        Database db = fresh();
        auto q = db.prepare("SELECT ?2, ?1 || 'x', ?2 + 1, ? = 7");
        q->bind(1, "a").bind(2, int64_t{6}).bind(3, int64_t{7});
        QVERIFY2(q->step(), q->status().ok() ? "" : q->status().error().message.c_str());
        QCOMPARE(q->integer(0), 6);
        QCOMPARE(q->text(1), std::string("ax"));
        QCOMPARE(q->integer(2), 7);
        QCOMPARE(q->integer(3), 1);  // a boolean
        // SUM over BIGINT is numeric in PostgreSQL; it reads as an integer all the same.
        QVERIFY(db.exec("CREATE TABLE n (x BIGINT)").ok());
        QVERIFY(db.exec("INSERT INTO n VALUES (9007199254740993), (1)").ok());
        QCOMPARE(scalar(db, "SELECT SUM(x) FROM n"), int64_t{9007199254740994});
    }

    void lastInsertIdAndChanges() {
        Database db = fresh();
        for (int64_t expected = 1; expected <= 3; ++expected) {
            auto q = db.prepare("INSERT INTO t(v, s) VALUES (?, 'x')");
            q->bind(1, std::span<const uint8_t>());
            QVERIFY(q->run().ok());
            QCOMPARE(db.lastInsertId(), expected);
        }
        QVERIFY(db.exec("UPDATE t SET n = 5 WHERE id >= 2").ok());
        QCOMPARE(db.changes(), 2);
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM t"), 3);  // a SELECT leaves changes() alone
        QCOMPARE(db.changes(), 2);
        auto d = db.prepare("DELETE FROM t WHERE id = ?");
        d->bind(1, int64_t{3});
        QVERIFY(d->run().ok());
        QCOMPARE(db.changes(), 1);
    }

    void cachedStatementsTakeNewBindsAndNulls() {
        Database db = fresh();
        for (int i = 0; i < 4; ++i) {
            auto q = db.prepareCached("INSERT INTO u(k, x) VALUES (?, ?)");
            QVERIFY(q.ok());
            q->bind(1, "k" + std::to_string(i));
            if (i % 2 == 0)
                q->bindNull(2);
            else
                q->bind(2, i * 0.5);
            QVERIFY2(q->run().ok(), q->status().ok() ? "" : q->status().error().message.c_str());
        }
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u WHERE x IS NULL"), 2);
        auto q = db.prepareCached("SELECT x FROM u WHERE k = ?");
        q->bind(1, "k3");
        QVERIFY(q->step());
        QCOMPARE(q->real(0), 1.5);
    }

    void transactionsRollBackUnlessCommitted() {
        Database db = fresh();
        {
            Transaction t(db, "adding");
            QVERIFY(t.started().ok());
            QVERIFY(db.exec("INSERT INTO u VALUES ('gone', 1)").ok());
        }  // no commit
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), 0);
        {
            Transaction t(db, "adding");
            QVERIFY(db.exec("INSERT INTO u VALUES ('kept', 1)").ok());
            QVERIFY(t.commit().ok());
        }
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), 1);
        {
            // An error inside: the commit says so and nothing of the transaction stays.
            Transaction t(db, "adding twice");
            QVERIFY(db.exec("INSERT INTO u VALUES ('new', 1)").ok());
            QVERIFY(!db.exec("INSERT INTO u VALUES ('kept', 2)").ok());
            Status s = t.commit();
            QVERIFY(!s.ok());
            QVERIFY2(contains(s.error().message,
                              "store: adding twice: the transaction was "
                              "rolled back after an earlier error"),
                     s.error().message.c_str());
        }
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), 1);
    }

    void relaxedCommitsTurnOffSynchronousCommitForTheirTransactionOnly() {
        Database db = fresh();
        auto setting = [&] {
            auto q = db.prepare("SHOW synchronous_commit");
            return q && q->step() ? q->text(0) : std::string("?");
        };
        {
            Transaction t(db, "heartbeats", Commit::Relaxed);
            QCOMPARE(setting(), std::string("off"));
            QVERIFY(t.commit().ok());
        }
        QCOMPARE(setting(), std::string("on"));
        Transaction t(db, "results");
        QCOMPARE(setting(), std::string("on"));
    }

    void migratesFromZeroAndRefusesANewerSchemaUntouched() {
        Database db = fresh(std::span(kThree).first(0));
        QCOMPARE(*db.userVersion(), 0);
        auto one = openPostgres(m_url, options(std::span(kThree).first(1)));
        QVERIFY(one.ok());
        QCOMPARE(*one->userVersion(), 1);
        auto three = openPostgres(m_url, options(kThree));
        QVERIFY(three.ok());
        QCOMPARE(*three->userVersion(), 3);
        QVERIFY(three->exec("INSERT INTO t(v, s, n) VALUES ('\\x00', 'a', 1)").ok());
        QVERIFY(three->exec("INSERT INTO u VALUES ('a', 0.5)").ok());
        // The types are PostgreSQL's: 64-bit integers, doubles, bytea.
        auto q = three->prepare(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 't' ORDER BY "
            "ordinal_position");
        std::vector<std::string> types;
        while (q->step())
            types.push_back(q->text(0));
        QCOMPARE(types, (std::vector<std::string>{"bigint", "bytea", "text", "bigint"}));

        auto older = openPostgres(m_url, options(std::span(kThree).first(2), "use a newer one"));
        QVERIFY(!older.ok());
        QCOMPARE(older.error().message,
                 std::string("store: schema version 3 is newer than this program, which knows "
                             "versions up to 2; use a newer one"));
        QCOMPARE(*three->userVersion(), 3);
        QCOMPARE(scalar(*three, "SELECT COUNT(*) FROM u"), 1);
    }

    void failedMigrationLeavesTheVersion() {
        Database db = fresh(std::span(kThree).first(1));
        const std::array<std::string_view, 2> broken = {
            kThree[0], "CREATE TABLE w (a INTEGER); CREATE TABLE oops (;"};
        auto again = openPostgres(m_url, options(broken));
        QVERIFY(!again.ok());
        QVERIFY2(contains(again.error().message,
                          "store: migrating from schema version 1 to 2: syntax error"),
                 again.error().message.c_str());
        QCOMPARE(*db.userVersion(), 1);
        QCOMPARE(scalar(db,
                        "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = "
                        "'w'"),
                 0);
    }

    void sqlErrorsNameTheOperationOrQuoteTheSql() {
        Database db = fresh();
        auto q = db.prepare("SELECT nope FROM t WHERE id = ?", "reading things");
        QVERIFY(q.ok());  // the server parses at the first step
        q->bind(1, int64_t{1});
        QVERIFY(!q->step());
        QVERIFY2(contains(q->status().error().message,
                          "store: reading things: column \"nope\" does not exist"),
                 q->status().error().message.c_str());
        Status s = db.exec("INSERT INTO nowhere VALUES (1)");
        QVERIFY2(contains(s.error().message,
                          "store: relation \"nowhere\" does not exist in "
                          "INSERT INTO nowhere VALUES (1)"),
                 s.error().message.c_str());
        auto b = db.prepare("SELECT ?");
        b->bind(2, int64_t{1});
        QVERIFY(!b->step());
        QVERIFY(contains(b->status().error().message, "column index out of range"));
    }

    void connectionErrorsSayWhatIsWrongWithoutThePassword() {
        const std::string good = *testing::postgresUrl();
        const std::string password = std::getenv("PGPASSWORD");
        // A wrong password.
        std::string wrong = good;
        wrong.replace(wrong.find(password), password.size(), "not-the-password");
        auto a = openPostgres(wrong, options({}));
        QVERIFY(!a.ok());
        QVERIFY2(contains(a.error().message, "store: cannot connect to postgresql://") &&
                     contains(a.error().message, ":***@") &&
                     contains(a.error().message, "password authentication failed") &&
                     !contains(a.error().message, "not-the-password"),
                 a.error().message.c_str());
        // A database that does not exist.
        auto b = openPostgres(*testing::postgresUrl("no_such_db"), options({}));
        QVERIFY(!b.ok());
        QVERIFY2(contains(b.error().message, "database \"no_such_db\" does not exist") &&
                     !contains(b.error().message, password),
                 b.error().message.c_str());
        // No server on that port (a down server).
        std::string down = good;
        const std::string port = std::string(":") + std::getenv("PGPORT") + "/";
        down.replace(down.find(port), port.size(), ":1/");
        auto c = openPostgres(down, options({}));
        QVERIFY(!c.ok());
        QVERIFY2(contains(c.error().message, "Connection refused"), c.error().message.c_str());
        // Not a URL libpq understands.
        auto d = openPostgres("postgresql://host:notaport/db", options({}));
        QVERIFY(!d.ok());
        QVERIFY2(contains(d.error().message, "store: cannot connect to postgresql://host:notaport"),
                 d.error().message.c_str());
    }

    void aLostConnectionFailsItsTransactionThenReconnects() {
        Database db = fresh();
        auto killer = openPostgres(m_url, options({}));
        QVERIFY(killer.ok());
        auto kill = [&] {
            auto k = killer->prepare(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                "current_database() AND pid <> pg_backend_pid()");
            QVERIFY(k->run().ok());
        };
        QVERIFY(db.exec("INSERT INTO u VALUES ('before', 1)").ok());
        {
            Transaction t(db, "adding");
            QVERIFY(t.started().ok());
            QVERIFY(db.exec("INSERT INTO u VALUES ('lost', 1)").ok());
            kill();
            Status s = db.exec("INSERT INTO u VALUES ('lost too', 1)", "adding");
            QVERIFY(!s.ok());
            QVERIFY2(contains(s.error().message, "store: adding: "), s.error().message.c_str());
            Status c = t.commit();
            QVERIFY(!c.ok());
            QVERIFY2(contains(c.error().message, "lost the connection to postgresql://") &&
                         contains(c.error().message, "in the middle of a transaction"),
                     c.error().message.c_str());
        }
        // The next use connects again; nothing of the lost transaction was committed.
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), 1);
        kill();
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), -1);  // this one meets the closed socket
        QCOMPARE(scalar(db, "SELECT COUNT(*) FROM u"), 1);
    }
};

QTEST_GUILESS_MAIN(TestStoragePostgres)
#include "test_storage_postgres.moc"
