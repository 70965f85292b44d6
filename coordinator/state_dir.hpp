// The coordinator's state directory (layout in README.md): its folders, the lock that keeps one
// coordinator per directory, the paths of every file in it, publishing a version's weights and
// momentum, and removing what no round needs any more. No database.
//
// Dimensions: P parameters.
#pragma once

#include "blob_store.hpp"
#include "coordinator.hpp"
#include "weight_delta.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>

namespace tandem::coord {

// Weight deltas listed in a manifest: a worker up to this many versions behind its unit's base
// version rebuilds the weights from a chain of deltas. The coordinator keeps the deltas to the
// last kKeptWeightDeltas + maxStaleness versions, so that a live unit's manifest (based on a
// version up to maxStaleness old) names only blobs that are there.
inline constexpr int kKeptWeightDeltas = 4;

class StateDir {
  public:
    // Creates the folders and takes the directory's lock (the kernel drops it when the process
    // dies); fails while another process holds it.
    static Expected<StateDir> open(const std::filesystem::path& root);

    const std::filesystem::path& root() const { return m_root; }
    std::filesystem::path databaseFile() const { return m_root / "coordinator.db"; }
    std::filesystem::path keyFile() const { return m_root / "coordinator_key.pem"; }
    std::filesystem::path trainShard() const { return m_root / "data" / "shard-0.bin"; }
    std::filesystem::path validationText() const { return m_root / "data" / "validation.bin"; }
    // The tokenizer of a run created with --tokenizer (a copy of the operator's SentencePiece
    // model or llm.c tokenizer file); the static form for readers that take no lock.
    std::filesystem::path tokenizerModel() const { return tokenizerModelIn(m_root); }
    static std::filesystem::path tokenizerModelIn(const std::filesystem::path& root) {
        return root / "data" / "tokenizer.model";
    }
    std::filesystem::path uploads() const { return m_root / "uploads"; }
    // Content-addressed copies of the weights and train shards (blob_store.hpp).
    BlobStore blobs() const { return BlobStore(m_root / "blobs" / "sha256"); }
    std::filesystem::path weights(int64_t version) const;
    std::filesystem::path momentum(int64_t version) const;
    // The error-feedback residual of a run with weight deltas (kernels/weight_delta.hpp).
    std::filesystem::path residual(int64_t version) const;
    // The weight delta from version - 1 to version (kernels/weight_delta_file.hpp).
    std::filesystem::path weightDelta(int64_t version) const;
    // A shard's parts of a version (part_file.hpp): its range of the weights (a blob) and of
    // the momentum.
    std::filesystem::path weightsPart(int64_t version) const;
    std::filesystem::path momentumPart(int64_t version) const;
    std::filesystem::path round(int64_t number) const;  // accepted payloads of an open round
    std::filesystem::path payload(int64_t roundNumber, int64_t workUnitId) const;
    // Results held until their twin's result arrives (replication.hpp).
    std::filesystem::path held() const { return m_root / "held"; }
    std::filesystem::path heldPayload(int64_t workUnitId) const {
        return held() / (std::to_string(workUnitId) + ".f16");
    }

    // Writes weights/v<version>.ckpt, momentum/v<version>.ckpt and, when given,
    // residual/v<version>.ckpt (each atomically) and publishes the weights as a blob; returns
    // the weights file as served to workers. All of it is on disk before the caller commits the
    // version, so a kill -9 leaves either the old version's files in use or the new one's.
    // parameters, velocity: (P) for `model`; residual: (P) or empty.
    Expected<ServedFile> publish(int64_t version, const ModelConfig& model,
                                 std::span<const float> parameters, std::span<const float> velocity,
                                 std::span<const float> residual = {}) const;

    // Writes weights/v<version>.ckpt alone (a sharded run's weights, assembled from its parts)
    // and publishes it as a blob.
    Expected<ServedFile> publishWeights(int64_t version, const ModelConfig& model,
                                        std::span<const float> parameters) const;

    // Writes deltas/v<toVersion>.wdlt (atomically, before the caller commits the version) and
    // publishes it as a blob; returns the file as served to workers.
    Expected<ServedFile> publishWeightDelta(int64_t toVersion, const QuantizedDelta& delta) const;

    // With round `version` open: removes the payloads of other rounds and those of this round not
    // in keepPayloads ("<work unit>.f16"), weights older than version - maxStaleness - 1,
    // momentum and residuals other than this version's, weight deltas to versions before
    // version - kKeptWeightDeltas - maxStaleness + 1, and temporary files; at startup also every
    // staging file of an upload (while running they belong to live uploads).
    // A sharded run (openRound > version: the shard stepped its range of round `version`, whose
    // next version is not committed yet): the payloads of openRound are kept instead, and the
    // weights of version + 1; parts of versions before version - maxStaleness are removed.
    void removeStale(int64_t version, int maxStaleness, const std::set<std::string>& keepPayloads,
                     bool startup, int64_t openRound = -1) const;

  private:
    StateDir(std::filesystem::path root, std::shared_ptr<int> lock);
    std::filesystem::path m_root;
    std::shared_ptr<int> m_lock;  // the open descriptor holding the flock
};

// fsync of a file or a directory.
Status fsyncPath(const std::filesystem::path& path, bool directory);

}  // namespace tandem::coord
