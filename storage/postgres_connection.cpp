// The PostgreSQL backend of storage::Database on libpq. Parameters go as binary int8, float8
// and bytea, or as text of unknown type (the server infers it from the context, as SQLite's
// affinity would); results come back as text and are parsed per accessor, so sums (numeric),
// booleans and floats (shortest exact text since PostgreSQL 12) all read back exactly.
#include "postgres.hpp"

#include "connection.hpp"

#include <libpq-fe.h>

#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

namespace tandem::storage {

namespace {

constexpr Oid kInt8Oid = 20;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kByteaOid = 17;
constexpr Oid kUnknownOid = 0;
// pg_advisory_xact_lock key held by a migration ("Tandem" in ASCII).
constexpr long long kMigrationLockKey = 0x54616e64656dLL;

struct ResultDeleter {
    void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

bool isWordChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Length of the quoted string, identifier or comment at sql[i] (0 when none starts there), so
// that the rewrites below leave them alone.
size_t skippedLength(std::string_view sql, size_t i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
        const size_t end = sql.find(c, i + 1);
        return (end == std::string_view::npos ? sql.size() : end + 1) - i;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
        const size_t end = sql.find('\n', i);
        return (end == std::string_view::npos ? sql.size() : end) - i;
    }
    if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
        const size_t end = sql.find("*/", i + 2);
        return (end == std::string_view::npos ? sql.size() : end + 2) - i;
    }
    return 0;
}

std::string translatePlaceholders(std::string_view sql, int* count) {
    std::string out;
    out.reserve(sql.size() + 16);
    int largest = 0;
    for (size_t i = 0; i < sql.size();) {
        if (size_t n = skippedLength(sql, i); n > 0) {
            out.append(sql.substr(i, n));
            i += n;
            continue;
        }
        if (sql[i] != '?') {
            out += sql[i++];
            continue;
        }
        size_t end = i + 1;
        while (end < sql.size() && sql[end] >= '0' && sql[end] <= '9')
            ++end;
        int number = largest + 1;
        if (end > i + 1)
            std::from_chars(sql.data() + i + 1, sql.data() + end, number);
        largest = std::max(largest, number);
        out += '$' + std::to_string(number);
        i = end;
    }
    if (count != nullptr)
        *count = largest;
    return out;
}

// "ERROR:  x\nDETAIL:  y\n" -> "x (y)"; libpq's connection messages lose their trailing newline.
std::string resultMessage(const PGresult* r, PGconn* conn) {
    const char* primary = r != nullptr ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    if (primary == nullptr) {
        std::string m = PQerrorMessage(conn);
        while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
            m.pop_back();
        for (char& c : m)
            if (c == '\n')
                c = ' ';
        return m.empty() ? "unknown error" : m;
    }
    std::string m = primary;
    if (const char* detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL))
        m += std::string(" (") + detail + ")";
    return m;
}

void ignoreNotice(void*, const char*) {}

bool isCommandOk(const PGresult* r) {
    const ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

class PgConnection final : public Connection {
  public:
    PgConnection(PGconn* conn, std::string errorPrefix, std::string url)
        : Connection(std::move(errorPrefix)), m_conn(conn), m_url(std::move(url)) {}
    ~PgConnection() override { PQfinish(m_conn); }

    Backend backend() const override { return Backend::Postgres; }
    Status exec(std::string_view sql, std::string_view operation) override;
    Expected<std::unique_ptr<StatementBackend>> prepare(std::string_view sql,
                                                        std::string_view operation,
                                                        bool cached) override;
    int64_t lastInsertId() override;
    int changes() const override { return m_changes; }
    Status begin(Commit commit, std::string_view operation) override {
        if (Status s = exec("BEGIN", operation); !s)
            return s;
        return commit == Commit::Relaxed ? exec("SET LOCAL synchronous_commit = off", operation)
                                         : Status{};
    }
    Expected<int> schemaVersion() override;
    Status setSchemaVersion(int version, std::string_view operation) override {
        return exec(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);"
            "DELETE FROM schema_version;"
            "INSERT INTO schema_version VALUES (" +
                std::to_string(version) + ")",
            operation);
    }
    Status lockForMigration(std::string_view operation) override {
        return exec("SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")",
                    operation);
    }
    std::string migrationSql(std::string_view sql) const override { return postgresDdl(sql); }

    // One execution of `sql` (already numbered $N); `cachedKey` non-empty: as a named prepared
    // statement kept for the connection's life.
    Expected<Result> execute(const std::string& sql, std::string_view originalSql,
                             std::string_view operation, const std::string& cachedKey,
                             const std::vector<Oid>& types, const std::vector<const char*>& values,
                             const std::vector<int>& lengths, const std::vector<int>& formats);

  private:
    Status reconnectIfLost(std::string_view operation, std::string_view sql);
    void noteChanges(const PGresult* r) {
        const char* status = PQcmdStatus(const_cast<PGresult*>(r));
        if (std::strncmp(status, "INSERT", 6) == 0 || std::strncmp(status, "UPDATE", 6) == 0 ||
            std::strncmp(status, "DELETE", 6) == 0)
            m_changes = std::atoi(PQcmdTuples(const_cast<PGresult*>(r)));
    }

    PGconn* m_conn;
    std::string m_url;  // without its password
    int m_changes = 0;
    bool m_inTransaction = false;  // between our BEGIN and COMMIT/ROLLBACK
    std::map<std::string, std::string, std::less<>> m_prepared;  // SQL + types -> name
};

