// The worker's ledger: ledger.db in the data directory, a SQLite file that records every work
// unit and its state transitions, receipts and credit, throughput and device samples, every
// transfer and the event log. The charts and pages of the app read from it.
//
// Times are Unix milliseconds (UTC) passed in by the caller; no query reads the clock. Per-day
// queries take local dates and a TimeZone, so a day is local midnight to local midnight.
// A Ledger is safe to call from several threads (one connection behind a mutex); a second
// process or thread may also open its own Ledger on the same file (WAL).
#pragma once

#include "clock.hpp"
#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::storage {
class Database;
class Statement;
}  // namespace tandem::storage

namespace tandem::core {

enum class WorkUnitState {
    Assigned,     // manifest received
    Downloading,  // weights and data
    Training,
    Trained,    // result on disk, not yet uploaded
    Uploading,  //
    Uploaded,   // the coordinator has it; receipt pending
    Accepted,   // receipt stored
    Rejected,   // the coordinator refused it (too stale, invalid)
    Failed,     // failed locally (NaN, GPU error); nothing sent
    Abandoned,  // given up (run ended, lease expired)
};
const char* toString(WorkUnitState state);
std::optional<WorkUnitState> workUnitStateFromString(const std::string& text);

// What the ledger stores about a work unit. Recording the same id again updates the row.
struct WorkUnitRecord {
    std::string id;  // the coordinator's work-unit id
    std::string run;
    int64_t baseVersion = 0;  // global weights version r the unit starts from
    std::string config;       // model configuration, e.g. "tiny" or "L=2,NH=4,C=128,T=64"
    std::string device;       // e.g. "cpu", "cuda:0"
    int64_t innerSteps = 0;   // H
    int64_t batchSize = 0;
    int64_t seqLen = 0;
    int64_t tokens = 0;  // trained so far
    int64_t steps = 0;   // done so far
    double computeSeconds = 0;
    std::optional<double> lossFirst;
    std::optional<double> lossLast;
    WorkUnitState state = WorkUnitState::Assigned;
    int64_t createdAtMs = 0;
    int64_t updatedAtMs = 0;
    std::optional<int64_t> trainedAtMs;  // when training finished; the day the unit counts on
};

struct WorkUnitTransition {
    WorkUnitState state = WorkUnitState::Assigned;
    int64_t atMs = 0;
    std::string detail;
};

// The coordinator's signed answer to an accepted result. body holds the receipt as received
// (the bytes the signature covers), stored verbatim.
struct Receipt {
    std::string workUnitId;
    int64_t roundApplied = 0;
    double weight = 0;
    double credit = 0;
    int64_t receivedAtMs = 0;
    std::vector<uint8_t> signature;
    std::vector<uint8_t> body;
};

// Protocol v6: what became of one piece of a result uploaded in pieces (a sharded run). accepted:
// the piece's signed receipt (receiptJson verbatim, its signature); refused: why (detail).
struct PieceOutcome {
    int shard = 0;
    bool accepted = false;
    int64_t atMs = 0;
    std::string detail;
    std::vector<uint8_t> signature;
    std::vector<uint8_t> receiptJson;
    bool operator==(const PieceOutcome&) const = default;
};

struct DeviceSample {
    int64_t atMs = 0;
    std::string device;
    double tokensPerSecond = 0;
    std::optional<double> utilisation;  // 0..1
    std::optional<double> temperatureC;
    std::optional<int64_t> memoryUsedBytes;
    std::optional<int64_t> memoryTotalBytes;
};

enum class Direction { Up, Down };
const char* toString(Direction direction);

struct Transfer {
    int64_t id = 0;    // assigned by the ledger
    int64_t atMs = 0;  // when it started
    Direction direction = Direction::Down;
    std::string purpose;  // "weights", "data", "result", "probe", "manifest", ...
    int64_t bytes = 0;    // bytes actually moved, also for a failed transfer
    int64_t durationMs = 0;
    bool ok = true;
    std::string workUnitId;  // may be empty
    std::string detail;      // error text for a failed transfer
};

enum class EventLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };
const char* toString(EventLevel level);

struct Event {
    int64_t id = 0;  // assigned by the ledger
    int64_t atMs = 0;
    EventLevel level = EventLevel::Info;
    std::string message;
};

struct Totals {
    int64_t workUnitsTrained = 0;   // units that finished training (trainedAtMs set)
    int64_t workUnitsAccepted = 0;  // with a receipt
    int64_t workUnitsPending = 0;   // trained or uploaded, receipt not yet there
    int64_t tokens = 0;             // of the trained units
    double computeSeconds = 0;      // of the trained units
    double gpuSeconds = 0;          // of those trained on a "cuda" device
    double credit = 0;
    int64_t bytesUp = 0;  // all transfers, failed ones too
    int64_t bytesDown = 0;
};

struct DayTotals {
    LocalDate date;
    int64_t workUnits = 0;  // trained that day
    int64_t tokens = 0;
    double computeSeconds = 0;
    double gpuSeconds = 0;
    double credit = 0;  // receipts received that day
    int64_t bytesUp = 0;
    int64_t bytesDown = 0;
};

struct DayTransfers {
    LocalDate date;
    int64_t bytesUp = 0;
    int64_t bytesDown = 0;
    int64_t transfers = 0;
    int64_t failed = 0;
};

// One point of the throughput chart: a raw sample, or the mean over a bucket.
struct ThroughputPoint {
    int64_t atMs = 0;  // the sample's time, or the bucket's start
    int64_t samples = 1;
    double tokensPerSecond = 0;
    std::optional<double> utilisation;   // mean of the samples that had one
    std::optional<double> temperatureC;  // maximum of the samples that had one
};

