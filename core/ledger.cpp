// The ledger's schema and writes: opening and migrating ledger.db, the integrity check, and
// recording work units, transitions, receipts, samples, transfers and events. The reads and chart
// queries live in ledger_queries.cpp.
#include "ledger.hpp"

#include "database.hpp"

#include <array>
#include <utility>

namespace tandem::core {

namespace {

// Version 1: the first schema. Later versions append a Migration; never edit a shipped one.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE work_units (
    id TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    base_version INTEGER NOT NULL,
    config TEXT NOT NULL,
    device TEXT NOT NULL,
    inner_steps INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    seq_len INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    compute_seconds REAL NOT NULL,
    loss_first REAL,
    loss_last REAL,
    state TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    trained_at_ms INTEGER
) STRICT;
CREATE INDEX work_units_created ON work_units(created_at_ms);
CREATE INDEX work_units_trained ON work_units(trained_at_ms);
CREATE INDEX work_units_state ON work_units(state);

CREATE TABLE work_unit_transitions (
    id INTEGER PRIMARY KEY,
    work_unit_id TEXT NOT NULL REFERENCES work_units(id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    detail TEXT NOT NULL
) STRICT;
CREATE INDEX work_unit_transitions_unit ON work_unit_transitions(work_unit_id, id);

CREATE TABLE receipts (
    work_unit_id TEXT PRIMARY KEY REFERENCES work_units(id) ON DELETE CASCADE,
    round_applied INTEGER NOT NULL,
    weight REAL NOT NULL,
    credit REAL NOT NULL,
    received_at_ms INTEGER NOT NULL,
    signature BLOB NOT NULL,
    body BLOB NOT NULL
) STRICT;
CREATE INDEX receipts_received ON receipts(received_at_ms);

CREATE TABLE device_samples (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    device TEXT NOT NULL,
    tokens_per_second REAL NOT NULL,
    utilisation REAL,
    temperature_c REAL,
    memory_used_bytes INTEGER,
    memory_total_bytes INTEGER
) STRICT;
CREATE INDEX device_samples_at ON device_samples(at_ms);

CREATE TABLE transfers (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('up', 'down')),
    purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL CHECK (bytes >= 0),
    duration_ms INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    work_unit_id TEXT NOT NULL,
    detail TEXT NOT NULL
) STRICT;
CREATE INDEX transfers_at ON transfers(at_ms);

CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    level INTEGER NOT NULL,
    message TEXT NOT NULL
) STRICT;
CREATE INDEX events_at ON events(at_ms);
)sql";

// Version 2 (protocol v6, sharded runs): the outcome of each piece of a result uploaded in
// pieces, so that a restart sends only the pieces not settled yet. The unit keeps its one row in
// work_units and, once accepted, its one receipt (the credit counted once).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE result_pieces (
    work_unit_id TEXT NOT NULL REFERENCES work_units(id) ON DELETE CASCADE,
    shard INTEGER NOT NULL CHECK (shard >= 0),
    state TEXT NOT NULL CHECK (state IN ('accepted', 'refused')),
    at_ms INTEGER NOT NULL,
    detail TEXT NOT NULL,
    signature BLOB NOT NULL,
    receipt_json BLOB NOT NULL,
    PRIMARY KEY (work_unit_id, shard)
) STRICT;
)sql";

constexpr std::array<Migration, 2> kMigrations{{{1, kSchemaV1}, {2, kSchemaV2}}};

constexpr std::array<const char*, 10> kStateNames{
    "assigned", "downloading", "training", "trained", "uploading",
    "uploaded", "accepted",    "rejected", "failed",  "abandoned"};

// States in which training is complete: the unit counts on the day it first reaches one.
bool isTrainedState(WorkUnitState s) {
    return s == WorkUnitState::Trained || s == WorkUnitState::Uploading ||
           s == WorkUnitState::Uploaded || s == WorkUnitState::Accepted;
}

}  // namespace

const char* toString(WorkUnitState state) {
    return kStateNames[static_cast<size_t>(state)];
}

std::optional<WorkUnitState> workUnitStateFromString(const std::string& text) {
    for (size_t i = 0; i < kStateNames.size(); ++i) {
        if (text == kStateNames[i])
            return static_cast<WorkUnitState>(i);
    }
    return std::nullopt;
}

const char* toString(Direction direction) {
    return direction == Direction::Up ? "up" : "down";
}

const char* toString(EventLevel level) {
    switch (level) {
        case EventLevel::Debug:
            return "debug";
        case EventLevel::Info:
            return "info";
        case EventLevel::Warning:
            return "warning";
        case EventLevel::Error:
            return "error";
    }
    return "info";
}

std::span<const Migration> Ledger::migrations() {
    return kMigrations;
}
int Ledger::currentSchemaVersion() {
    return kMigrations.back().version;
}

