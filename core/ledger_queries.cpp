// The ledger's reads: single rows, totals and the chart queries (per day, throughput, transfers,
// events, the work-unit table). Opening, migrations and recording live in ledger.cpp.
#include "ledger.hpp"

#include "database.hpp"

#include <algorithm>
#include <climits>
#include <utility>

namespace tandem::core {

namespace {

constexpr const char* kWorkUnitColumns =
    "id, run, base_version, config, device, inner_steps, batch_size, seq_len, tokens, steps, "
    "compute_seconds, loss_first, loss_last, state, created_at_ms, updated_at_ms, trained_at_ms";

constexpr int64_t kMaxDays = 3700;

template <class Q>
WorkUnitRecord readWorkUnit(const Q& q, int first = 0) {
    WorkUnitRecord u;
    u.id = q.text(first + 0);
    u.run = q.text(first + 1);
    u.baseVersion = q.integer(first + 2);
    u.config = q.text(first + 3);
    u.device = q.text(first + 4);
    u.innerSteps = q.integer(first + 5);
    u.batchSize = q.integer(first + 6);
    u.seqLen = q.integer(first + 7);
    u.tokens = q.integer(first + 8);
    u.steps = q.integer(first + 9);
    u.computeSeconds = q.real(first + 10);
    u.lossFirst = q.optionalReal(first + 11);
    u.lossLast = q.optionalReal(first + 12);
    u.state = workUnitStateFromString(q.text(first + 13)).value_or(WorkUnitState::Failed);
    u.createdAtMs = q.integer(first + 14);
    u.updatedAtMs = q.integer(first + 15);
    u.trainedAtMs = q.optionalInteger(first + 16);
    return u;
}

template <class Q>
Transfer readTransfer(const Q& q) {
    Transfer x;
    x.id = q.integer(0);
    x.atMs = q.integer(1);
    x.direction = q.text(2) == "up" ? Direction::Up : Direction::Down;
    x.purpose = q.text(3);
    x.bytes = q.integer(4);
    x.durationMs = q.integer(5);
    x.ok = q.integer(6) != 0;
    x.workUnitId = q.text(7);
    x.detail = q.text(8);
    return x;
}

// Every row of q, in order, as read(q); an error if a step failed.
template <class Read>
auto readRows(storage::Statement& q, Read read) -> Expected<std::vector<decltype(read(q))>> {
    std::vector<decltype(read(q))> out;
    while (q.step())
        out.push_back(read(q));
    if (Status s = q.status(); !s)
        return s.error();
    return out;
}

Status checkDayRange(LocalDate first, LocalDate last) {
    const int64_t days = last.daysSinceEpoch() - first.daysSinceEpoch() + 1;
    if (days < 1) {
        return makeError("ledger: day range " + first.toString() + " .. " + last.toString() +
                         " is empty (the last day is before the first)");
    }
    if (days > kMaxDays) {
        return makeError("ledger: day range of " + std::to_string(days) +
                         " days is longer than the limit of " + std::to_string(kMaxDays));
    }
    return {};
}

}  // namespace

Expected<std::optional<WorkUnitRecord>> Ledger::workUnit(const std::string& id) {
    std::lock_guard lock(m_mutex);
    static const std::string sql =
        std::string("SELECT ") + kWorkUnitColumns + " FROM work_units WHERE id = ?1";
    auto q = prepare(sql.c_str(), "reading a work unit");
    if (!q)
        return q.error();
    q->bind(1, id);
    const bool found = q->step();
    if (Status s = q->status(); !s)
        return s.error();
    if (!found)
        return std::optional<WorkUnitRecord>();
    return std::optional<WorkUnitRecord>(readWorkUnit(*q));
}

Expected<std::vector<WorkUnitTransition>> Ledger::transitions(const std::string& id) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "SELECT state, at_ms, detail FROM work_unit_transitions WHERE work_unit_id = ?1 "
        "ORDER BY id",
        "reading a work unit's transitions");
    if (!q)
        return q.error();
    q->bind(1, id);
    return readRows(*q, [](const storage::Statement& r) {
        return WorkUnitTransition{
            workUnitStateFromString(r.text(0)).value_or(WorkUnitState::Failed), r.integer(1),
            r.text(2)};
    });
}

