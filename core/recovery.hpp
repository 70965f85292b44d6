// Recovery when the engine starts (after a quit or a crash), from what the data directory holds:
// finished results go back into the upload queue (uploaded again: idempotent on the
// coordinator), the unit in work/ resumes from its checkpoint when its manifest verifies against
// the pinned key (other units there are abandoned), and ledger rows whose files are gone are
// closed as Abandoned (in training) or Failed (finished). Internal to core/.
#pragma once

#include "engine_shared.hpp"
#include "unit_files.hpp"

#include <optional>

namespace tandem::core {

// Engine thread, before anything else. Returns the unit to resume, if any.
std::optional<ActiveUnit> recoverDataDir(EngineShared& shared,
                                         const std::optional<net::PublicKey>& coordinatorKey);

}  // namespace tandem::core
