// Weights rebuilt from exact quantized weight deltas (issue 15, docs/architecture.md "Weight
// deltas"): a worker that holds the weights file of an earlier version of the run downloads the
// deltas the manifest lists from that version to the unit's base version, applies them with
// kernels/weight_delta_file.hpp (the coordinator's own elementwise code) and keeps the result
// only when its SHA-256 is the manifest's. The downloads go through a callback, so the engine
// (core::CoordinatorApi, recording each transfer) and tandem-bench-egress (net::CoordinatorClient)
// share this one path.
#pragma once

#include "expected.hpp"
#include "protocol.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

namespace tandem::core {

// The deltas from heldVersion to m.baseVersion in order (fromVersion heldVersion, heldVersion + 1,
// ..., baseVersion - 1), when the manifest lists each of them; none otherwise (nothing to do
// when heldVersion == baseVersion, too old, newer than the base version, a gap).
std::optional<std::vector<net::WeightDeltaRef>> weightDeltaChain(const net::Manifest& m,
                                                                 int64_t heldVersion);
// The bytes a chain downloads (what a worker compares with Manifest::weightsBytes).
int64_t weightDeltaChainBytes(const std::vector<net::WeightDeltaRef>& chain);

// Downloads one delta to destination; the bytes moved over the network, or why it failed. The
// caller's callback records the transfer (a failed one too).
using WeightDeltaDownload = std::function<Expected<int64_t>(
    const net::WeightDeltaRef& delta, const std::filesystem::path& destination)>;

struct WeightRebuild {
    int deltas = 0;
    int64_t bytesDownloaded = 0;  // by the successful downloads
};

// Rebuilds m's weights (version m.baseVersion) from heldWeights (a weights file of heldVersion)
// and chain (weightDeltaChain), downloading each delta into scratchDir (removed after), checking
// each against its SHA-256, format and versions, and the rebuilt file against
// m.weightsSha256. Only then does destination appear (written atomically); heldWeights is never
// changed. Every error says which step failed (a download, a mismatch, a damaged file).
Expected<WeightRebuild> rebuildWeightsFromDeltas(
    const net::Manifest& m, const std::filesystem::path& heldWeights, int64_t heldVersion,
    const std::vector<net::WeightDeltaRef>& chain, const std::filesystem::path& scratchDir,
    const WeightDeltaDownload& download, const std::filesystem::path& destination);

}  // namespace tandem::core
