// One try at the result at the front of the upload queue (its runner): the upload cap, then
// (before the first upload) a heartbeat asking whether the coordinator still wants the result,
// the upload, the receipt's checks (signed by the pinned key, for this unit and this result's
// digest), and settling: the receipt into the ledger, or the unit Rejected or Abandoned. A
// transient failure is retried with the engine's backoff.
//
// A result of a sharded run (protocol v6) goes in pieces: every piece not settled yet and due is
// sent at once, one thread each, to its shard's URL; each piece has its own backoff. A piece is
// settled by a receipt that names its shard (recorded in the ledger's result_pieces at once, so
// a restart sends only the others) or by a final refusal. Once every piece is settled, the
// result is: Accepted with the first accepted piece's receipt (the credit counted once) when
// any piece was accepted, else Rejected. Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "registration.hpp"
#include "rule_gate.hpp"
#include "upload_queue.hpp"

#include <map>
#include <vector>

namespace tandem::core {

class ResultUploader {
  public:
    ResultUploader(EngineShared& shared, RuleGate& gate, const Registrar& registrar)
        : m_shared(shared), m_gate(gate), m_registrar(registrar) {}

    // On the upload queue's thread.
    UploadQueue::Verdict run(const PendingResult& result);

  private:
    // The pieces of a sharded run's result (after the cap and the still-wanted question).
    UploadQueue::Verdict runPieces(const PendingResult& result);
    // Every piece is settled (the ledger's result_pieces): settles the result.
    void settlePieces(const PendingResult& result, const std::vector<PieceOutcome>& outcomes);

    // outcome: the coordinator's answer, for Accepted. Leaves the result queued (the upload is
    // idempotent) when its receipt cannot be stored.
    // detail: what the log says; ledgerDetail, when given, what the ledger and the snapshot keep
    // instead (a code of unit_end.hpp).
    void settle(const PendingResult& result, WorkUnitState state, const std::string& detail,
                const UploadOutcome* outcome, const std::string& ledgerDetail = {});

    EngineShared& m_shared;
    RuleGate& m_gate;
    const Registrar& m_registrar;
    int m_attempt = 0;  // transient failures in a row
    // Pieces: per work unit, per shard, transient failures in a row and when to try again
    // (upload thread only; not kept across a restart, where every unsettled piece is due).
    struct PieceRetry {
        int attempt = 0;
        int64_t atMs = 0;
    };
    std::map<int64_t, std::vector<PieceRetry>> m_pieceRetry;
    // The earliest retry of the unit's pieces not settled (INT64_MAX: none).
    int64_t earliestRetry(int64_t workUnitId, const std::vector<bool>& settled);
};

}  // namespace tandem::core
