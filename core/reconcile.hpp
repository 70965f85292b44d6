// After a restart, the worker and the coordinator compare the work units they hold (GET
// /v1/work): a unit the coordinator counts as ours that nothing here can resume or upload is
// released (DELETE /v1/work/{id}), so that it neither blocks new work (409 too_many_work_units)
// nor waits out the heartbeat timeout; the unit in work/ that the coordinator no longer holds is
// dropped with a log line. Results waiting for their receipt are never dropped here: the upload
// answers for them (the receipt again, or the coordinator's refusal). The unit of a request whose
// answer was cut off (its id in work_request.json) is kept: the next request gets it back.
// Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "registration.hpp"

#include <optional>

namespace tandem::core {

enum class ReconcileOutcome {
    Done,      // compared (or this coordinator cannot list units): not again this session
    TryLater,  // the list or a release failed for now
};

// Engine thread, registered, after recoverDataDir. active: the unit to resume, reset when the
// coordinator no longer holds it.
ReconcileOutcome reconcileWithCoordinator(EngineShared& shared, Registrar& registrar,
                                          std::optional<ActiveUnit>& active);

}  // namespace tandem::core
