// One try at the result at the front of the upload queue (its runner): the upload cap, then
// (before the first upload) a heartbeat asking whether the coordinator still wants the result,
// the upload, the receipt's checks (signed by the pinned key, for this unit and this result's
// digest), and settling: the receipt into the ledger, or the unit Rejected or Abandoned. A
// transient failure is retried with the engine's backoff. Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "registration.hpp"
#include "rule_gate.hpp"
#include "upload_queue.hpp"

namespace tandem::core {

class ResultUploader {
  public:
    ResultUploader(EngineShared& shared, RuleGate& gate, const Registrar& registrar)
        : m_shared(shared), m_gate(gate), m_registrar(registrar) {}

    // On the upload queue's thread.
    UploadQueue::Verdict run(const PendingResult& result);

  private:
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
};

}  // namespace tandem::core