Ledger::Ledger(std::filesystem::path path, storage::Database db)
    : m_path(std::move(path)), m_db(std::make_unique<storage::Database>(std::move(db))) {}

Ledger::~Ledger() = default;

Expected<storage::Statement> Ledger::prepare(const char* sql, const char* operation) {
    return m_db->prepareCached(sql, operation);
}

Expected<std::unique_ptr<Ledger>> Ledger::open(const std::filesystem::path& file) {
    return open(file, migrations());
}

Expected<std::unique_ptr<Ledger>> Ledger::open(const std::filesystem::path& file,
                                               std::span<const Migration> steps) {
    std::vector<std::string_view> sql;
    for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].version != static_cast<int>(i) + 1) {
            return makeError("ledger: migration list is not numbered 1, 2, 3, ...");
        }
        sql.emplace_back(steps[i].sql);
    }
    // FULL: a committed receipt survives a power cut, not only a crash of the process.
    auto db = storage::Database::open(
        file, {.errorPrefix = "ledger " + file.string(),
               .synchronous = storage::Synchronous::Full,
               .migrations = sql,
               .newerHint = "it was written by a newer Tandem. Update Tandem, or use another "
                            "data directory."});
    if (!db)
        return db.error();
    return std::unique_ptr<Ledger>(new Ledger(file, std::move(*db)));
}

Expected<int> Ledger::schemaVersion() {
    std::lock_guard lock(m_mutex);
    return m_db->userVersion();
}

Status Ledger::integrityCheck() {
    std::lock_guard lock(m_mutex);
    std::string problems;
    {
        auto q = prepare("PRAGMA integrity_check", "checking integrity");
        if (!q)
            return q.error();
        while (q->step()) {
            const std::string line = q->text(0);
            if (line != "ok")
                problems += "\n  " + line;
        }
        if (Status s = q->status(); !s)
            return s.error();
    }
    {
        auto q = prepare("PRAGMA foreign_key_check", "checking foreign keys");
        if (!q)
            return q.error();
        while (q->step()) {
            problems += "\n  table " + q->text(0) + " row " + std::to_string(q->integer(1)) +
                        " refers to a missing row of " + q->text(2);
        }
        if (Status s = q->status(); !s)
            return s.error();
    }
    if (!problems.empty()) {
        return makeError("ledger " + m_path.string() + " failed its integrity check:" + problems);
    }
    return {};
}

// --- recording ---

Expected<std::optional<WorkUnitState>> Ledger::stateLocked(const std::string& id) {
    auto q = prepare("SELECT state FROM work_units WHERE id = ?1", "reading a work unit's state");
    if (!q)
        return q.error();
    q->bind(1, id);
    const bool found = q->step();
    if (Status s = q->status(); !s)
        return s.error();
    if (!found)
        return std::optional<WorkUnitState>();
    auto state = workUnitStateFromString(q->text(0));
    if (!state) {
        return makeError("ledger " + m_path.string() + ": work unit '" + id +
                         "' has an unknown state '" + q->text(0) + "'");
    }
    return std::optional<WorkUnitState>(*state);
}

Status Ledger::transitionLocked(const std::string& id, WorkUnitState state, int64_t atMs,
                                const std::string& detail) {
    auto current = stateLocked(id);
    if (!current)
        return current.error();
    if (!*current) {
        return makeError("ledger " + m_path.string() + ": no work unit '" + id +
                         "' to move to state " + toString(state));
    }
    if (**current == state)
        return {};
    {
        auto q = prepare(
            "UPDATE work_units SET state = ?2, updated_at_ms = max(updated_at_ms, ?3), "
            "trained_at_ms = CASE WHEN trained_at_ms IS NULL AND ?4 THEN ?3 ELSE trained_at_ms END "
            "WHERE id = ?1",
            "recording a work unit's state");
        if (!q)
            return q.error();
        q->bind(1, id).bind(2, toString(state)).bind(3, atMs).bind(4, isTrainedState(state));
        if (Status s = q->run(); !s)
            return s;
    }
    auto q = prepare(
        "INSERT INTO work_unit_transitions(work_unit_id, state, at_ms, detail) "
        "VALUES (?1, ?2, ?3, ?4)",
        "recording a work unit's state transition");
    if (!q)
        return q.error();
    q->bind(1, id).bind(2, toString(state)).bind(3, atMs).bind(4, detail);
    return q->run();
}

