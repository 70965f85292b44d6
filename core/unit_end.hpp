// Why a work unit ended without counting, as stable codes: the ledger stores the code as the
// transition's detail (the coordinator's own words go to the event log), and the UI turns the
// code into plain, translated words. core/ holds no sentence a donor reads.
#pragma once

#include "coordinator_api.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace tandem::core {

enum class UnitEndReason {
    HeldTooLong,      // paused, asleep or offline longer than the coordinator keeps a unit
    RunMovedOn,       // the run moved past the staleness bound while the unit waited
    Stalled,          // the coordinator saw heartbeats without progress for too long
    Released,         // given back by this worker: it could neither resume nor upload it, or it was
                      // fetched ahead and the worker paused before starting it
    NotHeld,          // the coordinator no longer held it (found at start)
    AlreadyAccepted,  // its result had been accepted already
    Other,            // any other reason (its words are in the log)
};

// "held_too_long", "run_moved_on", "stalled", "released", "not_held", "already_accepted",
// "other": what the ledger stores.
const char* unitEndCode(UnitEndReason reason);
// The reason of a stored code; none for other text (rows from before the codes, local errors).
std::optional<UnitEndReason> unitEndReasonFromCode(std::string_view code);
// The coordinator's reason for abandoning a unit (a heartbeat's answer, docs/protocol.md) as a
// code: its wording names the cause ("no heartbeat for 181 s", "its deadline passed", "the run
// is at version 3 ...", "heartbeats without progress ...", "released by its client", "... was
// already accepted").
UnitEndReason classifyAbandonReason(std::string_view coordinatorReason);
// A refused upload: the ledger's detail (a code where the refusal has a known cause, else the
// coordinator's message).
std::string refusalDetail(const ApiFailure& failure);

}  // namespace tandem::core
