// The PostgreSQL backend of storage::Database (library tandem_storage_postgres, on libpq; only
// the coordinator links it). The same Statement/Transaction API as SQLite; see README.md for
// the SQL subset both engines share.
#pragma once

#include "database.hpp"

#include <string>
#include <string_view>

namespace tandem::storage {

// True for a postgresql:// or postgres:// URL (what --db takes besides a file).
bool isPostgresUrl(std::string_view text);

// The URL without its password, for messages and logs.
std::string redactedPostgresUrl(std::string_view url);

// Connects (10 s timeout) to a PostgreSQL 12 or newer server at `url` (libpq's URI form:
// postgresql://user:password@host:port/database?param=value), checks the schema version in
// table schema_version against options.migrations (a newer one is refused before anything
// changes), then applies the missing migrations, each in one transaction that holds an advisory
// lock, so that several processes starting at once migrate once. options.synchronous does not
// apply: every commit is durable (synchronous_commit as the server sets it) unless its
// Transaction asks for Commit::Relaxed.
Expected<Database> openPostgres(std::string_view url, OpenOptions options = {});

// Migrations are written in SQLite's DDL: INTEGER PRIMARY KEY becomes an identity column,
// INTEGER BIGINT, REAL DOUBLE PRECISION, BLOB BYTEA (whole words outside quotes and comments).
std::string postgresDdl(std::string_view sqliteDdl);

// `?` and `?N` placeholders as PostgreSQL's `$N` (outside quotes and comments); a bare `?` takes
// the number after the largest so far, as in SQLite.
std::string postgresPlaceholders(std::string_view sql);

}  // namespace tandem::storage