Expected<std::optional<Receipt>> Ledger::receipt(const std::string& workUnitId) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "SELECT round_applied, weight, credit, received_at_ms, signature, body FROM receipts "
        "WHERE work_unit_id = ?1",
        "reading a receipt");
    if (!q)
        return q.error();
    q->bind(1, workUnitId);
    const bool found = q->step();
    if (Status s = q->status(); !s)
        return s.error();
    if (!found)
        return std::optional<Receipt>();
    Receipt r;
    r.workUnitId = workUnitId;
    r.roundApplied = q->integer(0);
    r.weight = q->real(1);
    r.credit = q->real(2);
    r.receivedAtMs = q->integer(3);
    r.signature = q->blob(4);
    r.body = q->blob(5);
    return std::optional<Receipt>(std::move(r));
}

Expected<std::vector<WorkUnitRecord>> Ledger::pendingWorkUnits() {
    std::lock_guard lock(m_mutex);
    static const std::string sql = std::string("SELECT ") + kWorkUnitColumns +
                                   " FROM work_units WHERE state IN ('trained', 'uploading', "
                                   "'uploaded') ORDER BY created_at_ms, id";
    auto q = prepare(sql.c_str(), "reading pending work units");
    if (!q)
        return q.error();
    return readRows(*q, [](const storage::Statement& r) { return readWorkUnit(r); });
}

Expected<Totals> Ledger::totals() {
    std::lock_guard lock(m_mutex);
    const char* op = "computing totals";
    Totals t;
    {
        auto q = prepare(
            "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(compute_seconds), 0), "
            "coalesce(sum(CASE WHEN device LIKE 'cuda%' THEN compute_seconds END), 0) "
            "FROM work_units WHERE trained_at_ms IS NOT NULL",
            op);
        if (!q)
            return q.error();
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        t.workUnitsTrained = q->integer(0);
        t.tokens = q->integer(1);
        t.computeSeconds = q->real(2);
        t.gpuSeconds = q->real(3);
    }
    {
        auto q = prepare(
            "SELECT count(*) FROM work_units WHERE state IN ('trained', 'uploading', 'uploaded')",
            op);
        if (!q)
            return q.error();
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        t.workUnitsPending = q->integer(0);
    }
    {
        auto q = prepare("SELECT count(*), coalesce(sum(credit), 0) FROM receipts", op);
        if (!q)
            return q.error();
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        t.workUnitsAccepted = q->integer(0);
        t.credit = q->real(1);
    }
    {
        auto q = prepare(
            "SELECT coalesce(sum(CASE WHEN direction = 'up' THEN bytes END), 0), "
            "coalesce(sum(CASE WHEN direction = 'down' THEN bytes END), 0) FROM transfers",
            op);
        if (!q)
            return q.error();
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        t.bytesUp = q->integer(0);
        t.bytesDown = q->integer(1);
    }
    return t;
}

namespace {
constexpr const char* kBytesBetween =
    "SELECT coalesce(sum(CASE WHEN direction = 'up' THEN bytes END), 0), "
    "coalesce(sum(CASE WHEN direction = 'down' THEN bytes END), 0), count(*), "
    "coalesce(sum(ok = 0), 0) FROM transfers WHERE at_ms >= ?1 AND at_ms < ?2";
}