Status Ledger::recordWorkUnit(const WorkUnitRecord& u) {
    std::lock_guard lock(m_mutex);
    const char* op = "recording a work unit";
    storage::Transaction t(*m_db, op);
    if (!t.started())
        return t.started();
    auto current = stateLocked(u.id);
    if (!current)
        return current.error();
    if (!*current) {
        auto q = prepare(
            "INSERT INTO work_units(id, run, base_version, config, device, inner_steps, "
            "batch_size, seq_len, tokens, steps, compute_seconds, loss_first, loss_last, state, "
            "created_at_ms, updated_at_ms, trained_at_ms) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            op);
        if (!q)
            return q.error();
        std::optional<int64_t> trainedAt = u.trainedAtMs;
        if (!trainedAt && isTrainedState(u.state))
            trainedAt = u.updatedAtMs;
        q->bind(1, u.id).bind(2, u.run).bind(3, u.baseVersion).bind(4, u.config).bind(5, u.device);
        q->bind(6, u.innerSteps).bind(7, u.batchSize).bind(8, u.seqLen).bind(9, u.tokens);
        q->bind(10, u.steps).bind(11, u.computeSeconds).bind(12, u.lossFirst);
        q->bind(13, u.lossLast).bind(14, toString(u.state)).bind(15, u.createdAtMs);
        q->bind(16, u.updatedAtMs).bind(17, trainedAt);
        if (Status s = q->run(); !s)
            return s;
        auto tq = prepare(
            "INSERT INTO work_unit_transitions(work_unit_id, state, at_ms, detail) "
            "VALUES (?1, ?2, ?3, '')",
            op);
        if (!tq)
            return tq.error();
        tq->bind(1, u.id).bind(2, toString(u.state)).bind(3, u.createdAtMs);
        if (Status s = tq->run(); !s)
            return s;
    } else {
        auto q = prepare(
            "UPDATE work_units SET run = ?2, base_version = ?3, config = ?4, device = ?5, "
            "inner_steps = ?6, batch_size = ?7, seq_len = ?8, tokens = ?9, steps = ?10, "
            "compute_seconds = ?11, loss_first = ?12, loss_last = ?13, created_at_ms = ?14, "
            "updated_at_ms = ?15, trained_at_ms = coalesce(?16, trained_at_ms) WHERE id = ?1",
            op);
        if (!q)
            return q.error();
        q->bind(1, u.id).bind(2, u.run).bind(3, u.baseVersion).bind(4, u.config).bind(5, u.device);
        q->bind(6, u.innerSteps).bind(7, u.batchSize).bind(8, u.seqLen).bind(9, u.tokens);
        q->bind(10, u.steps).bind(11, u.computeSeconds).bind(12, u.lossFirst);
        q->bind(13, u.lossLast).bind(14, u.createdAtMs).bind(15, u.updatedAtMs);
        q->bind(16, u.trainedAtMs);
        if (Status s = q->run(); !s)
            return s;
        if (Status s = transitionLocked(u.id, u.state, u.updatedAtMs, {}); !s)
            return s;
    }
    return t.commit();
}

Status Ledger::updateWorkUnitProgress(const std::string& id, int64_t tokens, int64_t steps,
                                      double computeSeconds, std::optional<double> lossFirst,
                                      std::optional<double> lossLast, int64_t atMs) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "UPDATE work_units SET tokens = ?2, steps = ?3, compute_seconds = ?4, "
        "loss_first = coalesce(?5, loss_first), loss_last = coalesce(?6, loss_last), "
        "updated_at_ms = max(updated_at_ms, ?7) WHERE id = ?1",
        "recording a work unit's progress");
    if (!q)
        return q.error();
    q->bind(1, id).bind(2, tokens).bind(3, steps).bind(4, computeSeconds).bind(5, lossFirst);
    q->bind(6, lossLast).bind(7, atMs);
    if (Status s = q->run(); !s)
        return s;
    if (m_db->changes() == 0) {
        return makeError("ledger " + m_path.string() + ": no work unit '" + id +
                         "' to record progress for");
    }
    return {};
}

Status Ledger::recordTransition(const std::string& id, WorkUnitState state, int64_t atMs,
                                const std::string& detail) {
    std::lock_guard lock(m_mutex);
    const char* op = "recording a work unit's state";
    storage::Transaction t(*m_db, op);
    if (!t.started())
        return t.started();
    if (Status s = transitionLocked(id, state, atMs, detail); !s)
        return s;
    return t.commit();
}

