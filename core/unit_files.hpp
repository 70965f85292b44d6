// The engine's data directory: where each file lives (DataDir; the whole layout is in
// engine.hpp) and the formats of the files of a work unit: work/<id>/progress.json,
// results/<id>.result + <id>.json and the AdamW moments kept across units (optimizer.ckpt/json).
// Readers return an error naming the file for a missing, truncated or damaged one; they never
// throw. Internal to core/.
#pragma once

#include "checkpoint.hpp"
#include "crypto.hpp"
#include "engine.hpp"
#include "expected.hpp"
#include "protocol.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tandem::core {

// A work unit's id as the ledger and the file names spell it.
std::string wuKey(int64_t id);

class DataDir {
  public:
    explicit DataDir(std::filesystem::path root) : m_root(std::move(root)) {}

    const std::filesystem::path& root() const { return m_root; }
    std::filesystem::path registrationFile() const { return m_root / "registration.json"; }
    std::filesystem::path resultsDir() const { return m_root / "results"; }
    std::filesystem::path resultFile(int64_t workUnitId) const {
        return resultsDir() / (wuKey(workUnitId) + ".result");
    }
    std::filesystem::path resultInfoFile(int64_t workUnitId) const {
        return resultsDir() / (wuKey(workUnitId) + ".json");
    }
    // Piece `shard` of a result uploaded in pieces (protocol v6): the body of its upload.
    std::filesystem::path pieceFile(int64_t workUnitId, int shard) const {
        return resultsDir() / (wuKey(workUnitId) + "." + std::to_string(shard) + ".piece");
    }
    std::filesystem::path workDir() const { return m_root / "work"; }
    std::filesystem::path unitDir(int64_t workUnitId) const {
        return workDir() / wuKey(workUnitId);
    }
    std::filesystem::path cacheDir() const { return m_root / "cache"; }
    std::filesystem::path weightsFile(const net::Manifest& m) const {
        return cacheDir() / (net::toHex(m.weightsSha256) + ".weights");
    }
    std::filesystem::path dataFile(const net::Manifest& m) const {
        return cacheDir() / (net::toHex(m.dataSha256) + ".data");
    }
    // The weights kept to rebuild the next version from deltas (held_weights.hpp).
    std::filesystem::path heldWeightsFile() const { return m_root / "held_weights.json"; }
    // The request id of the work request in flight, written before the request is sent.
    std::filesystem::path unitRequestFile() const { return m_root / "work_request.json"; }
    // The donor's pause or snooze (hold_file.hpp).
    std::filesystem::path holdFile() const { return m_root / "hold.json"; }
    std::filesystem::path optimizerFile() const { return m_root / "optimizer.ckpt"; }
    std::filesystem::path optimizerInfoFile() const { return m_root / "optimizer.json"; }

    // Within a unit's directory.
    static std::filesystem::path manifestFile(const std::filesystem::path& unitDir) {
        return unitDir / "manifest.json";
    }
    static std::filesystem::path progressFile(const std::filesystem::path& unitDir) {
        return unitDir / "progress.json";
    }
    static std::string checkpointName(int64_t step) {
        return "ckpt-" + std::to_string(step) + ".ckpt";
    }
    static bool isCheckpointName(const std::string& fileName) {
        return fileName.rfind("ckpt-", 0) == 0;
    }

  private:
    std::filesystem::path m_root;
};

Status writeTextAtomically(const std::filesystem::path& path, const std::string& text);
Expected<std::string> readText(const std::filesystem::path& path);
// The file's JSON object; an error when it is missing or is not one (truncated, damaged).
Expected<nlohmann::json> readJson(const std::filesystem::path& path);
bool fileHasDigest(const std::filesystem::path& path, const net::Sha256Digest& digest);

// work/<id>/progress.json: how far a unit has trained, and the checkpoint that holds its weights
// and moments at that step.
struct UnitProgress {
    int64_t step = 0;
    uint64_t samplerState = 0;
    std::optional<float> lossFirst, lossLast;
    double lossSum = 0;
    int64_t tokens = 0;
    double computeSeconds = 0;
    std::string checkpointFile;  // within the unit's directory; empty: from the start weights

