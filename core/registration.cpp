// Registration with the coordinator, kept in registration.json (0600).
#include "engine_impl.hpp"

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

void Engine::Impl::loadRegistration() {
    auto j = readJson(files.registrationFile());
    if (!j)
        return;
    try {
        Registration r;
        r.coordinatorUrl = (*j).at("coordinator_url").get<std::string>();
        r.clientId = (*j).at("client_id").get<int64_t>();
        r.token = (*j).at("token").get<std::string>();
        auto k = net::publicKeyFromBase64((*j).at("coordinator_public_key").get<std::string>());
        if (!k)
            return;
        r.coordinatorKey = *k;
        if (r.coordinatorUrl != cfg.coordinatorUrl) {
            log(EventLevel::Info, "the registration is for " + r.coordinatorUrl +
                                      "; registering with " + cfg.coordinatorUrl);
            return;
        }
        reg = r;
        deps.api->setToken(r.token);
        deps.api->setCoordinatorKey(r.coordinatorKey);
        std::lock_guard lock(mu);
        snap.registered = true;
    } catch (const std::exception&) {
        log(EventLevel::Warning, "registration.json is unreadable; registering again");
    }
}

bool Engine::Impl::doRegister() {
    setState(EngineState::Fetching, "registering", "register with " + cfg.coordinatorUrl);
    net::RegisterRequest req;
    req.name = cfg.clientName.empty() ? "tandem-worker" : cfg.clientName.substr(0, 100);
    req.publicKey = key.publicKey();
    req.hardware = cfg.hardwareSummary.substr(0, 2000);
    auto res = deps.api->registerClient(req);
    checkCrash();
    if (!res) {
        backoff.fail("registration failed", res.error());
        return false;
    }
    Registration r;
    r.coordinatorUrl = cfg.coordinatorUrl;
    r.clientId = res->clientId;
    r.token = res->token;
    r.coordinatorKey = res->coordinatorPublicKey;
    json j = {{"coordinator_url", r.coordinatorUrl},
              {"client_id", r.clientId},
              {"token", r.token},
              {"coordinator_public_key", net::toBase64(r.coordinatorKey)}};
    if (auto st = writePrivateFileAtomically(files.registrationFile(), j.dump(2)); !st) {
        backoff.failLocal(st.error().message);
        return false;
    }
    reg = r;
    deps.api->setToken(r.token);
    backoff.succeeded();
    {
        std::lock_guard lock(mu);
        snap.registered = true;
    }
    log(EventLevel::Info, "registered with " + cfg.coordinatorUrl + " as client " +
                              std::to_string(r.clientId) + "; coordinator key " +
                              net::toBase64(r.coordinatorKey) + " pinned");
    return true;
}

void Engine::Impl::dropRegistration(const std::string& why) {
    log(EventLevel::Warning, why + "; registering again");
    reg.reset();
    std::error_code ec;
    fs::remove(files.registrationFile(), ec);
    std::lock_guard lock(mu);
    snap.registered = false;
}

}  // namespace tandem::core
