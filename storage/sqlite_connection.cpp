// The SQLite backend of storage::Database, and Database::open.
#include "connection.hpp"

#include <sqlite3.h>

#include <functional>
#include <map>
#include <utility>

namespace tandem::storage {

namespace {

class SqliteConnection final : public Connection {
  public:
    SqliteConnection(sqlite3* db, std::string errorPrefix)
        : Connection(std::move(errorPrefix)), m_db(db) {}
    ~SqliteConnection() override {
        for (auto& [sql, stmt] : m_cache)
            sqlite3_finalize(stmt);
        sqlite3_close_v2(m_db);
    }

    Error sqliteError(std::string_view operation, std::string_view sql) const {
        return error(operation, sql, sqlite3_errmsg(m_db));
    }

    Backend backend() const override { return Backend::Sqlite; }
    Status exec(std::string_view sql, std::string_view operation) override;
    Expected<std::unique_ptr<StatementBackend>> prepare(std::string_view sql,
                                                        std::string_view operation,
                                                        bool cached) override;
    int64_t lastInsertId() override { return sqlite3_last_insert_rowid(m_db); }
    int changes() const override { return sqlite3_changes(m_db); }
    Status begin(Commit, std::string_view operation) override {
        return exec("BEGIN IMMEDIATE", operation);
    }
    Expected<int> schemaVersion() override;
    Status setSchemaVersion(int version, std::string_view operation) override {
        return exec("PRAGMA user_version = " + std::to_string(version), operation);
    }
    // BEGIN IMMEDIATE already holds the write lock.
    Status lockForMigration(std::string_view) override { return {}; }
    std::string migrationSql(std::string_view sql) const override { return std::string(sql); }

    sqlite3* m_db;

  private:
    std::map<std::string, sqlite3_stmt*, std::less<>> m_cache;
};

// An owned statement is finalized when it goes, a cached one reset, so it never keeps a read open.
class SqliteStatement final : public StatementBackend {
  public:
    SqliteStatement(const SqliteConnection* connection, sqlite3_stmt* stmt, bool owned,
                    std::string_view operation)
        : m_connection(connection), m_stmt(stmt), m_owned(owned), m_operation(operation) {}
    ~SqliteStatement() override {
        if (m_owned) {
            sqlite3_finalize(m_stmt);
        } else {
            sqlite3_reset(m_stmt);
            sqlite3_clear_bindings(m_stmt);
        }
    }
    SqliteStatement(const SqliteStatement&) = delete;
    SqliteStatement& operator=(const SqliteStatement&) = delete;

    void bindInteger(int index, int64_t value) override {
        check(sqlite3_bind_int64(m_stmt, index, value));
    }
    void bindReal(int index, double value) override {
        check(sqlite3_bind_double(m_stmt, index, value));
    }
    void bindText(int index, std::string_view text) override {
        // A null pointer would bind NULL: an empty string stays a string.
        check(sqlite3_bind_text(m_stmt, index, text.data() != nullptr ? text.data() : "",
                                static_cast<int>(text.size()), SQLITE_TRANSIENT));
    }
    void bindBlob(int index, std::span<const uint8_t> blob) override {
        const void* data = blob.empty() ? static_cast<const void*>("") : blob.data();
        check(sqlite3_bind_blob(m_stmt, index, data, static_cast<int>(blob.size()),
                                SQLITE_TRANSIENT));
    }
    void bindNull(int index) override { check(sqlite3_bind_null(m_stmt, index)); }

    bool step() override {
        if (m_error)
            return false;
        const int rc = sqlite3_step(m_stmt);
        if (rc == SQLITE_ROW)
            return true;
        if (rc != SQLITE_DONE)
            fail();
        return false;
    }
    Status status() const override {
        if (m_error)
            return *m_error;
        return {};
    }