Expected<std::vector<DayTotals>> Ledger::totalsPerDay(LocalDate first, LocalDate last,
                                                      const TimeZone& zone) {
    if (Status s = checkDayRange(first, last); !s)
        return s.error();
    std::lock_guard lock(m_mutex);
    const char* op = "computing totals per day";
    std::vector<DayTotals> out;
    // One indexed range query per local day: days may be 23 or 25 hours long.
    int64_t startMs = startOfLocalDay(first, zone);
    for (LocalDate d = first; d <= last; d = d.plusDays(1)) {
        const int64_t endMs = startOfLocalDay(d.plusDays(1), zone);
        DayTotals day;
        day.date = d;
        {
            auto q = prepare(
                "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(compute_seconds), 0), "
                "coalesce(sum(CASE WHEN device LIKE 'cuda%' THEN compute_seconds END), 0) "
                "FROM work_units WHERE trained_at_ms >= ?1 AND trained_at_ms < ?2",
                op);
            if (!q)
                return q.error();
            q->bind(1, startMs).bind(2, endMs);
            q->step();
            if (Status s = q->status(); !s)
                return s.error();
            day.workUnits = q->integer(0);
            day.tokens = q->integer(1);
            day.computeSeconds = q->real(2);
            day.gpuSeconds = q->real(3);
        }
        {
            auto q = prepare(
                "SELECT coalesce(sum(credit), 0) FROM receipts "
                "WHERE received_at_ms >= ?1 AND received_at_ms < ?2",
                op);
            if (!q)
                return q.error();
            q->bind(1, startMs).bind(2, endMs);
            q->step();
            if (Status s = q->status(); !s)
                return s.error();
            day.credit = q->real(0);
        }
        {
            auto q = prepare(kBytesBetween, op);
            if (!q)
                return q.error();
            q->bind(1, startMs).bind(2, endMs);
            q->step();
            if (Status s = q->status(); !s)
                return s.error();
            day.bytesUp = q->integer(0);
            day.bytesDown = q->integer(1);
        }
        out.push_back(day);
        startMs = endMs;
    }
    return out;
}

Expected<std::vector<ThroughputPoint>> Ledger::throughput(int64_t fromMs, int64_t toMs,
                                                          int64_t bucketMs,
                                                          const std::string& device) {
    if (bucketMs < 0)
        return makeError("ledger: throughput bucket length is negative");
    std::lock_guard lock(m_mutex);
    const char* op = "reading throughput";
    if (toMs <= fromMs)
        return std::vector<ThroughputPoint>();
    if (bucketMs == 0) {
        auto q = prepare(
            "SELECT at_ms, tokens_per_second, utilisation, temperature_c FROM device_samples "
            "WHERE at_ms >= ?1 AND at_ms < ?2 AND (?3 = '' OR device = ?3) ORDER BY at_ms, id",
            op);
        if (!q)
            return q.error();
        q->bind(1, fromMs).bind(2, toMs).bind(3, device);
        return readRows(*q, [](const storage::Statement& r) {
            return ThroughputPoint{r.integer(0), 1, r.real(1), r.optionalReal(2),
                                   r.optionalReal(3)};
        });
    }
    auto q = prepare(
        "SELECT (at_ms - ?1) / ?4 AS bucket, count(*), avg(tokens_per_second), avg(utilisation), "
        "max(temperature_c) FROM device_samples "
        "WHERE at_ms >= ?1 AND at_ms < ?2 AND (?3 = '' OR device = ?3) "
        "GROUP BY bucket ORDER BY bucket",
        op);
    if (!q)
        return q.error();
    q->bind(1, fromMs).bind(2, toMs).bind(3, device).bind(4, bucketMs);
    return readRows(*q, [&](const storage::Statement& r) {
        return ThroughputPoint{fromMs + r.integer(0) * bucketMs, r.integer(1), r.real(2),
                               r.optionalReal(3), r.optionalReal(4)};
    });
}

Expected<std::vector<DayTransfers>> Ledger::transfersPerDay(LocalDate first, LocalDate last,
                                                            const TimeZone& zone) {
    if (Status s = checkDayRange(first, last); !s)
        return s.error();
    std::lock_guard lock(m_mutex);
    std::vector<DayTransfers> out;
    int64_t startMs = startOfLocalDay(first, zone);
    for (LocalDate d = first; d <= last; d = d.plusDays(1)) {
        const int64_t endMs = startOfLocalDay(d.plusDays(1), zone);
        auto q = prepare(kBytesBetween, "computing transfers per day");
        if (!q)
            return q.error();
        q->bind(1, startMs).bind(2, endMs);
        q->step();
        if (Status s = q->status(); !s)
            return s.error();
        out.push_back({d, q->integer(0), q->integer(1), q->integer(2), q->integer(3)});
        startMs = endMs;
    }
    return out;
}

