#include "sqlite.hpp"

#include <sqlite3.h>

namespace tandem::coord {

Statement::Statement(Statement&& other) noexcept
    : m_db(other.m_db), m_stmt(other.m_stmt), m_error(std::move(other.m_error)) {
    other.m_stmt = nullptr;
}

Statement::~Statement() {
    if (m_stmt)
        sqlite3_finalize(m_stmt);
}

Statement& Statement::bind(int index, int64_t value) {
    sqlite3_bind_int64(m_stmt, index, value);
    return *this;
}
Statement& Statement::bind(int index, double value) {
    sqlite3_bind_double(m_stmt, index, value);
    return *this;
}
Statement& Statement::bind(int index, std::string_view text) {
    sqlite3_bind_text(m_stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
}
Statement& Statement::bind(int index, std::span<const uint8_t> blob) {
    sqlite3_bind_blob(m_stmt, index, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    return *this;
}
Statement& Statement::bindNull(int index) {
    sqlite3_bind_null(m_stmt, index);
    return *this;
}

bool Statement::step() {
    if (m_error)
        return false;
    int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
        return true;
    if (rc != SQLITE_DONE)
        m_error = makeError(std::string("database: ") + sqlite3_errmsg(m_db) + " in " +
                            sqlite3_sql(m_stmt));
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
std::optional<double> Statement::optionalReal(int column) const {
    if (isNull(column))
        return std::nullopt;
    return real(column);
}
std::string Statement::text(int column) const {
    const unsigned char* p = sqlite3_column_text(m_stmt, column);
    int n = sqlite3_column_bytes(m_stmt, column);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
             : std::string();
}
std::vector<uint8_t> Statement::blob(int column) const {
    const void* p = sqlite3_column_blob(m_stmt, column);
    int n = sqlite3_column_bytes(m_stmt, column);
    if (!p || n <= 0)
        return {};
    auto* b = static_cast<const uint8_t*>(p);
    return std::vector<uint8_t>(b, b + n);
}
bool Statement::isNull(int column) const {
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

Expected<Database> Database::open(const std::filesystem::path& path) {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
        sqlite3_close(db);
        return makeError("cannot open database " + path.string() + ": " + msg);
    }
    Database out(db);
    sqlite3_busy_timeout(db, 5000);
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
        if (auto st = out.exec(pragma); !st)
            return makeError("database " + path.string() + ": " + st.error().message);
    }
    return out;
}

Database::Database(Database&& other) noexcept : m_db(other.m_db) {
    other.m_db = nullptr;
}

Database::~Database() {
    if (m_db)
        sqlite3_close_v2(m_db);
}

Status Database::exec(std::string_view sql) {
    std::string s(sql);
    char* err = nullptr;
    if (sqlite3_exec(m_db, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : sqlite3_errmsg(m_db);
        sqlite3_free(err);
        return makeError("database: " + msg);
    }
    return {};
}

Expected<Statement> Database::prepare(std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(m_db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK)
        return makeError(std::string("database: cannot prepare: ") + sqlite3_errmsg(m_db));
    return Statement(m_db, stmt);
}

int64_t Database::lastInsertId() const {
    return sqlite3_last_insert_rowid(m_db);
}
int Database::changes() const {
    return sqlite3_changes(m_db);
}

Expected<int> Database::userVersion() {
    auto st = prepare("PRAGMA user_version");
    if (!st)
        return st.error();
    if (!st->step())
        return makeError("database: cannot read user_version");
    return static_cast<int>(st->integer(0));
}

Status Database::migrate(std::span<const std::string_view> migrations) {
    auto version = userVersion();
    if (!version)
        return version.error();
    const int target = static_cast<int>(migrations.size());
    if (*version > target)
        return makeError("database schema version " + std::to_string(*version) +
                         " is newer than this program understands (" + std::to_string(target) +
                         "); use a newer tandem-coordinator");
    for (int v = *version; v < target; ++v) {
        Transaction tx(*this);
        if (!tx.started())
            return tx.started();
        if (auto st = exec(migrations[static_cast<size_t>(v)]); !st)
            return makeError("migration to schema " + std::to_string(v + 1) +
                             " failed: " + st.error().message);
        if (auto st = exec("PRAGMA user_version = " + std::to_string(v + 1)); !st)
            return st;
        if (auto st = tx.commit(); !st)
            return st;
    }
    return {};
}

void Database::rollback() {
    (void)exec("ROLLBACK");
}

}  // namespace tandem::coord
