#include "profile_sync.hpp"

namespace tandem::core {

void ProfileSync::sync() {
    const EngineConfig& cfg = m_shared.cfg;
    if (m_settled || (!cfg.displayName && !cfg.team) || m_shared.now() < m_nextTryMs)
        return;
    net::DonorProfile profile{cfg.displayName, cfg.team};
    auto stored = m_shared.deps.api->updateProfile(profile);
    m_shared.checkCrash();
    if (!stored) {
        if (stored.error().transient) {
            m_nextTryMs = m_shared.now() + kRetryMs;
            m_shared.log(EventLevel::Warning, "the display name and team could not be sent (" +
                                                  stored.error().message +
                                                  "); trying again in a minute");
            return;
        }
        m_settled = true;
        m_shared.log(EventLevel::Warning, "the coordinator refused the display name or team: " +
                                              stored.error().message + "; working on without them");
        return;
    }
    m_settled = true;
    const std::string name = stored->displayName.value_or("");
    const std::string team = stored->team.value_or("");
    m_shared.log(EventLevel::Info,
                 "public profile: " + (name.empty() ? std::string("anonymous") : "'" + name + "'") +
                     (team.empty() ? std::string(", no team") : ", team '" + team + "'"));
}

}  // namespace tandem::core
