// The donor's public display name and team (EngineConfig::displayName/team), sent to the
// coordinator after each registration (PUT /v1/clients/self). A name the coordinator refuses
// (taken, too long, ...) is logged with its words and not sent again until the next
// registration; the worker keeps working without it. Internal to core/.
#pragma once

#include "engine_shared.hpp"

#include <cstdint>

namespace tandem::core {

class ProfileSync {
  public:
    explicit ProfileSync(EngineShared& shared) : m_shared(shared) {}

    // Engine thread, while registered: sends the profile if this registration has not had it.
    void sync();
    // Engine thread: registering (again); the profile goes out once more afterwards.
    void reset() { m_settled = false; }

  private:
    static constexpr int64_t kRetryMs = 60 * 1000;  // after a failure that was not a refusal

    EngineShared& m_shared;
    bool m_settled = false;  // sent and answered (accepted or refused) for this registration
    int64_t m_nextTryMs = 0;
};

}  // namespace tandem::core