    int64_t integer(int column) const override { return sqlite3_column_int64(m_stmt, column); }
    double real(int column) const override { return sqlite3_column_double(m_stmt, column); }
    std::string text(int column) const override {
        const unsigned char* p = sqlite3_column_text(m_stmt, column);
        const int n = sqlite3_column_bytes(m_stmt, column);
        return p != nullptr ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
                            : std::string();
    }
    std::vector<uint8_t> blob(int column) const override {
        const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(m_stmt, column));
        const int n = sqlite3_column_bytes(m_stmt, column);
        if (p == nullptr || n <= 0)
            return {};
        return std::vector<uint8_t>(p, p + n);
    }
    bool isNull(int column) const override {
        return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
    }

  private:
    void check(int rc) {
        if (rc != SQLITE_OK)
            fail();
    }
    void fail() {
        if (!m_error)
            m_error = m_connection->sqliteError(m_operation, sqlite3_sql(m_stmt));
    }

    const SqliteConnection* m_connection;
    sqlite3_stmt* m_stmt;
    bool m_owned;
    std::string m_operation;
    std::optional<Error> m_error;
};

Status SqliteConnection::exec(std::string_view sql, std::string_view operation) {
    const std::string s(sql);
    char* err = nullptr;
    if (sqlite3_exec(m_db, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string message = err != nullptr ? err : sqlite3_errmsg(m_db);
        sqlite3_free(err);
        return error(operation, sql, message);
    }
    return {};
}

Expected<std::unique_ptr<StatementBackend>> SqliteConnection::prepare(std::string_view sql,
                                                                      std::string_view operation,
                                                                      bool cached) {
    if (!cached) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(m_db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
            SQLITE_OK)
            return sqliteError(operation, sql);
        return std::unique_ptr<StatementBackend>(
            std::make_unique<SqliteStatement>(this, stmt, true, operation));
    }
    auto it = m_cache.find(sql);
    if (it == m_cache.end()) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v3(m_db, sql.data(), static_cast<int>(sql.size()),
                               SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
            return sqliteError(operation, sql);
        it = m_cache.emplace(std::string(sql), stmt).first;
    }
    return std::unique_ptr<StatementBackend>(
        std::make_unique<SqliteStatement>(this, it->second, false, operation));
}

Expected<int> SqliteConnection::schemaVersion() {
    auto q = prepare("PRAGMA user_version", "reading the schema version", false);
    if (!q)
        return q.error();
    (*q)->step();
    if (Status s = (*q)->status(); !s)
        return s.error();
    return static_cast<int>((*q)->integer(0));
}

}  // namespace

Expected<Database> Database::open(const std::filesystem::path& path, OpenOptions options) {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(
        path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
        nullptr);
    // Owns the handle from here on, also when the open failed.
    Database db(std::make_unique<SqliteConnection>(raw, options.errorPrefix));
    if (rc != SQLITE_OK) {
        const std::string message = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
        return makeError(options.errorPrefix + ": cannot open: " + message);
    }
    sqlite3_extended_result_codes(raw, 1);
    sqlite3_busy_timeout(raw, 5000);

    // Read the version before changing anything, so a newer file is left exactly as it was.
    auto version = db.checkSchemaVersion(options);
    if (!version)
        return version.error();

    if (Status s = db.exec("PRAGMA foreign_keys = ON", "enabling foreign keys"); !s)
        return s.error();
    {
        auto q = db.prepare("PRAGMA journal_mode = WAL", "switching to WAL");
        if (!q)
            return q.error();
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        if (q->text(0) != "wal") {
            return makeError(options.errorPrefix + ": cannot switch to WAL (journal mode is " +
                             q->text(0) + ")");
        }
    }
    const char* synchronous = options.synchronous == Synchronous::Full
                                  ? "PRAGMA synchronous = FULL"
                                  : "PRAGMA synchronous = NORMAL";
    if (Status s = db.exec(synchronous, "setting synchronous"); !s)
        return s.error();
    if (Status s = db.migrate(options.migrations, *version); !s)
        return s.error();
    return db;
}

}  // namespace tandem::storage
