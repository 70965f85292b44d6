// Comparing the units held here with the ones the coordinator counts as ours.
#include "reconcile.hpp"

#include "unit_end.hpp"

#include <set>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

bool hasResultFiles(const DataDir& files, int64_t id) {
    std::error_code ec;
    return fs::exists(files.resultInfoFile(id), ec) || fs::exists(files.resultFile(id), ec);
}

bool ledgerKnows(EngineShared& shared, int64_t id) {
    auto row = shared.ledger.workUnit(wuKey(id));
    return row && *row;
}

}  // namespace

ReconcileOutcome reconcileWithCoordinator(EngineShared& shared, Registrar& registrar,
                                          std::optional<ActiveUnit>& active) {
    auto held = shared.deps.api->listWork();
    shared.checkCrash();
    if (!held) {
        const ApiFailure& f = held.error();
        if (f.httpStatus == 401) {
            registrar.drop("the coordinator does not know our token");
            return ReconcileOutcome::TryLater;
        }
        if (!f.transient) {
            shared.log(EventLevel::Warning,
                       "the coordinator cannot list our work units (" + f.message +
                           "); units lost in a crash wait for its heartbeat timeout");
            return ReconcileOutcome::Done;
        }
        shared.log(EventLevel::Warning,
                   "cannot compare our work units with the coordinator's yet: " + f.message);
        return ReconcileOutcome::TryLater;
    }
    const auto pendingRequest = readUnitRequest(shared.files);
    const std::optional<std::string> requestId =
        pendingRequest ? *pendingRequest : std::optional<std::string>();
    std::set<int64_t> listed;
    for (const auto& u : *held) {
        listed.insert(u.workUnitId);
        const std::string key = wuKey(u.workUnitId);
        const bool ofPendingRequest = requestId && u.requestId == *requestId;
        const bool recorded = ledgerKnows(shared, u.workUnitId);
        if (ofPendingRequest && recorded)
            removeUnitRequest(shared.files);  // its answer was recorded after all
        if (active && active->manifest.workUnitId == u.workUnitId)
            continue;
        if (hasResultFiles(shared.files, u.workUnitId))
            continue;  // its result uploads
        if (ofPendingRequest && !recorded) {
            shared.log(EventLevel::Info, "work unit " + key +
                                             " was assigned to a request whose answer was cut "
                                             "off; asking for it again");
            continue;
        }
        auto released = shared.deps.api->releaseWork(u.workUnitId);
        shared.checkCrash();
        if (!released && released.error().httpStatus != 404 && released.error().httpStatus != 409) {
            shared.log(EventLevel::Warning,
                       "cannot release work unit " + key +
                           " that nothing here can resume: " + released.error().message);
            if (released.error().transient)
                return ReconcileOutcome::TryLater;
            continue;
        }
        shared.log(EventLevel::Info,
                   "work unit " + key +
                       ": the coordinator held it for us, but nothing here can resume it; " +
                       (released ? std::string("released it")
                                 : "it was not held any more (" + released.error().message + ")"));
    }
    if (active && !listed.count(active->manifest.workUnitId)) {
        const int64_t id = active->manifest.workUnitId;
        shared.transition(id, WorkUnitState::Abandoned, unitEndCode(UnitEndReason::NotHeld));
        shared.log(EventLevel::Warning,
                   "work unit " + wuKey(id) +
                       ": the coordinator no longer holds it (abandoned or timed out); dropped "
                       "its progress at step " +
                       std::to_string(active->step) + " of " +
                       std::to_string(active->manifest.innerSteps));
        std::error_code ec;
        fs::remove_all(active->dir, ec);
        active.reset();
    }
    return ReconcileOutcome::Done;
}

}  // namespace tandem::core