class PgStatement final : public StatementBackend {
  public:
    PgStatement(PgConnection* connection, std::string_view sql, std::string_view operation,
                bool cached)
        : m_connection(connection), m_original(sql), m_operation(operation), m_cached(cached) {
        int count = 0;
        m_sql = translatePlaceholders(sql, &count);
        m_values.resize(static_cast<size_t>(count));
        m_types.assign(static_cast<size_t>(count), kUnknownOid);
        m_formats.assign(static_cast<size_t>(count), 0);
    }

    void bindInteger(int index, int64_t value) override {
        bindBinary(index, kInt8Oid, std::bit_cast<uint64_t>(value));
    }
    void bindReal(int index, double value) override {
        bindBinary(index, kFloat8Oid, std::bit_cast<uint64_t>(value));
    }
    void bindText(int index, std::string_view text) override {
        if (text.find('\0') != std::string_view::npos)
            return fail("text with a NUL byte cannot be stored");
        set(index, kUnknownOid, 0, std::string(text));
    }
    void bindBlob(int index, std::span<const uint8_t> blob) override {
        set(index, kByteaOid, 1, std::string(blob.begin(), blob.end()));
    }
    void bindNull(int index) override { set(index, kUnknownOid, 0, std::nullopt); }

    bool step() override {
        if (m_error)
            return false;
        if (!m_result) {
            std::vector<const char*> values;
            std::vector<int> lengths;
            for (const auto& v : m_values) {
                values.push_back(v ? v->data() : nullptr);
                lengths.push_back(v ? static_cast<int>(v->size()) : 0);
            }
            std::string key;
            if (m_cached) {
                key = m_sql;
                for (Oid t : m_types)
                    key += "|" + std::to_string(t);
            }
            auto r = m_connection->execute(m_sql, m_original, m_operation, key, m_types, values,
                                           lengths, m_formats);
            if (!r) {
                m_error = r.error();
                return false;
            }
            m_result = std::move(*r);
        }
        return ++m_row < PQntuples(m_result.get());
    }
    Status status() const override {
        if (m_error)
            return *m_error;
        return {};
    }

    int64_t integer(int column) const override {
        const char* v = value(column);
        if (v == nullptr)
            return 0;
        if (v[0] == 't' || v[0] == 'f')  // boolean
            return v[0] == 't' ? 1 : 0;
        int64_t n = 0;
        const char* end = v + std::strlen(v);
        auto [p, ec] = std::from_chars(v, end, n);
        if (ec == std::errc() && p == end)
            return n;
        return static_cast<int64_t>(std::strtod(v, nullptr));  // numeric with a fraction
    }
    double real(int column) const override {
        const char* v = value(column);
        return v != nullptr ? std::strtod(v, nullptr) : 0.0;
    }
    std::string text(int column) const override {
        if (isBytea(column)) {
            auto b = blob(column);
            return std::string(b.begin(), b.end());
        }
        const char* v = value(column);
        return v != nullptr
                   ? std::string(v, static_cast<size_t>(PQgetlength(m_result.get(), m_row, column)))
                   : std::string();
    }
    std::vector<uint8_t> blob(int column) const override {
        const char* v = value(column);
        if (v == nullptr)
            return {};
        const size_t n = static_cast<size_t>(PQgetlength(m_result.get(), m_row, column));
        if (!isBytea(column))
            return std::vector<uint8_t>(v, v + n);
        // bytea_output = hex (the default since PostgreSQL 9.0): "\x" then two digits a byte.
        std::vector<uint8_t> out;
        if (n < 2 || v[0] != '\\' || v[1] != 'x')
            return out;
        out.reserve((n - 2) / 2);
        for (size_t i = 2; i + 1 < n; i += 2) {
            uint8_t byte = 0;
            std::from_chars(v + i, v + i + 2, byte, 16);
            out.push_back(byte);
        }
        return out;
    }
    bool isNull(int column) const override { return value(column) == nullptr; }

