// Registration with the coordinator, kept in registration.json (0600).
#include "registration.hpp"

#include "unit_files.hpp"

namespace tandem::core {

namespace fs = std::filesystem;

void Registrar::load() {
    const fs::path file = m_shared.files.registrationFile();
    std::error_code ec;
    if (!fs::exists(file, ec))
        return;
    auto r = readRegistrationFile(file);
    if (!r) {
        m_shared.log(EventLevel::Warning, r.error().message + "; registering again");
        return;
    }
    if (r->coordinatorUrl != m_shared.cfg.coordinatorUrl) {
        m_shared.log(EventLevel::Info, "the registration is for " + r->coordinatorUrl +
                                           "; registering with " + m_shared.cfg.coordinatorUrl);
        return;
    }
    m_shared.deps.api->setToken(r->token);
    m_shared.deps.api->setCoordinatorKey(r->coordinatorKey);
    keep(*r);
}

bool Registrar::registerNow() {
    m_shared.setState(EngineState::Fetching, "registering", NextAction(NextStep::Register));
    net::RegisterRequest req;
    req.name =
        m_shared.cfg.clientName.empty() ? "tandem-worker" : m_shared.cfg.clientName.substr(0, 100);
    req.publicKey = m_shared.key.publicKey();
    req.hardware = m_shared.cfg.hardwareSummary.substr(0, 2000);
    auto res = m_shared.deps.api->registerClient(req);
    m_shared.checkCrash();
    if (!res) {
        m_backoff.fail("registration failed", res.error());
        return false;
    }
    Registration r;
    r.coordinatorUrl = m_shared.cfg.coordinatorUrl;
    r.clientId = res->clientId;
    r.token = res->token;
    r.coordinatorKey = res->coordinatorPublicKey;
    if (auto st =
            writePrivateFileAtomically(m_shared.files.registrationFile(), registrationJson(r));
        !st) {
        m_backoff.failLocal(st.error().message);
        return false;
    }
    m_shared.deps.api->setToken(r.token);
    m_backoff.succeeded();
    keep(r);
    m_shared.log(EventLevel::Info, "registered with " + m_shared.cfg.coordinatorUrl +
                                       " as client " + std::to_string(r.clientId) +
                                       "; coordinator key " + net::toBase64(r.coordinatorKey) +
                                       " pinned");
    return true;
}

void Registrar::drop(const std::string& why) {
    m_shared.log(EventLevel::Warning, why + "; registering again");
    std::error_code ec;
    fs::remove(m_shared.files.registrationFile(), ec);
    std::lock_guard lock(m_shared.mu);
    m_registration.reset();
    m_shared.snap.registered = false;
}

void Registrar::keep(const Registration& registration) {
    std::lock_guard lock(m_shared.mu);
    m_registration = registration;
    m_shared.snap.registered = true;
}

std::optional<net::PublicKey> Registrar::coordinatorKey() const {
    std::lock_guard lock(m_shared.mu);
    if (!m_registration)
        return std::nullopt;
    return m_registration->coordinatorKey;
}

}  // namespace tandem::core
