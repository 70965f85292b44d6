#include "run_export.hpp"

#include "checkpoint.hpp"
#include "file_io.hpp"
#include "run_data.hpp"
#include "state_store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace tandem::coord {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<StoredRun> readStoredRun(const fs::path& stateDir, std::optional<int64_t> runId,
                                  const std::string& databaseUrl) {
    const fs::path dbPath = stateDir / "coordinator.db";
    std::error_code ec;
    if (databaseUrl.empty() && !fs::exists(dbPath, ec))
        return makeError(stateDir.string() + " holds no coordinator database (" +
                         dbPath.filename().string() + "); give the --state-dir of a run");
    auto db = openStateStore(stateDir, databaseUrl);
    if (!db)
        return db.error();
    auto q = db->prepare("SELECT id, config_json, version FROM runs ORDER BY id");
    if (!q)
        return q.error();
    std::vector<int64_t> ids;
    std::optional<StoredRun> found;
    while (q->step()) {
        ids.push_back(q->integer(0));
        if (found || (runId && *runId != q->integer(0)))
            continue;
        auto settings = runSettingsFromJson(q->text(1));
        if (!settings)
            return settings.error();
        found = StoredRun{q->integer(0), *settings, q->integer(2), {}};
    }
    if (auto st = q->status(); !st)
        return st.error();
    if (!found) {
        std::string known;
        for (int64_t id : ids)
            known += (known.empty() ? "" : ", ") + std::to_string(id);
        return makeError("run " + (runId ? std::to_string(*runId) : std::string("?")) +
                         " does not exist in " + stateDir.string() +
                         (known.empty() ? " (it holds no run)" : " (it holds run " + known + ")"));
    }
    for (auto& e : fs::directory_iterator(stateDir / "weights", ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() > 6 && name[0] == 'v' && name.ends_with(".ckpt"))
            found->keptVersions.push_back(std::atoll(name.c_str() + 1));
    }
    std::sort(found->keptVersions.begin(), found->keptVersions.end());
    return *found;
}

Expected<std::vector<float>> readRunWeights(const fs::path& stateDir, const StoredRun& run,
                                            int64_t version) {
    const auto& kept = run.keptVersions;
    if (std::find(kept.begin(), kept.end(), version) == kept.end()) {
        std::string list;
        for (int64_t v : kept)
            list += (list.empty() ? "" : ", ") + std::to_string(v);
        return makeError("version " + std::to_string(version) + " of run " +
                         std::to_string(run.id) +
                         " is not kept (versions on disk: " + (list.empty() ? "none" : list) + ")");
    }
    const fs::path weights = stateDir / "weights" / ("v" + std::to_string(version) + ".ckpt");
    auto ck = loadCheckpoint(weights, run.settings.model);
    if (!ck)
        return makeError("weights of version " + std::to_string(version) + ": " +
                         ck.error().message);
    return std::move(ck->parameters);
}

Expected<ExportRecord> exportRun(const ExportRequest& r, const std::string& databaseUrl) {
    auto run = readStoredRun(r.stateDir, r.runId, databaseUrl);
    if (!run)
        return run.error();
    const int64_t version = r.version.value_or(run->version);
    auto weights = readRunWeights(r.stateDir, *run, version);
    if (!weights)
        return weights.error();
    ExportOptions options;
    options.format = r.format;
    options.outDir = r.out;
    options.tokenizer = r.tokenizer ? r.tokenizer : runTokenizerFile(r.stateDir, run->settings);
    const ParameterLayout layout(run->settings.model);
    if (auto st = exportModel(layout, *weights, options); !st)
        return st.error();
    std::error_code ec;
    ExportRecord record;
    record.path = fs::absolute(r.out, ec).lexically_normal().string();
    record.format = modelFormatName(r.format);
    record.runId = run->id;
    record.version = version;
    record.exportedUnix = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    const std::string text = json{
        {"path", record.path},
        {"format", record.format},
        {"run_id", record.runId},
        {"version", record.version},
        {"exported_unix",
         record.exportedUnix}}.dump();
    if (auto st = writeFileAtomically(
            latestExportFile(r.stateDir),
            std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
        !st)
        return makeError("the export is complete in " + record.path +
                         ", but its record was not written: " + st.error().message);
    return record;
}

fs::path latestExportFile(const fs::path& stateDir) {
    return stateDir / "latest_export.json";
}

std::optional<ExportRecord> readLatestExport(const fs::path& stateDir) {
    auto bytes = readFile(latestExportFile(stateDir));
    if (!bytes)
        return std::nullopt;
    json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (!j.is_object() || !j.contains("path") || !j["path"].is_string())
        return std::nullopt;
    ExportRecord r;
    r.path = j["path"].get<std::string>();
    r.format = j.value("format", std::string());
    r.runId = j.value("run_id", int64_t{0});
    r.version = j.value("version", int64_t{0});
    r.exportedUnix = j.value("exported_unix", int64_t{0});
    return r;
}

}  // namespace tandem::coord