  private:
    bool inRange(int column) const {
        return m_result && m_row >= 0 && m_row < PQntuples(m_result.get()) && column >= 0 &&
               column < PQnfields(m_result.get());
    }
    const char* value(int column) const {
        if (!inRange(column) || PQgetisnull(m_result.get(), m_row, column))
            return nullptr;
        return PQgetvalue(m_result.get(), m_row, column);
    }
    bool isBytea(int column) const {
        return inRange(column) && PQftype(m_result.get(), column) == kByteaOid;
    }
    void bindBinary(int index, Oid type, uint64_t bits) {
        std::string bytes(8, '\0');
        for (int i = 0; i < 8; ++i)
            bytes[static_cast<size_t>(i)] = static_cast<char>(bits >> (56 - 8 * i));  // big-endian
        set(index, type, 1, std::move(bytes));
    }
    void set(int index, Oid type, int format, std::optional<std::string> value) {
        if (index < 1 || index > static_cast<int>(m_values.size()))
            return fail("column index out of range");
        const auto i = static_cast<size_t>(index - 1);
        m_values[i] = std::move(value);
        m_types[i] = type;
        m_formats[i] = format;
    }
    void fail(std::string_view message) {
        if (!m_error)
            m_error = m_connection->error(m_operation, m_original, message);
    }

    PgConnection* m_connection;
    std::string m_original;  // with ? placeholders, for messages
    std::string m_sql;
    std::string m_operation;
    bool m_cached;
    std::vector<std::optional<std::string>> m_values;
    std::vector<Oid> m_types;
    std::vector<int> m_formats;
    Result m_result;
    int m_row = -1;
    std::optional<Error> m_error;
};

Status PgConnection::reconnectIfLost(std::string_view operation, std::string_view sql) {
    if (PQstatus(m_conn) == CONNECTION_OK)
        return {};
    // A transaction dies with its connection: its remaining statements fail (never commit on
    // a new connection) until the caller's ROLLBACK; then the next use connects again.
    if (m_inTransaction)
        return error(operation, sql,
                     "lost the connection to " + m_url + " in the middle of a transaction");
    PQreset(m_conn);
    m_prepared.clear();
    if (PQstatus(m_conn) != CONNECTION_OK)
        return error(operation, sql,
                     "lost the connection to " + m_url + ": " + resultMessage(nullptr, m_conn));
    PQsetNoticeProcessor(m_conn, ignoreNotice, nullptr);
    return {};
}

Status PgConnection::exec(std::string_view sql, std::string_view operation) {
    const bool ends = sql == "COMMIT" || sql == "ROLLBACK";
    if (sql == "ROLLBACK" && PQstatus(m_conn) != CONNECTION_OK) {
        m_inTransaction = false;  // gone with the connection
        return {};
    }
    if (Status s = reconnectIfLost(operation, sql); !s)
        return s;
    if (ends)
        m_inTransaction = false;
    Result r(PQexec(m_conn, std::string(sql).c_str()));
    if (!r || !isCommandOk(r.get()))
        return error(operation, sql, resultMessage(r.get(), m_conn));
    // COMMIT of a transaction that failed earlier answers ROLLBACK, not an error.
    if (sql == "COMMIT" && std::strcmp(PQcmdStatus(r.get()), "ROLLBACK") == 0)
        return error(operation, sql, "the transaction was rolled back after an earlier error");
    if (sql == "BEGIN")
        m_inTransaction = true;
    noteChanges(r.get());
    return {};
}

Expected<Result> PgConnection::execute(const std::string& sql, std::string_view originalSql,
                                       std::string_view operation, const std::string& cachedKey,
                                       const std::vector<Oid>& types,
                                       const std::vector<const char*>& values,
                                       const std::vector<int>& lengths,
                                       const std::vector<int>& formats) {
    if (Status s = reconnectIfLost(operation, originalSql); !s)
        return s.error();
    const int n = static_cast<int>(values.size());
    Result r;
    if (cachedKey.empty()) {
        r.reset(PQexecParams(m_conn, sql.c_str(), n, types.data(), values.data(), lengths.data(),
                             formats.data(), 0));
    } else {
        auto it = m_prepared.find(cachedKey);
        if (it == m_prepared.end()) {
            const std::string name = "tandem_" + std::to_string(m_prepared.size());
            Result p(PQprepare(m_conn, name.c_str(), sql.c_str(), n, types.data()));
            if (!p || !isCommandOk(p.get()))
                return error(operation, originalSql, resultMessage(p.get(), m_conn));
            it = m_prepared.emplace(cachedKey, name).first;
        }
        r.reset(PQexecPrepared(m_conn, it->second.c_str(), n, values.data(), lengths.data(),
                               formats.data(), 0));
    }
    if (!r || !isCommandOk(r.get()))
        return error(operation, originalSql, resultMessage(r.get(), m_conn));
    noteChanges(r.get());
    return r;
}

