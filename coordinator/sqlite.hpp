// A thin RAII layer over SQLite: open with WAL and foreign keys, prepared statements with typed
// binds and columns, transactions, and forward migrations keyed by PRAGMA user_version.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace tandem::coord {

class Statement {
  public:
    Statement(sqlite3* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt) {}
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&&) = delete;
    ~Statement();

    Statement& bind(int index, int64_t value);
    Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view text);
    Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
    Statement& bind(int index, std::span<const uint8_t> blob);
    Statement& bindNull(int index);

    // One step: true when a row is available, false when done. Errors are kept in status().
    bool step();
    // Runs to completion (for INSERT/UPDATE/DELETE).
    Status run();
    Status status() const;

    int64_t integer(int column) const;
    double real(int column) const;
    std::optional<double> optionalReal(int column) const;
    std::string text(int column) const;
    std::vector<uint8_t> blob(int column) const;
    bool isNull(int column) const;

  private:
    sqlite3* m_db;
    sqlite3_stmt* m_stmt;
    std::optional<Error> m_error;
};

class Database {
  public:
    // Opens (creating) the file, sets WAL, synchronous=FULL, foreign keys and a busy timeout.
    static Expected<Database> open(const std::filesystem::path& path);
    Database(Database&& other) noexcept;
    Database& operator=(Database&&) = delete;
    ~Database();

    Status exec(std::string_view sql);
    // Panics are not an option: a bad SQL string is a programming error reported as an Error.
    Expected<Statement> prepare(std::string_view sql);
    int64_t lastInsertId() const;
    int changes() const;

    Expected<int> userVersion();
    // migrations[i] brings the schema from version i to i + 1; each runs in one transaction
    // together with the user_version bump. A database newer than the program is refused.
    Status migrate(std::span<const std::string_view> migrations);

    Status begin() { return exec("BEGIN IMMEDIATE"); }
    Status commit() { return exec("COMMIT"); }
    void rollback();

  private:
    explicit Database(sqlite3* db) : m_db(db) {}
    sqlite3* m_db;
};

// Rolls back unless committed.
class Transaction {
  public:
    explicit Transaction(Database& db) : m_db(db) { m_status = db.begin(); }
    ~Transaction() {
        if (!m_done)
            m_db.rollback();
    }
    const Status& started() const { return m_status; }
    Status commit() {
        m_done = true;
        return m_db.commit();
    }

  private:
    Database& m_db;
    Status m_status;
    bool m_done = false;
};

}  // namespace tandem::coord