struct EventFilter {
    EventLevel minLevel = EventLevel::Debug;
    std::string text;  // case-insensitive (ASCII) substring; empty = all
    std::optional<int64_t> fromMs;
    std::optional<int64_t> toMs;  // exclusive
    int limit = 500;              // newest first
};

struct WorkUnitRow {
    WorkUnitRecord unit;
    std::optional<Receipt> receipt;  // without signature and body
};

struct BytesUsed {
    int64_t up = 0;
    int64_t down = 0;
};

// One forward migration: the SQL that takes the schema from version - 1 to version. Each runs in
// its own transaction together with the user_version update.
struct Migration {
    int version;
    const char* sql;
};

class Ledger {
  public:
    // The migrations this build knows; the schema version is the last one's.
    static std::span<const Migration> migrations();
    static int currentSchemaVersion();

    // Opens (creating if needed) and migrates the ledger. A file whose schema is newer than this
    // build is refused and left untouched.
    static Expected<std::unique_ptr<Ledger>> open(const std::filesystem::path& file);
    // Same with an explicit migration list (tests of the migration machinery).
    static Expected<std::unique_ptr<Ledger>> open(const std::filesystem::path& file,
                                                  std::span<const Migration> migrations);
    ~Ledger();
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    const std::filesystem::path& path() const { return m_path; }
    Expected<int> schemaVersion();
    // PRAGMA integrity_check and foreign_key_check; the error lists what they found.
    Status integrityCheck();

    // --- recording ---
    // Inserts the unit or updates every field of an existing one. A state change is recorded as
    // a transition at updatedAtMs (createdAtMs for a new unit).
    Status recordWorkUnit(const WorkUnitRecord& unit);
    // Progress of training in place; does not touch the state.
    Status updateWorkUnitProgress(const std::string& id, int64_t tokens, int64_t steps,
                                  double computeSeconds, std::optional<double> lossFirst,
                                  std::optional<double> lossLast, int64_t atMs);
    // Moves the unit to state; moving it to the state it is in records nothing. Reaching Trained
    // sets trainedAtMs (once).
    Status recordTransition(const std::string& id, WorkUnitState state, int64_t atMs,
                            const std::string& detail = {});
    // Stores the receipt and moves the unit to Accepted, in one transaction. The same receipt
    // again is a no-op; a different receipt for the same unit is an error.
    Status recordReceipt(const Receipt& receipt);
    // The outcome of piece `piece.shard` of the unit's result; a piece already recorded keeps its
    // first outcome (a retry after a restart records nothing new).
    Status recordPieceOutcome(const std::string& workUnitId, const PieceOutcome& piece);
    Status recordSample(const DeviceSample& sample);
    Expected<int64_t> recordTransfer(const Transfer& transfer);
    Expected<int64_t> recordEvent(int64_t atMs, EventLevel level, const std::string& message);

    // Deletes device samples older than beforeMs (a sample a minute is ~30 MB a year); returns
    // how many went. Work units, receipts, transfers and events are never pruned.
    Expected<int64_t> pruneSamplesBefore(int64_t beforeMs);

    // --- queries ---
    Expected<std::optional<WorkUnitRecord>> workUnit(const std::string& id);
    Expected<std::vector<WorkUnitTransition>> transitions(const std::string& id);
    Expected<std::optional<Receipt>> receipt(const std::string& workUnitId);
    // The recorded piece outcomes of a unit's result, by shard (empty for a whole result).
    Expected<std::vector<PieceOutcome>> pieceOutcomes(const std::string& workUnitId);
    // Units not yet settled: trained or uploading or uploaded without a receipt (for restart).
    Expected<std::vector<WorkUnitRecord>> pendingWorkUnits();
    Expected<Totals> totals();
    // One entry per local date from first to last inclusive (empty days included).
    Expected<std::vector<DayTotals>> totalsPerDay(LocalDate first, LocalDate last,
                                                  const TimeZone& zone);
    // Samples with fromMs <= atMs < toMs, oldest first. bucketMs > 0 averages buckets of that
    // length starting at fromMs; buckets without samples are left out.
    // device: only that device's samples; empty: all.
    Expected<std::vector<ThroughputPoint>> throughput(int64_t fromMs, int64_t toMs,
                                                      int64_t bucketMs = 0,
                                                      const std::string& device = {});
    Expected<std::vector<DayTransfers>> transfersPerDay(LocalDate first, LocalDate last,
                                                        const TimeZone& zone);
    Expected<std::vector<Transfer>> recentTransfers(int limit);  // newest first
    Expected<std::vector<Event>> events(const EventFilter& filter);
    // Newest first (by createdAtMs), with their receipt if any.
    Expected<std::vector<WorkUnitRow>> workUnits(int limit, int offset = 0);
    Expected<BytesUsed> bytesUsed(int64_t fromMs, int64_t toMs);
    // Bytes moved on the local day that contains nowMs (for the daily bandwidth cap).
    Expected<BytesUsed> bytesUsedToday(int64_t nowMs, const TimeZone& zone);

  private:
    Ledger(std::filesystem::path path, storage::Database db);
    // Every ledger statement is prepared once and reset after each use (a statement left open
    // would pin the WAL).
    Expected<storage::Statement> prepare(const char* sql, const char* operation);
    Status transitionLocked(const std::string& id, WorkUnitState state, int64_t atMs,
                            const std::string& detail);
    Expected<std::optional<WorkUnitState>> stateLocked(const std::string& id);

    std::filesystem::path m_path;
    std::unique_ptr<storage::Database> m_db;
    std::mutex m_mutex;
};

}  // namespace tandem::core
