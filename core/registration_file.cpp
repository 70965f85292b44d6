// registration.json: written by the engine's Registrar, read by it and by the desktop app.
#include "registration_file.hpp"

#include "unit_files.hpp"

#include <nlohmann/json.hpp>

namespace tandem::core {

using json = nlohmann::json;

std::string registrationJson(const Registration& r) {
    json j = {{"coordinator_url", r.coordinatorUrl},
              {"client_id", r.clientId},
              {"token", r.token},
              {"coordinator_public_key", net::toBase64(r.coordinatorKey)}};
    return j.dump(2);
}

Expected<Registration> readRegistrationFile(const std::filesystem::path& path) {
    auto j = readJson(path);
    if (!j)
        return j.error();
    // Each field by name, so that the error says which one is wrong.
    auto field = [&](const char* name, auto& out) -> Status {
        try {
            j->at(name).get_to(out);
            return {};
        } catch (const json::exception& e) {
            return makeError(path.string() + " is not a registration: " + name + ": " + e.what());
        }
    };
    Registration r;
    std::string key;
    for (Status st : {field("coordinator_url", r.coordinatorUrl), field("client_id", r.clientId),
                      field("token", r.token), field("coordinator_public_key", key)})
        if (!st)
            return st.error();
    auto decoded = net::publicKeyFromBase64(key);
    if (!decoded)
        return makeError(path.string() + ": coordinator_public_key: " + decoded.error().message);
    r.coordinatorKey = *decoded;
    return r;
}

}  // namespace tandem::core
