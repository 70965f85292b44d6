#include "metrics.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::coord {

namespace {

// Writes one metric family after another in the text exposition format.
class Exposition {
  public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        m_out.append("# HELP ").append(name).append(" ").append(help).append("\n");
        m_out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    }
    void sample(std::string_view name, double value, std::string_view labels = {}) {
        m_out.append(name);
        if (!labels.empty())
            m_out.append("{").append(labels).append("}");
        m_out.append(" ").append(number(value)).append("\n");
    }
    // One family with a single unlabelled sample.
    void single(std::string_view name, std::string_view type, std::string_view help, double value) {
        family(name, type, help);
        sample(name, value);
    }
    std::string take() { return std::move(m_out); }

    static std::string label(std::string_view key, std::string_view value) {
        std::string out(key);
        out += "=\"";
        for (char c : value) {
            if (c == '\\' || c == '"')
                out += '\\';
            if (c == '\n')
                out += "\\n";
            else
                out += c;
        }
        return out + "\"";
    }

  private:
    static std::string number(double v) {
        if (std::isnan(v))
            return "NaN";
        if (std::isinf(v))
            return v > 0 ? "+Inf" : "-Inf";
        if (v == std::floor(v) && std::fabs(v) < 9e15)
            return std::to_string(static_cast<int64_t>(v));
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.15g", v);
        return buf;
    }
    std::string m_out;
};

// The process's own figures, under the names every Prometheus client library uses.
void processFigures(Exposition& e) {
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    std::ifstream statm("/proc/self/statm");
    double sizePages = 0, residentPages = 0;
    if (statm >> sizePages >> residentPages) {
        e.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                 residentPages * page);
        e.single("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                 sizePages * page);
    }
    std::ifstream statFile("/proc/self/stat");
    std::string stat;
    std::getline(statFile, stat);
    // Fields after the command name (which may hold spaces): state is field 3.
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && tick > 0) {
        std::istringstream in(stat.substr(close + 2));
        std::string field;
        double utime = 0, stime = 0, start = 0;
        for (int i = 3; in >> field; ++i) {
            if (i == 14)
                utime = std::stod(field);
            else if (i == 15)
                stime = std::stod(field);
            else if (i == 22) {
                start = std::stod(field);
                break;
            }
        }
        e.single("process_cpu_seconds_total", "counter",
                 "Total user and system CPU time spent in seconds.", (utime + stime) / tick);
        std::ifstream boot("/proc/stat");
        std::string key;
        double btime = 0;
        while (boot >> key)
            if (key == "btime" && boot >> btime)
                break;
        if (btime > 0)
            e.single("process_start_time_seconds", "gauge",
                     "Start time of the process since unix epoch in seconds.",
                     btime + start / tick);
    }
    std::error_code ec;
    double fds = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++fds;
    if (fds > 0)
        e.single("process_open_fds", "gauge", "Number of open file descriptors.", fds);
}

}  // namespace

void Metrics::bump(Labelled& map, std::string_view label, int64_t n) {
    auto it = map.find(label);
    if (it == map.end())
        it = map.emplace(std::string(label), 0).first;
    it->second += n;
}

void Metrics::countAccepted(int64_t tokens) {
    ++m_accepted;
    m_acceptedTokens += tokens;
}

void Metrics::countRefused(std::string_view reason) {
    std::lock_guard lock(m_mu);
    bump(m_refused, reason, 1);
}

void Metrics::countAbandoned(std::string_view reason, int64_t n) {
    if (n <= 0)
        return;
    std::lock_guard lock(m_mu);
    bump(m_abandoned, reason, n);
}

void Metrics::addDownloadBytes(std::string_view kind, int64_t n) {
    std::lock_guard lock(m_mu);
    bump(m_downloadBytes, kind, n);
}

void Metrics::countResponse(int httpStatus) {
    std::lock_guard lock(m_mu);
    bump(m_responses, std::to_string(httpStatus), 1);
}

void Metrics::countRoundClosed(double seconds) {
    std::lock_guard lock(m_mu);
    ++m_closeCount;
    m_closeSum += seconds;
    for (size_t i = 0; i < kCloseBuckets.size(); ++i)
        if (seconds <= kCloseBuckets[i]) {
            ++m_closeBuckets[i];
            break;
        }
}

