// The files of the engine's data directory and the types read from them. Internal to core/.
#pragma once

#include "expected.hpp"
#include "protocol.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tandem::core {

Status writeTextAtomically(const std::filesystem::path& path, const std::string& text);
Expected<std::string> readText(const std::filesystem::path& path);
Expected<nlohmann::json> readJson(const std::filesystem::path& path);
bool fileHasDigest(const std::filesystem::path& path, const net::Sha256Digest& digest);
std::string wuKey(int64_t id);

struct Registration {
    std::string coordinatorUrl;
    int64_t clientId = 0;
    std::string token;
    net::PublicKey coordinatorKey{};
};

// A finished result on disk, waiting for its receipt.
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
    bool stillWantedChecked = false;  // asked the coordinator before the first upload
};

// The unit in training.
struct ActiveUnit {
    net::Manifest manifest;
    std::filesystem::path dir;
    bool downloaded = false;
    int64_t step = 0;
    uint64_t samplerState = 0;
    std::optional<float> lossFirst, lossLast;
    double lossSum = 0;
    int64_t tokens = 0;
    double computeSeconds = 0;
    std::string checkpointFile;  // within dir; empty: start from the downloaded weights
};

enum class TrainOutcome { Finished, Interrupted, Abandoned, Failed, Retry };

}  // namespace tandem::core
