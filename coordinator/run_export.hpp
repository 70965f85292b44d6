// Exporting a run's weights from the coordinator's state directory (`tandem-coordinator export`)
// and the record of the latest export that `tandem-coordinator status` and GET /v1/status show.
// Works beside a running coordinator: it reads the database and a kept weights file and writes
// only the export and <state-dir>/latest_export.json.
#pragma once

#include "model_files.hpp"
#include "run_setup.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tandem::coord {

// The run as the state directory holds it.
struct StoredRun {
    int64_t id = 0;
    RunSettings settings;
    int64_t version = 0;                // the open round = the newest weights
    std::vector<int64_t> keptVersions;  // weights files on disk, oldest first
};

// The run `runId` (or the directory's only run); refuses a directory without a database.
// databaseUrl: the run state's PostgreSQL database (state_store.hpp); empty: coordinator.db.
Expected<StoredRun> readStoredRun(const std::filesystem::path& stateDir,
                                  std::optional<int64_t> runId = std::nullopt,
                                  const std::string& databaseUrl = {});

// The weights (P) of a kept version of a stored run; a version no longer on disk is refused,
// naming the kept ones.
Expected<std::vector<float>> readRunWeights(const std::filesystem::path& stateDir,
                                            const StoredRun& run, int64_t version);

struct ExportRequest {
    std::filesystem::path stateDir;
    int64_t runId = 0;
    std::optional<int64_t> version;  // default: the newest
    ModelFormat format = ModelFormat::Safetensors;
    std::filesystem::path out;  // a folder that does not exist yet
    // Copied beside the weights; default: the run's tokenizer file, when it has one.
    std::optional<std::filesystem::path> tokenizer;
};

struct ExportRecord {
    std::string path;  // absolute
    std::string format;
    int64_t runId = 0;
    int64_t version = 0;
    int64_t exportedUnix = 0;
};

// Writes the export (atomically: all of it or nothing) and then the record.
// databaseUrl: the run state's PostgreSQL database (state_store.hpp); empty: coordinator.db.
Expected<ExportRecord> exportRun(const ExportRequest& request, const std::string& databaseUrl = {});

std::filesystem::path latestExportFile(const std::filesystem::path& stateDir);
// Empty when no export was made (or the record cannot be read).
std::optional<ExportRecord> readLatestExport(const std::filesystem::path& stateDir);

}  // namespace tandem::coord