Status Ledger::recordReceipt(const Receipt& r) {
    std::lock_guard lock(m_mutex);
    const char* op = "recording a receipt";
    storage::Transaction t(*m_db, op);
    if (!t.started())
        return t.started();
    {
        auto q = prepare("SELECT signature, body FROM receipts WHERE work_unit_id = ?1", op);
        if (!q)
            return q.error();
        q->bind(1, r.workUnitId);
        const bool found = q->step();
        if (Status s = q->status(); !s)
            return s.error();
        if (found) {
            if (q->blob(0) == r.signature && q->blob(1) == r.body)
                return {};  // rolls back
            return makeError("ledger " + m_path.string() + ": work unit '" + r.workUnitId +
                             "' already has a different receipt; the new one is not stored");
        }
    }
    auto current = stateLocked(r.workUnitId);
    if (!current)
        return current.error();
    if (!*current) {
        return makeError("ledger " + m_path.string() + ": receipt for work unit '" + r.workUnitId +
                         "', which the ledger does not know");
    }
    {
        auto q = prepare(
            "INSERT INTO receipts(work_unit_id, round_applied, weight, credit, received_at_ms, "
            "signature, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            op);
        if (!q)
            return q.error();
        q->bind(1, r.workUnitId).bind(2, r.roundApplied).bind(3, r.weight).bind(4, r.credit);
        q->bind(5, r.receivedAtMs).bind(6, r.signature).bind(7, r.body);
        if (Status s = q->run(); !s)
            return s;
    }
    if (Status s = transitionLocked(r.workUnitId, WorkUnitState::Accepted, r.receivedAtMs, {});
        !s) {
        return s;
    }
    return t.commit();
}

Status Ledger::recordSample(const DeviceSample& d) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "INSERT INTO device_samples(at_ms, device, tokens_per_second, utilisation, "
        "temperature_c, memory_used_bytes, memory_total_bytes) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        "recording a device sample");
    if (!q)
        return q.error();
    q->bind(1, d.atMs).bind(2, d.device).bind(3, d.tokensPerSecond).bind(4, d.utilisation);
    q->bind(5, d.temperatureC).bind(6, d.memoryUsedBytes).bind(7, d.memoryTotalBytes);
    return q->run();
}

Expected<int64_t> Ledger::recordTransfer(const Transfer& x) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "INSERT INTO transfers(at_ms, direction, purpose, bytes, duration_ms, ok, work_unit_id, "
        "detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        "recording a transfer");
    if (!q)
        return q.error();
    q->bind(1, x.atMs).bind(2, toString(x.direction)).bind(3, x.purpose).bind(4, x.bytes);
    q->bind(5, x.durationMs).bind(6, x.ok).bind(7, x.workUnitId).bind(8, x.detail);
    if (Status s = q->run(); !s)
        return s.error();
    return m_db->lastInsertId();
}

Status Ledger::recordPieceOutcome(const std::string& workUnitId, const PieceOutcome& piece) {
    std::lock_guard lock(m_mutex);
    const char* op = "recording the outcome of a result piece";
    auto q = prepare(
        "INSERT INTO result_pieces(work_unit_id, shard, state, at_ms, detail, signature, "
        "receipt_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
        "ON CONFLICT(work_unit_id, shard) DO NOTHING",
        op);
    if (!q)
        return q.error();
    q->bind(1, workUnitId).bind(2, static_cast<int64_t>(piece.shard));
    q->bind(3, piece.accepted ? "accepted" : "refused").bind(4, piece.atMs).bind(5, piece.detail);
    q->bind(6, piece.signature).bind(7, piece.receiptJson);
    return q->run();
}

Expected<std::vector<PieceOutcome>> Ledger::pieceOutcomes(const std::string& workUnitId) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "SELECT shard, state, at_ms, detail, signature, receipt_json FROM result_pieces "
        "WHERE work_unit_id = ?1 ORDER BY shard",
        "reading the outcomes of result pieces");
    if (!q)
        return q.error();
    q->bind(1, workUnitId);
    std::vector<PieceOutcome> out;
    while (q->step()) {
        PieceOutcome p;
        p.shard = static_cast<int>(q->integer(0));
        p.accepted = q->text(1) == "accepted";
        p.atMs = q->integer(2);
        p.detail = q->text(3);
        p.signature = q->blob(4);
        p.receiptJson = q->blob(5);
        out.push_back(std::move(p));
    }
    if (Status s = q->status(); !s)
        return s.error();
    return out;
}

Expected<int64_t> Ledger::recordEvent(int64_t atMs, EventLevel level, const std::string& message) {
    std::lock_guard lock(m_mutex);
    auto q = prepare("INSERT INTO events(at_ms, level, message) VALUES (?1, ?2, ?3)",
                     "recording an event");
    if (!q)
        return q.error();
    q->bind(1, atMs).bind(2, static_cast<int>(level)).bind(3, message);
    if (Status s = q->run(); !s)
        return s.error();
    return m_db->lastInsertId();
}

Expected<int64_t> Ledger::pruneSamplesBefore(int64_t beforeMs) {
    std::lock_guard lock(m_mutex);
    auto q = prepare("DELETE FROM device_samples WHERE at_ms < ?1", "pruning device samples");
    if (!q)
        return q.error();
    q->bind(1, beforeMs);
    if (Status s = q->run(); !s)
        return s.error();
    return static_cast<int64_t>(m_db->changes());
}

}  // namespace tandem::core
