#include "held_work.hpp"

#include "crypto.hpp"
#include "safe_text.hpp"

#include <nlohmann/json.hpp>

namespace tandem::net {

using nlohmann::json;

bool isRequestId(std::string_view id) {
    if (id.empty() || id.size() > kMaxRequestIdChars)
        return false;
    for (char ch : id) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                        (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
        if (!ok)
            return false;
    }
    return true;
}

std::string newRequestId() {
    const auto bytes = randomBytes(16);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (uint8_t b : bytes) {
        out += kHex[b >> 4];
        out += kHex[b & 15];
    }
    return out;
}

std::string HeldWorkUnits::toJson() const {
    json list = json::array();
    for (const auto& u : units)
        list.push_back({{"work_unit_id", u.workUnitId},
                        {"request_id", u.requestId},
                        {"base_version", u.baseVersion},
                        {"last_step", u.lastStep},
                        {"heartbeat_unix", u.heartbeatUnix},
                        {"deadline_unix", u.deadlineUnix}});
    return json{{"work_units", list}}.dump();
}

namespace {

// The integer field `name` of `o`, at least 0; an error that names the entry and the field.
Expected<int64_t> nonNegative(const json& o, const char* name, size_t index) {
    const std::string where =
        "held work units: entry " + std::to_string(index) + ": field '" + name + "'";
    auto it = o.find(name);
    if (it == o.end())
        return makeError(where + " is missing");
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX))
        return makeError(where + " must be an integer, found " + quotable(it->dump()));
    const int64_t v = it->get<int64_t>();
    if (v < 0)
        return makeError(where + " must be at least 0, found " + std::to_string(v));
    return v;
}

}  // namespace

Expected<HeldWorkUnits> HeldWorkUnits::fromJson(std::string_view text) {
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError("held work units: expected a JSON object, found '" + quotable(text) + "'");
    auto list = j.find("work_units");
    if (list == j.end() || !list->is_array())
        return makeError("held work units: field 'work_units' must be an array");
    if (list->size() > kMaxHeldWorkUnits)
        return makeError("held work units: " + std::to_string(list->size()) + " entries, at most " +
                         std::to_string(kMaxHeldWorkUnits) + " expected");
    HeldWorkUnits out;
    for (size_t i = 0; i < list->size(); ++i) {
        const json& o = (*list)[i];
        if (!o.is_object())
            return makeError("held work units: entry " + std::to_string(i) +
                             " must be an object, found " + quotable(o.dump()));
        HeldWorkUnit u;
        for (auto [field, dest] :
             {std::pair{"work_unit_id", &u.workUnitId}, std::pair{"base_version", &u.baseVersion},
              std::pair{"last_step", &u.lastStep}, std::pair{"heartbeat_unix", &u.heartbeatUnix},
              std::pair{"deadline_unix", &u.deadlineUnix}}) {
            auto v = nonNegative(o, field, i);
            if (!v)
                return v.error();
            *dest = *v;
        }
        auto rid = o.find("request_id");
        if (rid == o.end() || !rid->is_string())
            return makeError("held work units: entry " + std::to_string(i) +
                             ": field 'request_id' must be a string");
        u.requestId = rid->get<std::string>();
        if (!u.requestId.empty() && !isRequestId(u.requestId))
            return makeError("held work units: entry " + std::to_string(i) +
                             ": field 'request_id' is not a request id: '" + quotable(u.requestId) +
                             "'");
        out.units.push_back(std::move(u));
    }
    return out;
}

}  // namespace tandem::net
