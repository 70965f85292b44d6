#include "database.hpp"

#include <sqlite3.h>

#include <functional>
#include <map>
#include <utility>

namespace tandem::storage {

class Connection {
  public:
    Connection(sqlite3* db, std::string errorPrefix)
        : m_db(db), m_errorPrefix(std::move(errorPrefix)) {}
    ~Connection() {
        for (auto& [sql, stmt] : m_cache)
            sqlite3_finalize(stmt);
        sqlite3_close_v2(m_db);
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    Error error(std::string_view operation, std::string_view sql, std::string_view message) const {
        if (!operation.empty())
            return makeError(m_errorPrefix + ": " + std::string(operation) + ": " +
                             std::string(message));
        return makeError(m_errorPrefix + ": " + std::string(message) + " in " + std::string(sql));
    }
    Error error(std::string_view operation, std::string_view sql) const {
        return error(operation, sql, sqlite3_errmsg(m_db));
    }

    sqlite3* m_db;
    std::string m_errorPrefix;
    std::map<std::string, sqlite3_stmt*, std::less<>> m_cache;
};

// --- Statement ---

Statement::Statement(const Connection* connection, sqlite3_stmt* stmt, bool owned,
                     std::string_view operation)
    : m_connection(connection), m_stmt(stmt), m_owned(owned), m_operation(operation) {}

Statement::Statement(Statement&& other) noexcept
    : m_connection(other.m_connection),
      m_stmt(std::exchange(other.m_stmt, nullptr)),
      m_owned(other.m_owned),
      m_operation(std::move(other.m_operation)),
      m_error(std::move(other.m_error)) {}

Statement::~Statement() {
    if (m_stmt == nullptr)
        return;
    if (m_owned) {
        sqlite3_finalize(m_stmt);
    } else {
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }
}

void Statement::fail() {
    if (!m_error)
        m_error = m_connection->error(m_operation, sqlite3_sql(m_stmt));
}

Statement& Statement::bind(int index, int64_t value) {
    if (sqlite3_bind_int64(m_stmt, index, value) != SQLITE_OK)
        fail();
    return *this;
}
Statement& Statement::bind(int index, double value) {
    if (sqlite3_bind_double(m_stmt, index, value) != SQLITE_OK)
        fail();
    return *this;
}
Statement& Statement::bind(int index, std::string_view text) {
    // A null pointer would bind NULL: an empty string stays a string.
    if (sqlite3_bind_text(m_stmt, index, text.data() != nullptr ? text.data() : "",
                          static_cast<int>(text.size()), SQLITE_TRANSIENT) != SQLITE_OK)
        fail();
    return *this;
}
Statement& Statement::bind(int index, std::span<const uint8_t> blob) {
    const void* data = blob.empty() ? static_cast<const void*>("") : blob.data();
    if (sqlite3_bind_blob(m_stmt, index, data, static_cast<int>(blob.size()), SQLITE_TRANSIENT) !=
        SQLITE_OK)
        fail();
    return *this;
}
Statement& Statement::bindNull(int index) {
    if (sqlite3_bind_null(m_stmt, index) != SQLITE_OK)
        fail();
    return *this;
}

bool Statement::step() {
    if (m_error)
        return false;
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
        return true;
    if (rc != SQLITE_DONE)
        fail();
    return false;
}

Status Statement::run() {
    while (step()) {
    }
    return status();
}

Status Statement::status() const {
    if (m_error)
        return *m_error;
    return {};
}

int64_t Statement::integer(int column) const {
    return sqlite3_column_int64(m_stmt, column);
}
double Statement::real(int column) const {
    return sqlite3_column_double(m_stmt, column);
}
std::optional<int64_t> Statement::optionalInteger(int column) const {
    if (isNull(column))
        return std::nullopt;
    return integer(column);
}
std::optional<double> Statement::optionalReal(int column) const {
    if (isNull(column))
        return std::nullopt;
    return real(column);
}
std::string Statement::text(int column) const {
    const unsigned char* p = sqlite3_column_text(m_stmt, column);
    const int n = sqlite3_column_bytes(m_stmt, column);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
                        : std::string();
}
std::vector<uint8_t> Statement::blob(int column) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(m_stmt, column));
    const int n = sqlite3_column_bytes(m_stmt, column);
    if (p == nullptr || n <= 0)
        return {};
    return std::vector<uint8_t>(p, p + n);
}
bool Statement::isNull(int column) const {
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

// --- Database ---

Database::Database(std::unique_ptr<Connection> connection) : m_connection(std::move(connection)) {}

Database::Database(Database&& other) noexcept = default;
Database::~Database() = default;

Expected<Database> Database::open(const std::filesystem::path& path, OpenOptions options) {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(
        path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
        nullptr);
    // Owns the handle from here on, also when the open failed.
    Database db(std::make_unique<Connection>(raw, options.errorPrefix));
    if (rc != SQLITE_OK) {
        const std::string message = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
        return makeError(options.errorPrefix + ": cannot open: " + message);
    }
    sqlite3_extended_result_codes(raw, 1);
    sqlite3_busy_timeout(raw, 5000);

    // Read the version before changing anything, so a newer file is left exactly as it was.
    int version = 0;
    const int known = static_cast<int>(options.migrations.size());
    if (known > 0) {
        auto v = db.userVersion();
        if (!v)
            return v.error();
        version = *v;
        if (version > known) {
            return makeError(options.errorPrefix + ": schema version " + std::to_string(version) +
                             " is newer than this program, which knows versions up to " +
                             std::to_string(known) +
                             (options.newerHint.empty() ? "" : "; " + options.newerHint));
        }
    }

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
    if (Status s = db.migrate(options.migrations, version); !s)
        return s.error();
    return db;
}

Status Database::migrate(std::span<const std::string_view> migrations, int fromVersion) {
    const int target = static_cast<int>(migrations.size());
    for (int v = fromVersion; v < target; ++v) {
        const std::string what =
            "migrating from schema version " + std::to_string(v) + " to " + std::to_string(v + 1);
        Transaction t(*this, what);
        if (!t.started())
            return t.started();
        // Another process may have migrated while this one waited for the lock.
        auto now = userVersion();
        if (!now)
            return now.error();
        if (*now > v)
            continue;
        if (Status s = exec(migrations[static_cast<size_t>(v)], what); !s)
            return s;
        if (Status s = exec("PRAGMA user_version = " + std::to_string(v + 1), what); !s)
            return s;
        if (Status s = t.commit(); !s)
            return s;
    }
    return {};
}

Status Database::exec(std::string_view sql, std::string_view operation) {
    const std::string s(sql);
    char* err = nullptr;
    if (sqlite3_exec(m_connection->m_db, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string message = err != nullptr ? err : sqlite3_errmsg(m_connection->m_db);
        sqlite3_free(err);
        return m_connection->error(operation, sql, message);
    }
    return {};
}

Expected<Statement> Database::prepare(std::string_view sql, std::string_view operation) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(m_connection->m_db, sql.data(), static_cast<int>(sql.size()), &stmt,
                           nullptr) != SQLITE_OK)
        return m_connection->error(operation, sql);
    return Statement(m_connection.get(), stmt, true, operation);
}

