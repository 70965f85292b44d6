// held_weights.json: the weights file the worker last trained from, kept for the next unit of
// the same run, which may rebuild its weights from it and the manifest's weight deltas
// (core/weight_rebuild.hpp) instead of downloading the whole file. One at a time: the file is the
// cache's copy (cache/<sha256>.weights), kept by the cache's clean-up while it is held, and let
// go when a unit of another run (or model) comes. Internal to core/.
#pragma once

#include "protocol.hpp"
#include "unit_files.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tandem::core {

struct HeldWeights {
    int64_t runId = 0;
    int64_t version = 0;
    std::string model;  // ModelConfig::describe()
    net::Sha256Digest sha256{};

    // The weights file in cache/.
    std::filesystem::path file(const DataDir& files) const;
    // Weights of m's run and model (of any version).
    bool sameRun(const net::Manifest& m) const;
    bool operator==(const HeldWeights&) const = default;
};

// The held weights; none when there is no record, it is damaged (a damaged record is removed)
// or its file is gone.
std::optional<HeldWeights> readHeldWeights(const DataDir& files);
Status writeHeldWeights(const DataDir& files, const HeldWeights& held);
// The record and its file.
void removeHeldWeights(const DataDir& files, const HeldWeights& held);

// The weights of m, once they are in cache/: held from now on unless the weights held are of
// the same run and a newer version (a stale unit's older base version). The file of the weights
// held before is removed unless it is `keep` (the unit in training's weights).
void holdWeights(const DataDir& files, const net::Manifest& m, const std::filesystem::path& keep);

}  // namespace tandem::core