std::string Metrics::render(const MetricsGauges& g) const {
    Exposition e;
    e.family("tandem_run_info", "gauge", "The run this coordinator serves (always 1).");
    e.sample("tandem_run_info", 1,
             Exposition::label("run", std::to_string(g.runId)) + "," +
                 Exposition::label("model", g.model));
    e.single("tandem_model_parameters", "gauge", "Parameters of the run's model (padded).",
             static_cast<double>(g.parameters));
    e.single("tandem_model_version", "gauge", "The current weights version (the open round).",
             static_cast<double>(g.version));
    e.single("tandem_workers_active", "gauge", "Clients holding a work unit with a live heartbeat.",
             static_cast<double>(g.activeWorkers));
    e.single("tandem_work_units_in_progress", "gauge",
             "Work units assigned and not yet accepted or abandoned.",
             static_cast<double>(g.assignedUnits));
    e.single("tandem_round_results", "gauge", "Results accepted into the open round.",
             static_cast<double>(g.roundContributors));
    e.single("tandem_round_quorum", "gauge", "Results that close the open round.",
             static_cast<double>(g.roundQuorum));
    e.single("tandem_upload_slots_in_use", "gauge", "Result uploads in progress.",
             static_cast<double>(g.uploadsInFlight));
    e.single("tandem_upload_slots", "gauge", "Result uploads allowed at once (--max-uploads).",
             static_cast<double>(g.uploadSlots));
    if (g.validationLoss) {
        e.single("tandem_validation_loss", "gauge",
                 "Validation loss of the newest evaluated version.", *g.validationLoss);
        e.single("tandem_validation_loss_round", "gauge",
                 "The round whose version the validation loss belongs to.",
                 static_cast<double>(g.validationLossRound));
    }
    e.single("tandem_results_held", "gauge",
             "Results held until their twin's result arrives (replication spot-checks).",
             static_cast<double>(g.heldResults));
    e.single("tandem_clients_blocked", "gauge",
             "Clients blocked after repeated disagreements in replication spot-checks.",
             static_cast<double>(g.blockedClients));
    e.single(
        "tandem_database_bytes", "gauge",
        "Size of the run state: the SQLite database with its WAL file, or the PostgreSQL database.",
        static_cast<double>(g.databaseBytes));
    if (g.diskFreeBytes >= 0) {
        e.single("tandem_state_dir_free_bytes", "gauge",
                 "Free space on the state directory's file system.",
                 static_cast<double>(g.diskFreeBytes));
        e.single("tandem_state_dir_size_bytes", "gauge",
                 "Size of the state directory's file system.",
                 static_cast<double>(g.diskTotalBytes));
    }

    e.single("tandem_client_registrations_total", "counter", "Clients registered.",
             static_cast<double>(m_registrations.load()));
    e.single("tandem_work_units_assigned_total", "counter", "Work units handed out.",
             static_cast<double>(m_assigned.load()));
    e.single("tandem_heartbeats_total", "counter", "Progress reports (heartbeats) received.",
             static_cast<double>(m_heartbeats.load()));
    e.single("tandem_results_accepted_total", "counter", "Results accepted into a round.",
             static_cast<double>(m_accepted.load()));
    e.single("tandem_tokens_accepted_total", "counter", "Tokens trained in accepted results.",
             static_cast<double>(m_acceptedTokens.load()));
    e.single("tandem_upload_bytes_total", "counter", "Result bytes received.",
             static_cast<double>(m_uploadBytes.load()));
    e.single("tandem_results_held_total", "counter",
             "Results held for their twin's result (replication spot-checks).",
             static_cast<double>(m_held.load()));
    e.family("tandem_replica_checks_total", "counter",
             "Replication spot-checks decided, by outcome.");
    e.sample("tandem_replica_checks_total", static_cast<double>(m_twinsAgreed.load()),
             Exposition::label("outcome", "agreed"));
    e.sample("tandem_replica_checks_total", static_cast<double>(m_twinsDisagreed.load()),
             Exposition::label("outcome", "disagreed"));
    e.single("tandem_clients_blocked_total", "counter",
             "Clients blocked by replication spot-checks since the start.",
             static_cast<double>(m_blocked.load()));

    std::lock_guard lock(m_mu);
    auto labelled = [&](std::string_view name, std::string_view help, std::string_view key,
                        const Labelled& values) {
        e.family(name, "counter", help);
        for (const auto& [label, n] : values)
            e.sample(name, static_cast<double>(n), Exposition::label(key, label));
    };
    labelled("tandem_results_refused_total", "Result uploads refused, by the refusal's code.",
             "reason", m_refused);
    labelled("tandem_work_units_abandoned_total", "Work units abandoned, by cause.", "reason",
             m_abandoned);
    labelled("tandem_download_bytes_total", "Bytes of weights and data files sent.", "kind",
             m_downloadBytes);
    labelled("tandem_http_responses_total", "HTTP responses sent, by status code.", "code",
             m_responses);

    e.family("tandem_round_close_seconds", "histogram",
             "Time to close a round: the outer step and writing the new version.");
    int64_t cumulative = 0;
    for (size_t i = 0; i < kCloseBuckets.size(); ++i) {
        cumulative += m_closeBuckets[i];
        char le[32];
        std::snprintf(le, sizeof le, "%g", kCloseBuckets[i]);
        e.sample("tandem_round_close_seconds_bucket", static_cast<double>(cumulative),
                 Exposition::label("le", le));
    }
    e.sample("tandem_round_close_seconds_bucket", static_cast<double>(m_closeCount),
             Exposition::label("le", "+Inf"));
    e.sample("tandem_round_close_seconds_sum", m_closeSum);
    e.sample("tandem_round_close_seconds_count", static_cast<double>(m_closeCount));
    e.single("tandem_rounds_closed_total", "counter", "Rounds closed.",
             static_cast<double>(m_closeCount));

    processFigures(e);
    return e.take();
}

}  // namespace tandem::coord
