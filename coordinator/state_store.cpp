#include "state_store.hpp"

#include "postgres.hpp"
#include "schema.hpp"

namespace tandem::coord {

Status checkDatabaseUrl(const std::string& databaseUrl) {
    if (databaseUrl.empty() || storage::isPostgresUrl(databaseUrl))
        return {};
    return makeError(
        "--db takes a postgresql://user:password@host:port/database URL (without "
        "--db the run state is the SQLite file coordinator.db in --state-dir), "
        "found '" +
        storage::redactedPostgresUrl(databaseUrl) + "'");
}

std::string stateStoreName(const std::filesystem::path& stateDir, const std::string& databaseUrl) {
    return databaseUrl.empty() ? (stateDir / "coordinator.db").string()
                               : storage::redactedPostgresUrl(databaseUrl);
}

Expected<Database> openStateStore(const std::filesystem::path& stateDir,
                                  const std::string& databaseUrl) {
    if (Status s = checkDatabaseUrl(databaseUrl); !s)
        return s.error();
    storage::OpenOptions options;
    // FULL: an accepted result and its receipt survive a power cut (PostgreSQL: every commit
    // but the heartbeats' is durable, synchronous_commit as the server sets it).
    options.synchronous = storage::Synchronous::Full;
    options.migrations = kMigrations;
    options.newerHint = "use a newer tandem-coordinator";
    auto db = databaseUrl.empty() ? Database::open(stateDir / "coordinator.db", options)
                                  : storage::openPostgres(databaseUrl, options);
    if (!db) {
        const std::string name = stateStoreName(stateDir, databaseUrl);
        if (db.error().message.find(name) != std::string::npos)
            return db.error();
        return makeError(db.error().message + " (" + name + ")");
    }
    return db;
}

}  // namespace tandem::coord