    bool operator==(const UnitProgress&) const = default;
};
Status writeProgress(const std::filesystem::path& path, const UnitProgress& progress);
Expected<UnitProgress> readProgress(const std::filesystem::path& path);

// The unit in training: its signed manifest, its directory and its progress.
struct ActiveUnit : UnitProgress {
    net::Manifest manifest;
    std::filesystem::path dir;
    bool downloaded = false;

    // Starts the unit over from its start weights.
    void restart() { static_cast<UnitProgress&>(*this) = UnitProgress{}; }
};

// The unit as the snapshot shows it.
CurrentWorkUnit currentInfo(const ActiveUnit& unit);

// results/<id>.json, beside the result file: where the result goes.
struct ResultInfo {
    int64_t workUnitId = 0;
    std::string uploadUrl;
    int64_t runId = 0;
    int64_t baseVersion = 0;
    // A result of a sharded run (protocol v6): where each piece goes, as the signed manifest
    // said. Empty: a whole result to uploadUrl.
    std::vector<net::ShardUpload> shards;

    bool operator==(const ResultInfo&) const = default;
};
Status writeResultInfo(const std::filesystem::path& path, const ResultInfo& info);
Expected<ResultInfo> readResultInfo(const std::filesystem::path& path);

// One piece of a result uploaded in pieces: its shard, where it goes, its body on disk.
struct PendingPiece {
    int shard = 0;
    std::string uploadUrl;
    std::filesystem::path file;  // results/<id>.<shard>.piece: header, piece table, its payload
    int64_t bytes = 0;
    bool operator==(const PendingPiece&) const = default;
};

// A finished result on disk, waiting for its receipt. A result of a sharded run (protocol v6)
// has pieces: then `file` holds the 128-byte header (format version 2) and the piece table, each
// piece's body is its own file, and bytes is the pieces' sum.
struct PendingResult {
    int64_t workUnitId = 0;
    std::string uploadUrl;
    std::filesystem::path file;
    std::filesystem::path infoFile;
    int64_t bytes = 0;
    net::Sha256Digest digest{};
    net::Signature signature{};
    int64_t steps = 0;
    float lossLast = 0;
    int64_t heartbeatMs = 15000;       // the manifest's heartbeat period (recovered: the default)
    bool stillWantedChecked = false;   // asked the coordinator before the first upload
    std::vector<PendingPiece> pieces;  // empty: a whole result
};

// Reads results/<id>.json and its result file, checks the file (header, payload digest, size)
// and signs its digest with key. A pieced result: the header (version 2) and the piece table
// (the header's digest, the shards' ranges) and every piece file (size, the same header and
// table, its payload's digest in the table).
Expected<PendingResult> loadPendingResult(const DataDir& files,
                                          const std::filesystem::path& infoFile,
                                          const net::SigningKey& key);
// Removes results/<id>.json first, then the pieces and the .result (not when the .json stays): a
// kill in between leaves a .result or pieces without the .json, which recovery removes quietly
// (a .json alone would look like a lost result).
void removePendingResult(const PendingResult& result);
void removeResultFiles(const DataDir& files, int64_t workUnitId);

// work_request.json: the request id (net::isRequestId) of a work request whose answer is not
// recorded yet. The id is stored (written atomically) before POST /v1/work is sent and removed
// once the unit it brought is in the ledger, so a worker killed in between asks again with the
// same id and gets the same unit back. None when there is no file; an error when it is damaged.
Expected<std::optional<std::string>> readUnitRequest(const DataDir& files);
Status writeUnitRequest(const DataDir& files, const std::string& requestId);
void removeUnitRequest(const DataDir& files);

// The AdamW moments at the end of a unit, for the next unit of the same run, model and device.
Status saveMoments(const DataDir& files, const net::Manifest& m, const std::string& device,
                   const Checkpoint& checkpoint);
// The kept moments when they belong to m's run and model and to this device.
std::optional<OptimizerState> carriedMoments(const DataDir& files, const net::Manifest& m,
                                             const std::string& device);

}  // namespace tandem::core