Expected<std::vector<Transfer>> Ledger::recentTransfers(int limit) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "SELECT id, at_ms, direction, purpose, bytes, duration_ms, ok, work_unit_id, detail "
        "FROM transfers ORDER BY at_ms DESC, id DESC LIMIT ?1",
        "reading recent transfers");
    if (!q)
        return q.error();
    q->bind(1, limit);
    return readRows(*q, [](const storage::Statement& r) { return readTransfer(r); });
}

Expected<std::vector<Event>> Ledger::events(const EventFilter& f) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(
        "SELECT id, at_ms, level, message FROM events WHERE level >= ?1 "
        "AND (?2 = '' OR instr(lower(message), lower(?2)) > 0) "
        "AND at_ms >= ?3 AND at_ms < ?4 ORDER BY at_ms DESC, id DESC LIMIT ?5",
        "reading events");
    if (!q)
        return q.error();
    q->bind(1, static_cast<int>(f.minLevel)).bind(2, f.text);
    q->bind(3, f.fromMs.value_or(INT64_MIN)).bind(4, f.toMs.value_or(INT64_MAX));
    q->bind(5, f.limit);
    return readRows(*q, [](const storage::Statement& r) {
        const int64_t level = std::clamp<int64_t>(r.integer(2), 0, 3);
        return Event{r.integer(0), r.integer(1), static_cast<EventLevel>(level), r.text(3)};
    });
}

Expected<std::vector<WorkUnitRow>> Ledger::workUnits(int limit, int offset) {
    std::lock_guard lock(m_mutex);
    static const std::string sql =
        std::string("SELECT w.") +
        "id, w.run, w.base_version, w.config, w.device, w.inner_steps, w.batch_size, "
        "w.seq_len, w.tokens, w.steps, w.compute_seconds, w.loss_first, w.loss_last, w.state, "
        "w.created_at_ms, w.updated_at_ms, w.trained_at_ms, "
        "r.work_unit_id, r.round_applied, r.weight, r.credit, r.received_at_ms "
        "FROM work_units w LEFT JOIN receipts r ON r.work_unit_id = w.id "
        "ORDER BY w.created_at_ms DESC, w.id DESC LIMIT ?1 OFFSET ?2";
    auto q = prepare(sql.c_str(), "listing work units");
    if (!q)
        return q.error();
    q->bind(1, limit).bind(2, offset);
    return readRows(*q, [](const storage::Statement& row) {
        WorkUnitRow r;
        r.unit = readWorkUnit(row);
        if (!row.isNull(17)) {
            Receipt receipt;
            receipt.workUnitId = row.text(17);
            receipt.roundApplied = row.integer(18);
            receipt.weight = row.real(19);
            receipt.credit = row.real(20);
            receipt.receivedAtMs = row.integer(21);
            r.receipt = std::move(receipt);
        }
        return r;
    });
}

Expected<BytesUsed> Ledger::bytesUsed(int64_t fromMs, int64_t toMs) {
    std::lock_guard lock(m_mutex);
    auto q = prepare(kBytesBetween, "computing bytes used");
    if (!q)
        return q.error();
    q->bind(1, fromMs).bind(2, toMs);
    q->step();
    if (Status s = q->status(); !s)
        return s.error();
    return BytesUsed{q->integer(0), q->integer(1)};
}

Expected<BytesUsed> Ledger::bytesUsedToday(int64_t nowMs, const TimeZone& zone) {
    const LocalDate today = toLocal(nowMs, zone).date;
    return bytesUsed(startOfLocalDay(today, zone), startOfLocalDay(today.plusDays(1), zone));
}

}  // namespace tandem::core
