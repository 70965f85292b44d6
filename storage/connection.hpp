// The backend interface behind storage::Database (database.hpp): one implementation per engine
// (sqlite_connection.cpp, and postgres_connection.cpp in its own library so that only the
// coordinator links libpq). Callers never see it; they use Database, Statement and Transaction.
#pragma once

#include "database.hpp"

namespace tandem::storage {

// One execution of a statement: binds record the first error; step() reports it as false.
class StatementBackend {
  public:
    virtual ~StatementBackend() = default;
    virtual void bindInteger(int index, int64_t value) = 0;
    virtual void bindReal(int index, double value) = 0;
    virtual void bindText(int index, std::string_view text) = 0;
    virtual void bindBlob(int index, std::span<const uint8_t> blob) = 0;
    virtual void bindNull(int index) = 0;
    virtual bool step() = 0;
    virtual Status status() const = 0;
    virtual int64_t integer(int column) const = 0;
    virtual double real(int column) const = 0;
    virtual std::string text(int column) const = 0;
    virtual std::vector<uint8_t> blob(int column) const = 0;
    virtual bool isNull(int column) const = 0;
};

class Connection {
  public:
    explicit Connection(std::string errorPrefix) : m_errorPrefix(std::move(errorPrefix)) {}
    virtual ~Connection() = default;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    virtual Backend backend() const = 0;
    // One or more statements without parameters or rows.
    virtual Status exec(std::string_view sql, std::string_view operation) = 0;
    virtual Expected<std::unique_ptr<StatementBackend>> prepare(std::string_view sql,
                                                                std::string_view operation,
                                                                bool cached) = 0;
    virtual int64_t lastInsertId() = 0;
    virtual int changes() const = 0;
    virtual Status begin(Commit commit, std::string_view operation) = 0;
    // The schema version (0: none yet), and its update inside a migration's transaction.
    virtual Expected<int> schemaVersion() = 0;
    virtual Status setSchemaVersion(int version, std::string_view operation) = 0;
    // Called first in each migration's transaction: serialises migrating processes.
    virtual Status lockForMigration(std::string_view operation) = 0;
    // A migration's text as this engine runs it (migrations are written in SQLite's DDL).
    virtual std::string migrationSql(std::string_view sql) const = 0;

    const std::string& errorPrefix() const { return m_errorPrefix; }
    // "<prefix>: <operation>: <message>", or without an operation "<prefix>: <message> in <sql>".
    Error error(std::string_view operation, std::string_view sql, std::string_view message) const {
        if (!operation.empty())
            return makeError(m_errorPrefix + ": " + std::string(operation) + ": " +
                             std::string(message));
        return makeError(m_errorPrefix + ": " + std::string(message) + " in " + std::string(sql));
    }

  private:
    std::string m_errorPrefix;
};

}  // namespace tandem::storage