Expected<std::unique_ptr<StatementBackend>> PgConnection::prepare(std::string_view sql,
                                                                  std::string_view operation,
                                                                  bool cached) {
    // The server parses at the first step(): SQL errors are reported there, through status().
    return std::unique_ptr<StatementBackend>(
        std::make_unique<PgStatement>(this, sql, operation, cached));
}

int64_t PgConnection::lastInsertId() {
    Result r(PQexec(m_conn, "SELECT lastval()"));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
        return 0;
    return std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10);
}

Expected<int> PgConnection::schemaVersion() {
    const char* what = "reading the schema version";
    if (Status s = reconnectIfLost(what, "schema_version"); !s)
        return s.error();
    // Two queries: a SELECT from a missing table fails (and would abort a transaction).
    Result exists(PQexec(m_conn, "SELECT to_regclass('schema_version') IS NOT NULL"));
    if (!exists || PQresultStatus(exists.get()) != PGRES_TUPLES_OK)
        return error(what, "", resultMessage(exists.get(), m_conn));
    if (std::strcmp(PQgetvalue(exists.get(), 0, 0), "t") != 0)
        return 0;
    Result r(PQexec(m_conn, "SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK)
        return error(what, "", resultMessage(r.get(), m_conn));
    return std::atoi(PQgetvalue(r.get(), 0, 0));
}

}  // namespace

bool isPostgresUrl(std::string_view text) {
    return text.starts_with("postgresql://") || text.starts_with("postgres://");
}

std::string redactedPostgresUrl(std::string_view url) {
    std::string out(url);
    const size_t scheme = out.find("://");
    if (scheme != std::string::npos) {
        const size_t start = scheme + 3;
        const size_t at = out.find('@', start);
        const size_t slash = out.find('/', start);
        if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
            const size_t colon = out.find(':', start);
            if (colon != std::string::npos && colon < at)
                out.replace(colon + 1, at - colon - 1, "***");
        }
    }
    for (size_t p = out.find("password="); p != std::string::npos;
         p = out.find("password=", p + 1)) {
        const size_t end = out.find('&', p);
        out.replace(p + 9, (end == std::string::npos ? out.size() : end) - p - 9, "***");
    }
    return out;
}

std::string postgresPlaceholders(std::string_view sql) {
    return translatePlaceholders(sql, nullptr);
}

std::string postgresDdl(std::string_view sql) {
    std::string out;
    out.reserve(sql.size() + 64);
    auto wordAt = [&](size_t i) {
        size_t end = i;
        while (end < sql.size() && isWordChar(sql[end]))
            ++end;
        return sql.substr(i, end - i);
    };
    auto skipSpace = [&](size_t i) {
        while (i < sql.size() && (sql[i] == ' ' || sql[i] == '\n' || sql[i] == '\t'))
            ++i;
        return i;
    };
    for (size_t i = 0; i < sql.size();) {
        if (size_t n = skippedLength(sql, i); n > 0) {
            out.append(sql.substr(i, n));
            i += n;
            continue;
        }
        if (!isWordChar(sql[i])) {
            out += sql[i++];
            continue;
        }
        const std::string_view word = wordAt(i);
        i += word.size();
        if (word == "INTEGER") {
            const size_t p = skipSpace(i);
            const size_t k = skipSpace(p + wordAt(p).size());
            if (wordAt(p) == "PRIMARY" && wordAt(k) == "KEY") {
                out += "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY";
                i = k + 3;
            } else {
                out += "BIGINT";
            }
        } else if (word == "REAL") {
            out += "DOUBLE PRECISION";
        } else if (word == "BLOB") {
            out += "BYTEA";
        } else {
            out += word;
        }
    }
    return out;
}

Expected<Database> openPostgres(std::string_view url, OpenOptions options) {
    const std::string full(url);
    const std::string shown = redactedPostgresUrl(url);
    // Defaults first: the URL's own parameters (expanded from dbname) override them.
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "tandem", full.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keys, values, 1);
    if (conn == nullptr)
        return makeError(options.errorPrefix + ": cannot connect to " + shown + ": out of memory");
    // Owns the handle from here on, also when the connection failed.
    Database db(std::make_unique<PgConnection>(conn, options.errorPrefix, shown));
    if (PQstatus(conn) != CONNECTION_OK)
        return makeError(options.errorPrefix + ": cannot connect to " + shown + ": " +
                         resultMessage(nullptr, conn));
    PQsetNoticeProcessor(conn, ignoreNotice, nullptr);  // CREATE ... IF NOT EXISTS and the like
    auto version = db.checkSchemaVersion(options);
    if (!version)
        return version.error();
    if (Status s = db.migrate(options.migrations, *version); !s)
        return s.error();
    return db;
}

}  // namespace tandem::storage
