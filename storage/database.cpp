// What every backend shares: Statement and Database forward to the backend (connection.hpp);
// schema-version checks, migrations and transactions are written once here.
#include "database.hpp"

#include "connection.hpp"

#include <utility>

namespace tandem::storage {

// --- Statement ---

Statement::Statement(std::unique_ptr<StatementBackend> backend) : m_backend(std::move(backend)) {}
Statement::Statement(Statement&& other) noexcept = default;
Statement::~Statement() = default;

Statement& Statement::bind(int index, int64_t value) {
    m_backend->bindInteger(index, value);
    return *this;
}
Statement& Statement::bind(int index, double value) {
    m_backend->bindReal(index, value);
    return *this;
}
Statement& Statement::bind(int index, std::string_view text) {
    m_backend->bindText(index, text);
    return *this;
}
Statement& Statement::bind(int index, std::span<const uint8_t> blob) {
    m_backend->bindBlob(index, blob);
    return *this;
}
Statement& Statement::bindNull(int index) {
    m_backend->bindNull(index);
    return *this;
}

bool Statement::step() {
    return m_backend->step();
}

Status Statement::run() {
    while (step()) {
    }
    return status();
}

Status Statement::status() const {
    return m_backend->status();
}

int64_t Statement::integer(int column) const {
    return m_backend->integer(column);
}
double Statement::real(int column) const {
    return m_backend->real(column);
}
std::optional<int64_t> Statement::optionalInteger(int column) const {
    if (isNull(column))
        return std::nullopt;
    return integer(column);
}
std::optional<double> Statement::optionalReal(int column) const {
    if (isNull(column))
        return std::nullopt;
    return real(column);
}
std::string Statement::text(int column) const {
    return m_backend->text(column);
}
std::vector<uint8_t> Statement::blob(int column) const {
    return m_backend->blob(column);
}
bool Statement::isNull(int column) const {
    return m_backend->isNull(column);
}

// --- Database ---

Database::Database(std::unique_ptr<Connection> connection) : m_connection(std::move(connection)) {}

Database::Database(Database&& other) noexcept = default;
Database::~Database() = default;

Expected<int> Database::checkSchemaVersion(const OpenOptions& options) {
    const int known = static_cast<int>(options.migrations.size());
    if (known == 0)
        return 0;
    auto version = userVersion();
    if (!version)
        return version.error();
    if (*version > known) {
        return makeError(options.errorPrefix + ": schema version " + std::to_string(*version) +
                         " is newer than this program, which knows versions up to " +
                         std::to_string(known) +
                         (options.newerHint.empty() ? "" : "; " + options.newerHint));
    }
    return *version;
}

Status Database::migrate(std::span<const std::string_view> migrations, int fromVersion) {
    const int target = static_cast<int>(migrations.size());
    for (int v = fromVersion; v < target; ++v) {
        const std::string what =
            "migrating from schema version " + std::to_string(v) + " to " + std::to_string(v + 1);
        Transaction t(*this, what);
        if (!t.started())
            return t.started();
        if (Status s = m_connection->lockForMigration(what); !s)
            return s;
        // Another process may have migrated while this one waited for the lock.
        auto now = userVersion();
        if (!now)
            return now.error();
        if (*now > v)
            continue;
        if (Status s = exec(m_connection->migrationSql(migrations[static_cast<size_t>(v)]), what);
            !s)
            return s;
        if (Status s = m_connection->setSchemaVersion(v + 1, what); !s)
            return s;
        if (Status s = t.commit(); !s)
            return s;
    }
    return {};
}

Status Database::exec(std::string_view sql, std::string_view operation) {
    return m_connection->exec(sql, operation);
}

Expected<Statement> Database::prepare(std::string_view sql, std::string_view operation) {
    auto backend = m_connection->prepare(sql, operation, false);
    if (!backend)
        return backend.error();
    return Statement(std::move(*backend));
}

Expected<Statement> Database::prepareCached(std::string_view sql, std::string_view operation) {
    auto backend = m_connection->prepare(sql, operation, true);
    if (!backend)
        return backend.error();
    return Statement(std::move(*backend));
}

int64_t Database::lastInsertId() const {
    return m_connection->lastInsertId();
}
int Database::changes() const {
    return m_connection->changes();
}
Expected<int> Database::userVersion() {
    return m_connection->schemaVersion();
}
Backend Database::backend() const {
    return m_connection->backend();
}
Status Database::begin(Commit commit, std::string_view operation) {
    return m_connection->begin(commit, operation);
}

// --- Transaction ---

Transaction::Transaction(Database& db, std::string_view operation, Commit commit)
    : m_db(db), m_operation(operation) {
    m_started = m_db.begin(commit, m_operation);
    m_open = m_started.ok();
}

Transaction::~Transaction() {
    if (m_open)
        (void)m_db.exec("ROLLBACK");
}

Status Transaction::commit() {
    Status s = m_db.exec("COMMIT", m_operation);
    if (s.ok())
        m_open = false;
    return s;
}

}  // namespace tandem::storage