Expected<Statement> Database::prepareCached(std::string_view sql, std::string_view operation) {
    auto it = m_connection->m_cache.find(sql);
    if (it == m_connection->m_cache.end()) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v3(m_connection->m_db, sql.data(), static_cast<int>(sql.size()),
                               SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
            return m_connection->error(operation, sql);
        it = m_connection->m_cache.emplace(std::string(sql), stmt).first;
    }
    return Statement(m_connection.get(), it->second, false, operation);
}

int64_t Database::lastInsertId() const {
    return sqlite3_last_insert_rowid(m_connection->m_db);
}
int Database::changes() const {
    return sqlite3_changes(m_connection->m_db);
}

Expected<int> Database::userVersion() {
    auto q = prepare("PRAGMA user_version", "reading the schema version");
    if (!q)
        return q.error();
    q->step();
    if (Status s = q->status(); !s)
        return s.error();
    return static_cast<int>(q->integer(0));
}

// --- Transaction ---

Transaction::Transaction(Database& db, std::string_view operation)
    : m_db(db), m_operation(operation) {
    m_started = m_db.exec("BEGIN IMMEDIATE", m_operation);
    m_open = m_started.ok();
}

Transaction::~Transaction() {
    if (m_open)
        (void)m_db.exec("ROLLBACK");
}

Status Transaction::commit() {
    Status s = m_db.exec("COMMIT", m_operation);
    if (s.ok())
        m_open = false;
    return s;
}

}  // namespace tandem::storage
