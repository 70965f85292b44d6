// A thin RAII layer over SQLite, shared by the worker's ledger (core/) and the coordinator: open
// with WAL, foreign keys and a busy timeout, forward migrations keyed by PRAGMA user_version,
// prepared statements (owned or cached) with typed binds and columns, and transactions.
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

struct sqlite3;
struct sqlite3_stmt;

namespace tandem::storage {

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
    Statement(const Connection* connection, sqlite3_stmt* stmt, bool owned,
              std::string_view operation);
    void fail();

    const Connection* m_connection;
    sqlite3_stmt* m_stmt;
    bool m_owned;
    std::string m_operation;
    std::optional<Error> m_error;
};

// One connection. Callers that share it between threads hold their own lock around every use
// (a cached statement in particular has one user at a time).
class Database {
  public:
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
    int64_t lastInsertId() const;
    int changes() const;
    Expected<int> userVersion();

  private:
    explicit Database(std::unique_ptr<Connection> connection);
    Status migrate(std::span<const std::string_view> migrations, int fromVersion);

    // Behind a pointer, so statements stay valid when the Database moves.
    std::unique_ptr<Connection> m_connection;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless the commit succeeded.
class Transaction {
  public:
    explicit Transaction(Database& db, std::string_view operation = {});
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
