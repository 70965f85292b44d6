// Where the coordinator keeps its run state (docs/architecture.md, "The state store"): the
// SQLite file coordinator.db in the state directory (the default), or a PostgreSQL database
// given as a postgresql:// URL (--db). Both hold the same schema (schema.hpp) and answer the
// same SQL; files (weights, blobs, staged uploads) stay in the state directory either way.
#pragma once

#include "sqlite.hpp"

#include <filesystem>
#include <string>

namespace tandem::coord {

// Opens (creating and migrating) the run state: databaseUrl empty, <stateDir>/coordinator.db;
// else the PostgreSQL database at that URL. Errors name the file or the URL (no password).
Expected<Database> openStateStore(const std::filesystem::path& stateDir,
                                  const std::string& databaseUrl);

// Whether databaseUrl names a PostgreSQL database; an empty one is the SQLite default, anything
// else is refused with a message that says what --db takes.
Status checkDatabaseUrl(const std::string& databaseUrl);

// The file, or the URL without its password, for logs.
std::string stateStoreName(const std::filesystem::path& stateDir, const std::string& databaseUrl);

}  // namespace tandem::coord
