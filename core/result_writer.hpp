// The end of a trained unit: its pseudo-gradient (start weights - trained weights, in the
// manifest's result encoding: fp16 from the backend, or int8 encoded on the host) into
// results/<id>.result with its header, results/<id>.json beside it, the ledger's Trained, and the
// result queued for upload (the AdamW moments stay in the backend: UnitRunner). A unit of a
// sharded run (protocol v6, manifest "shards") is written in pieces: results/<id>.<k>.piece, the
// body of each piece's upload (header of format version 2, piece table, piece k's payload), then
// results/<id>.result holding the header and the table, then results/<id>.json naming the shards.
// Internal to core/.
#pragma once

#include "backend.hpp"
#include "engine_shared.hpp"
#include "result_format.hpp"
#include "unit_files.hpp"

#include <vector>

namespace tandem::core {

class ResultWriter {
  public:
    explicit ResultWriter(EngineShared& shared) : m_shared(shared) {}

    // Engine thread. backend holds the trained weights and moments; start the weights the unit
    // started from (P). On success the unit's directory is gone and the result is queued; an
    // error says why the unit failed (the caller fails it; nothing is sent).
    // stoppedBy: why a unit stopped before its last step ("paused", "snoozed", "quitting"): its
    // result is a partial one (fewer steps, weighted by its tokens); null for a finished unit.
    Status write(const ActiveUnit& unit, Backend& backend, const std::vector<float>& start,
                 const char* stoppedBy = nullptr);

  private:
    // The whole result (header h, with saturated and the digest filled in, then the payload).
    static Expected<std::vector<uint8_t>> encodePayload(net::ResultHeader& h, Backend& backend,
                                                        const std::vector<float>& start);

    // The piece files of a sharded run's result from the whole body (header + payload); the
    // head (header and table) for results/<id>.result. On failure no piece file is left.
    Expected<std::vector<uint8_t>> writePieces(const net::Manifest& m,
                                               std::span<const uint8_t> body, PendingResult& p);

    EngineShared& m_shared;
};

}  // namespace tandem::core
