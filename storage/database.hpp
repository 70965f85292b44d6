// A thin RAII layer over an SQL database, shared by the worker's ledger (core/) and the
// coordinator: forward migrations keyed by a schema version, prepared statements (owned or
// cached) with typed binds and columns, and transactions. The engine is SQLite (open(): WAL,
// foreign keys, a busy timeout, PRAGMA user_version) or, for the coordinator only, PostgreSQL
// (postgres.hpp, a separate library on libpq). SQL is written with `?` / `?N` placeholders in
// the subset both engines share; the PostgreSQL backend numbers them `$N`.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::storage {

enum class Backend { Sqlite, Postgres };

// What a transaction's commit promises.
enum class Commit {
    Durable,  // survives a crash (of the process, and at Synchronous::Full a power cut)
    // PostgreSQL: synchronous_commit = off, a crash of the server may lose the last few hundred
    // ms of such commits, never corrupt anything. SQLite: the same as Durable.
    Relaxed,
};

enum class Synchronous {
    Normal,  // in WAL mode: a commit survives a crash of the process, maybe not a power cut
    Full,    // a commit survives a power cut
};

struct OpenOptions {
    // Begins every error message ("ledger /home/a/.local/share/tandem/ledger.db").
    std::string errorPrefix = "database";
    Synchronous synchronous = Synchronous::Full;
    // The schema: migrations[i] takes user_version i to i + 1, each in one transaction together
    // with the version bump. A file with a newer version is refused before anything in it
    // changes; newerHint ends that message (what the user should do). Empty: the schema is not
    // managed here (user_version is neither checked nor changed).
    std::span<const std::string_view> migrations;
    std::string newerHint;
};

class Connection;
class StatementBackend;

// One use of a prepared statement. Binds and steps record the first error, which step() and
// run() then report through status(). An owned statement is finalized when it goes out of
// scope, a cached one (Database::prepareCached) is reset, so it never keeps a read open.
class Statement {
  public:
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&&) = delete;
    ~Statement();

    Statement& bind(int index, int64_t value);
    Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
    Statement& bind(int index, bool value) { return bind(index, int64_t{value ? 1 : 0}); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view text);
    Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
    // A zero-length blob is bound as a blob, not as NULL.
    Statement& bind(int index, std::span<const uint8_t> blob);
    Statement& bindNull(int index);
    template <class T>
    Statement& bind(int index, const std::optional<T>& value) {
        return value ? bind(index, *value) : bindNull(index);
    }

    // One step: true when a row is available, false when done or failed (see status()).
    bool step();
    // Runs to completion (for INSERT/UPDATE/DELETE).
    Status run();
    Status status() const;

    int64_t integer(int column) const;
    double real(int column) const;
    std::optional<int64_t> optionalInteger(int column) const;
    std::optional<double> optionalReal(int column) const;
    std::string text(int column) const;
    std::vector<uint8_t> blob(int column) const;
    bool isNull(int column) const;

  private:
    friend class Database;
    explicit Statement(std::unique_ptr<StatementBackend> backend);

    std::unique_ptr<StatementBackend> m_backend;
};

// One connection. Callers that share it between threads hold their own lock around every use
// (a cached statement in particular has one user at a time).
class Database {
  public:
    // A backend's open function (postgres.hpp) wraps its connection.
    explicit Database(std::unique_ptr<Connection> connection);
    // Opens (creating) the file with a 5 s busy timeout; checks the schema version (see
    // OpenOptions::migrations); sets WAL (checked), foreign keys and the synchronous level; then
    // applies the missing migrations.
    static Expected<Database> open(const std::filesystem::path& path, OpenOptions options = {});
    Database(Database&& other) noexcept;
    Database& operator=(Database&&) = delete;
    ~Database();

    // operation names what failed in error messages; without one they quote the SQL.
    Status exec(std::string_view sql, std::string_view operation = {});
    Expected<Statement> prepare(std::string_view sql, std::string_view operation = {});
    // Prepared once per distinct SQL text and kept until the database closes.
    Expected<Statement> prepareCached(std::string_view sql, std::string_view operation = {});
    // The id given to the last row inserted (SQLite's rowid; PostgreSQL's lastval()).
    int64_t lastInsertId() const;
    // Rows changed by the last INSERT, UPDATE or DELETE.
    int changes() const;
    // SQLite: PRAGMA user_version; PostgreSQL: the schema_version table (0 without one).
    Expected<int> userVersion();
    Backend backend() const;

    // For the backends' open functions: the current schema version, refused when newer than
    // options.migrations (0 when the schema is not managed); then the missing migrations, each
    // in one transaction with its version bump.
    Expected<int> checkSchemaVersion(const OpenOptions& options);
    Status migrate(std::span<const std::string_view> migrations, int fromVersion);
    Status begin(Commit commit, std::string_view operation);

  private:
    // Behind a pointer, so statements stay valid when the Database moves.
    std::unique_ptr<Connection> m_connection;
};

// BEGIN IMMEDIATE (SQLite) or BEGIN (PostgreSQL, READ COMMITTED) ... COMMIT; rolls back unless
// the commit succeeded.
class Transaction {
  public:
    explicit Transaction(Database& db, std::string_view operation = {},
                         Commit commit = Commit::Durable);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    const Status& started() const { return m_started; }
    Status commit();

  private:
    Database& m_db;
    std::string m_operation;
    Status m_started;
    bool m_open = false;
};

}  // namespace tandem::storage
