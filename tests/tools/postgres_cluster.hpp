// The PostgreSQL cluster of a test labelled postgres: tests/tools/with_postgres starts one with
// pg_virtualenv around the test executable and sets PG* and TANDEM_TEST_POSTGRES; here its URL,
// and fresh databases for one test each.
#pragma once

#include "postgres.hpp"

#include <cstdlib>
#include <optional>
#include <string>

namespace tandem::testing {

// postgresql://user:password@host:port/database of the test's cluster, or nothing outside
// tests/tools/with_postgres.
inline std::optional<std::string> postgresUrl(const std::string& database = {}) {
    const char* on = std::getenv("TANDEM_TEST_POSTGRES");
    const char* host = std::getenv("PGHOST");
    const char* port = std::getenv("PGPORT");
    const char* user = std::getenv("PGUSER");
    const char* password = std::getenv("PGPASSWORD");
    const char* admin = std::getenv("PGDATABASE");
    if (on == nullptr || host == nullptr || port == nullptr || user == nullptr ||
        password == nullptr || admin == nullptr)
        return std::nullopt;
    return std::string("postgresql://") + user + ":" + password + "@" + host + ":" + port + "/" +
           (database.empty() ? std::string(admin) : database);
}

// A new, empty database `name` (dropped first if a previous run left it) and its URL.
inline Expected<std::string> freshPostgresDatabase(const std::string& name) {
    auto admin = postgresUrl();
    if (!admin)
        return makeError("no PostgreSQL cluster (run through tests/tools/with_postgres)");
    auto db = storage::openPostgres(*admin, {});
    if (!db)
        return db.error();
    if (Status s = db->exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); !s)
        return s.error();
    if (Status s = db->exec("CREATE DATABASE " + name); !s)
        return s.error();
    return *postgresUrl(name);
}

// After a run: the accepted results, the work units they are of, the receipts, the run's version
// and the rounds whose result count differs from their results' (each accepted result once, with
// one receipt, and rounds that count them: columns 0 to 2 equal, column 4 zero).
inline constexpr const char* kResultCountsSql =
    "SELECT (SELECT COUNT(*) FROM results), (SELECT COUNT(DISTINCT work_unit_id) FROM results), "
    "(SELECT COUNT(*) FROM receipts), (SELECT version FROM runs), (SELECT COUNT(*) FROM rounds d "
    "WHERE d.contributors != (SELECT COUNT(*) FROM results s WHERE s.round = d.round))";

}  // namespace tandem::testing
