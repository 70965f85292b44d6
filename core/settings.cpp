#include "settings.hpp"

#include "donor_profile.hpp"
#include "file_io.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace tandem::core {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::array<const char*, 7> kDayKeys{"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

const char* typeName(const Json& j) {
    switch (j.type()) {
        case Json::value_t::null:
            return "null";
        case Json::value_t::boolean:
            return "true/false";
        case Json::value_t::string:
            return "text";
        case Json::value_t::array:
            return "a list";
        case Json::value_t::object:
            return "an object";
        case Json::value_t::number_float:
            return "a fractional number";
        default:
            return "a number";
    }
}

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

// Reads one object's known keys into typed fields and collects the others.
class ObjectReader {
  public:
    ObjectReader(const Json& object, std::string prefix, LoadedSettings& out)
        : m_object(object), m_prefix(std::move(prefix)), m_out(out) {}

    Status text(const char* key, std::string& field) {
        const Json* j = find(key);
        if (j == nullptr)
            return {};
        if (!j->is_string())
            return typeError(key, *j, "text");
        field = j->get<std::string>();
        return {};
    }
    Status boolean(const char* key, bool& field) {
        const Json* j = find(key);
        if (j == nullptr)
            return {};
        if (!j->is_boolean())
            return typeError(key, *j, "true or false");
        field = j->get<bool>();
        return {};
    }
    Status integer(const char* key, int64_t& field) {
        const Json* j = find(key);
        if (j == nullptr)
            return {};
        if (!j->is_number_integer())
            return typeError(key, *j, "a whole number");
        if (j->is_number_unsigned() && j->get<uint64_t>() > uint64_t{INT64_MAX}) {
            return makeError("settings: " + path(key) + " is too large");
        }
        field = j->get<int64_t>();
        return {};
    }
    Status number(const char* key, double& field) {
        const Json* j = find(key);
        if (j == nullptr)
            return {};
        if (!j->is_number())
            return typeError(key, *j, "a number");
        field = j->get<double>();
        return {};
    }
    Status optionalNumber(const char* key, std::optional<double>& field) {
        const Json* j = find(key);
        if (j == nullptr)
            return {};
        if (j->is_null()) {
            field.reset();
            return {};
        }
        if (!j->is_number())
            return typeError(key, *j, "a number or null");
        field = j->get<double>();
        return {};
    }
    const Json* object(const char* key, Status& status) {
        const Json* j = find(key);
        if (j != nullptr && !j->is_object()) {
            status = typeError(key, *j, "an object");
            return nullptr;
        }
        return j;
    }
    const Json* find(const char* key) {
        m_known.push_back(key);
        auto it = m_object.find(key);
        return it == m_object.end() ? nullptr : &*it;
    }
    std::string path(const std::string& key) const { return m_prefix + key; }
    // After all known keys were read: keep the rest.
    void keepUnknown() {
        for (auto it = m_object.begin(); it != m_object.end(); ++it) {
            bool known = false;
            for (const std::string& k : m_known)
                known = known || k == it.key();
            if (known)
                continue;
            m_out.settings.unknownKeys[path(it.key())] = it.value().dump();
            m_out.warnings.push_back("settings: unknown key " + quoted(path(it.key())) +
                                     " (kept as it is)");
        }
    }

  private:
    Error typeError(const char* key, const Json& j, const char* expected) const {
        return makeError("settings: " + path(key) + " must be " + expected + ", found " +
                         typeName(j));
    }

    const Json& m_object;
    std::string m_prefix;
    LoadedSettings& m_out;
    std::vector<std::string> m_known;
};

Expected<TimeWindow> parseWindow(const Json& j, const std::string& where) {
    if (!j.is_object()) {
        return makeError("settings: " + where + " must be an object like {\"days\": [\"mon\"], " +
                         "\"start\": \"18:00\", \"end\": \"08:00\"}, found " + typeName(j));
    }
    TimeWindow w;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& key = it.key();
        if (key == "days") {
            if (!it->is_array()) {
                return makeError("settings: " + where + ".days must be a list of mon..sun");
            }
            w.weekdays = 0;
            for (const Json& d : *it) {
                const std::string name = d.is_string() ? d.get<std::string>() : d.dump();
                size_t i = 0;
                while (i < kDayKeys.size() && name != kDayKeys[i])
                    ++i;
                if (i == kDayKeys.size()) {
                    return makeError("settings: " + where + ".days holds " + quoted(name) +
                                     "; expected mon, tue, wed, thu, fri, sat or sun");
                }
                w.weekdays |= static_cast<uint8_t>(1u << i);
            }
        } else if (key == "start" || key == "end") {
            if (!it->is_string()) {
                return makeError("settings: " + where + "." + key + " must be a time \"HH:MM\"");
            }
            auto minute = parseTimeOfDay(it->get<std::string>());
            if (!minute) {
                return makeError("settings: " + where + "." + key + ": " + minute.error().message);
            }
            (key == "start" ? w.startMinute : w.endMinute) = *minute;
        } else {
            return makeError("settings: " + where + " has an unknown key " + quoted(key) +
                             "; expected days, start and end");
        }
    }
    return w;
}

Json windowToJson(const TimeWindow& w) {
    Json days = Json::array();
    for (size_t i = 0; i < kDayKeys.size(); ++i) {
        if ((w.weekdays & (1u << i)) != 0)
            days.push_back(kDayKeys[i]);
    }
    return Json{{"days", days},
                {"start", formatMinuteOfDay(w.startMinute)},
                {"end", formatMinuteOfDay(w.endMinute)}};
}

bool isDigits(std::string_view s) {
    if (s.empty())
        return false;
    for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    }
    return true;
}

// host[:port], where host is a name, an IPv4 address or a bracketed IPv6 address.
std::string checkHostPort(std::string_view hostPort) {
    std::string_view host = hostPort;
    std::string_view port;
    if (!host.empty() && host.front() == '[') {
        const size_t close = host.find(']');
        if (close == std::string_view::npos)
            return "an IPv6 address without its closing ']'";
        port = host.substr(close + 1);
        host = host.substr(1, close - 1);
        if (!port.empty()) {
            if (port.front() != ':')
                return "text after the IPv6 address";
            port.remove_prefix(1);
            if (port.empty())
                return "an empty port";
        }
    } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
        port = host.substr(colon + 1);
        host = host.substr(0, colon);
        if (port.empty())
            return "an empty port";
    }
    if (host.empty())
        return "no host name";
    for (char c : host) {
        if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '@' || c == '?' ||
            c == '#') {
            return "a host name with " + quoted(std::string(1, c));
        }
    }
    if (!port.empty()) {
        if (!isDigits(port) || port.size() > 5 || std::stoi(std::string(port)) < 1 ||
            std::stoi(std::string(port)) > 65535) {
            return "port " + quoted(std::string(port)) + " (expected 1 to 65535)";
        }
    }
    return {};
}

bool isBase64(std::string_view s) {
    for (char c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=') {
            return false;
        }
    }
    return true;
}

}  // namespace

Expected<int> parseTimeOfDay(std::string_view text) {
    const std::string shown = quoted(std::string(text));
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 2 || text.size() != colon + 3 ||
        !isDigits(text.substr(0, colon)) || !isDigits(text.substr(colon + 1))) {
        return makeError("time is " + shown + "; expected HH:MM, e.g. 18:00");
    }
    const int hours = std::stoi(std::string(text.substr(0, colon)));
    const int minutes = std::stoi(std::string(text.substr(colon + 1)));
    if (hours > 23 || minutes > 59) {
        return makeError("time is " + shown + "; expected 00:00 to 23:59");
    }
    return hours * 60 + minutes;
}

Expected<LoadedSettings> parseSettings(std::string_view text) {
    Json root;
    try {
        root = Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {  // parse_error, and out_of_range for 1e9999
        return makeError(std::string("settings: not valid JSON: ") + e.what());
    }
    if (!root.is_object()) {
        return makeError(std::string("settings: the file must hold a JSON object, found ") +
                         typeName(root));
    }
    LoadedSettings out;
    Settings& s = out.settings;
    ObjectReader top(root, "", out);
    int64_t version = Settings::kVersion;
    if (Status st = top.integer("version", version); !st)
        return st.error();
    if (version > Settings::kVersion) {
        out.warnings.push_back("settings: written by a newer Tandem (version " +
                               std::to_string(version) + ", this one knows " +
                               std::to_string(Settings::kVersion) + "); unknown keys are kept");
    }
    for (Status st :
         {top.text("device", s.device), top.text("proxy", s.proxy),
          top.integer("uploadLimitBytesPerSecond", s.uploadLimitBytesPerSecond),
          top.integer("downloadLimitBytesPerSecond", s.downloadLimitBytesPerSecond),
          top.text("dataDirectory", s.dataDirectory), top.boolean("startAtLogin", s.startAtLogin),
          top.text("displayName", s.displayName), top.text("team", s.team),
          top.number("energyPricePerKwh", s.energyPricePerKwh)}) {
        if (!st)
            return st.error();
    }

    Status st;
    if (const Json* c = top.object("coordinator", st)) {
        ObjectReader r(*c, "coordinator.", out);
        for (Status x : {r.text("url", s.coordinatorUrl), r.text("caFile", s.caFile),
                         r.text("pinnedPublicKey", s.pinnedPublicKey),
                         r.text("registerSecret", s.registerSecret)}) {
            if (!x)
                return x.error();
        }
        r.keepUnknown();
    }
    if (!st)
        return st.error();

    if (const Json* j = top.object("rules", st)) {
        RulesConfig& rc = s.rules;
        ObjectReader r(*j, "rules.", out);
        for (Status x : {r.boolean("onlyWhenIdle", rc.onlyWhenIdle),
                         r.integer("idleThresholdSeconds", rc.idleThresholdSeconds),
                         r.boolean("pauseOnBattery", rc.pauseOnBattery),
                         r.boolean("useTimeWindows", rc.useTimeWindows),
                         r.optionalNumber("maxTemperatureC", rc.maxTemperatureC),
                         r.number("temperatureHysteresisC", rc.temperatureHysteresisC),
                         r.integer("dailyUploadCapBytes", rc.dailyUploadCapBytes),
                         r.integer("dailyDownloadCapBytes", rc.dailyDownloadCapBytes)}) {
            if (!x)
                return x.error();
        }
        if (const Json* w = r.find("timeWindows")) {
            if (!w->is_array()) {
                return makeError(std::string("settings: rules.timeWindows must be a list, found ") +
                                 typeName(*w));
            }
            rc.timeWindows.clear();
            for (size_t i = 0; i < w->size(); ++i) {
                auto window = parseWindow((*w)[i], "rules.timeWindows[" + std::to_string(i) + "]");
                if (!window)
                    return window.error();
                rc.timeWindows.push_back(*window);
            }
        }
        r.keepUnknown();
    }
    if (!st)
        return st.error();
    top.keepUnknown();
    return out;
}

std::string serializeSettings(const Settings& s) {
    const RulesConfig& rc = s.rules;
    Json windows = Json::array();
    for (const TimeWindow& w : rc.timeWindows)
        windows.push_back(windowToJson(w));
    Json root;
    root["version"] = Settings::kVersion;
    root["device"] = s.device;
    root["displayName"] = s.displayName;
    root["team"] = s.team;
    root["energyPricePerKwh"] = s.energyPricePerKwh;
    root["coordinator"] = Json{
        {"url", s.coordinatorUrl}, {"caFile", s.caFile}, {"pinnedPublicKey", s.pinnedPublicKey}};
    if (!s.registerSecret.empty())
        root["coordinator"]["registerSecret"] = s.registerSecret;
    root["rules"] =
        Json{{"onlyWhenIdle", rc.onlyWhenIdle},
             {"idleThresholdSeconds", rc.idleThresholdSeconds},
             {"pauseOnBattery", rc.pauseOnBattery},
             {"useTimeWindows", rc.useTimeWindows},
             {"timeWindows", windows},
             {"maxTemperatureC", rc.maxTemperatureC ? Json(*rc.maxTemperatureC) : Json(nullptr)},
             {"temperatureHysteresisC", rc.temperatureHysteresisC},
             {"dailyUploadCapBytes", rc.dailyUploadCapBytes},
             {"dailyDownloadCapBytes", rc.dailyDownloadCapBytes}};
    root["uploadLimitBytesPerSecond"] = s.uploadLimitBytesPerSecond;
    root["downloadLimitBytesPerSecond"] = s.downloadLimitBytesPerSecond;
    root["proxy"] = s.proxy;
    root["dataDirectory"] = s.dataDirectory;
    root["startAtLogin"] = s.startAtLogin;
    for (const auto& [path, value] : s.unknownKeys) {
        Json parsed = Json::parse(value, nullptr, false);
        if (parsed.is_discarded())
            continue;
        // Only the objects this build reads are split; any other key sits at the top.
        const size_t dot = path.find('.');
        const std::string parentKey = dot == std::string::npos ? "" : path.substr(0, dot);
        if (parentKey != "rules" && parentKey != "coordinator") {
            if (!root.contains(path))
                root[path] = parsed;
        } else {
            Json& parent = root[parentKey];
            const std::string key = path.substr(dot + 1);
            if (parent.is_object() && !parent.contains(key))
                parent[key] = parsed;
        }
    }
    return root.dump(2) + "\n";
}

std::vector<SettingsIssue> validate(const Settings& s) {
    std::vector<SettingsIssue> issues;
    auto add = [&](const char* key, std::string message) {
        issues.push_back({key, std::move(message)});
    };

    if (s.device != "auto" && s.device != "cpu" &&
        !(s.device.rfind("cuda:", 0) == 0 && isDigits(s.device.substr(5)) &&
          s.device.size() <= 8)) {
        add("device", "device is " + quoted(s.device) + "; expected auto, cpu or cuda:N (cuda:0)");
    }

    for (auto [key, value] : {std::pair{"displayName", &s.displayName}, std::pair{"team", &s.team}})
        if (auto checked =
                net::checkPublicName(*value, key == std::string("team") ? "team" : "display name");
            !checked || *checked != *value)
            add(key, checked ? std::string(key) + " has white space at an end"
                             : checked.error().message);

    if (!(s.energyPricePerKwh >= 0 && s.energyPricePerKwh <= 1000))
        add("energyPricePerKwh", "electricity price is " + std::to_string(s.energyPricePerKwh) +
                                     " per kWh; expected 0 (not given) to 1000");

    const RulesConfig& rc = s.rules;
    if (rc.idleThresholdSeconds < 10 || rc.idleThresholdSeconds > 86400) {
        add("rules.idleThresholdSeconds", "idle threshold is " +
                                              std::to_string(rc.idleThresholdSeconds) +
                                              " s; expected 10 s to 86400 s (a day)");
    }
    if (rc.useTimeWindows && rc.timeWindows.empty()) {
        add("rules.timeWindows",
            "time windows are switched on but none is set; add one or "
            "switch them off");
    }
    for (size_t i = 0; i < rc.timeWindows.size(); ++i) {
        const TimeWindow& w = rc.timeWindows[i];
        const std::string n = "time window " + std::to_string(i + 1);
        if ((w.weekdays & TimeWindow::kEveryDay) == 0 || (w.weekdays & 0x80) != 0) {
            add("rules.timeWindows",
                n + " has no weekday chosen; expected at least one of mon..sun");
        }
        if (w.startMinute < 0 || w.startMinute >= 1440 || w.endMinute < 0 || w.endMinute >= 1440) {
            add("rules.timeWindows", n + " runs from minute " + std::to_string(w.startMinute) +
                                         " to " + std::to_string(w.endMinute) +
                                         "; expected times from 00:00 to 23:59");
        }
    }
    if (rc.maxTemperatureC && (*rc.maxTemperatureC < 40 || *rc.maxTemperatureC > 110)) {
        add("rules.maxTemperatureC", "temperature limit is " +
                                         std::to_string(static_cast<int>(*rc.maxTemperatureC)) +
                                         " °C; expected 40 °C to 110 °C, or none");
    }
    if (!(rc.temperatureHysteresisC >= 0 && rc.temperatureHysteresisC <= 30)) {
        add("rules.temperatureHysteresisC", "temperature hysteresis is " +
                                                std::to_string(rc.temperatureHysteresisC) +
                                                " °C; expected 0 °C to 30 °C");
    }
    auto checkCap = [&](const char* key, const char* what, int64_t bytes) {
        if (bytes != 0 && bytes < 1'000'000) {
            add(key, std::string(what) + " is " + std::to_string(bytes) +
                         " bytes; expected 0 (no cap) or at least 1 MB");
        }
    };
    checkCap("rules.dailyUploadCapBytes", "daily upload cap", rc.dailyUploadCapBytes);
    checkCap("rules.dailyDownloadCapBytes", "daily download cap", rc.dailyDownloadCapBytes);
    auto checkRate = [&](const char* key, const char* what, int64_t bytesPerSecond) {
        if (bytesPerSecond != 0 && bytesPerSecond < 1000) {
            add(key, std::string(what) + " is " + std::to_string(bytesPerSecond) +
                         " bytes/s; expected 0 (unlimited) or at least 1000 bytes/s (1 kB/s)");
        }
    };
    checkRate("uploadLimitBytesPerSecond", "upload rate limit", s.uploadLimitBytesPerSecond);
    checkRate("downloadLimitBytesPerSecond", "download rate limit", s.downloadLimitBytesPerSecond);

    if (!s.proxy.empty() && s.proxy != "direct") {
        const size_t sep = s.proxy.find("://");
        const std::string scheme = sep == std::string::npos ? "" : s.proxy.substr(0, sep);
        if (scheme != "http" && scheme != "https" && scheme != "socks4" && scheme != "socks4a" &&
            scheme != "socks5" && scheme != "socks5h") {
            add("proxy", "proxy is " + quoted(s.proxy) +
                             "; expected empty (from the environment), direct, or "
                             "http://, https://, socks4://, socks4a://, socks5:// or socks5h:// "
                             "followed by host:port");
        } else {
            std::string rest = s.proxy.substr(sep + 3);
            if (!rest.empty() && rest.back() == '/')
                rest.pop_back();
            if (const size_t at = rest.rfind('@'); at != std::string::npos)
                rest.erase(0, at + 1);
            if (std::string problem = checkHostPort(rest); !problem.empty()) {
                add("proxy", "proxy " + quoted(s.proxy) + " has " + problem);
            }
        }
    }

    if (!s.dataDirectory.empty() && !std::filesystem::path(s.dataDirectory).is_absolute()) {
        add("dataDirectory", "data directory " + quoted(s.dataDirectory) +
                                 " is relative; expected an absolute path");
    }

    if (!s.coordinatorUrl.empty()) {
        const std::string& u = s.coordinatorUrl;
        if (u.rfind("https://", 0) != 0) {
            add("coordinator.url",
                "coordinator URL " + quoted(u) +
                    (u.rfind("http://", 0) == 0 ? " uses plain http; TLS is always on, expected "
                                                  "https://host[:port]"
                                                : " does not start with https://; expected "
                                                  "https://host[:port]"));
        } else {
            std::string hostPort = u.substr(8);
            hostPort = hostPort.substr(0, hostPort.find('/'));
            if (std::string problem = checkHostPort(hostPort); !problem.empty()) {
                add("coordinator.url", "coordinator URL " + quoted(u) + " has " + problem);
            } else if (u.find_first_of(" \t\r\n") != std::string::npos) {
                add("coordinator.url", "coordinator URL " + quoted(u) + " contains white space");
            }
        }
    }
    if (!s.caFile.empty() && !s.pinnedPublicKey.empty()) {
        add("coordinator.caFile",
            "both a CA file and a pinned key are set; expected one of them (a CA file for a "
            "certificate from a CA, a pin for a self-signed coordinator)");
    }
    if (!s.caFile.empty() && !std::filesystem::path(s.caFile).is_absolute()) {
        add("coordinator.caFile",
            "CA file " + quoted(s.caFile) + " is relative; expected an absolute path");
    }
    if (!s.pinnedPublicKey.empty()) {
        const std::string& p = s.pinnedPublicKey;
        const std::string body = p.rfind("sha256//", 0) == 0 ? p.substr(8) : std::string();
        if (body.size() != 44 || body.back() != '=' || !isBase64(body)) {
            add("coordinator.pinnedPublicKey",
                "pinned key " + quoted(p) +
                    " is not of the form sha256//<44 base64 characters> (the SHA-256 of the "
                    "coordinator's public key)");
        }
    }
    return issues;
}

Status validateSettings(const Settings& settings) {
    const auto issues = validate(settings);
    if (issues.empty())
        return {};
    std::string message = "settings: ";
    for (size_t i = 0; i < issues.size(); ++i) {
        if (i > 0)
            message += "; ";
        message += issues[i].message;
    }
    return makeError(message);
}

Expected<LoadedSettings> loadSettings(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec) && !ec)
        return LoadedSettings{};
    auto bytes = readFile(file);
    if (!bytes)
        return bytes.error();
    const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    auto loaded = parseSettings(text);
    if (!loaded)
        return makeError(file.string() + ": " + loaded.error().message);
    if (Status s = validateSettings(loaded->settings); !s) {
        return makeError(file.string() + ": " + s.error().message);
    }
    return loaded;
}

Status saveSettings(const std::filesystem::path& file, const Settings& settings) {
    if (Status s = validateSettings(settings); !s) {
        return makeError("not saved to " + file.string() + ": " + s.error().message);
    }
    const std::string text = serializeSettings(settings);
    if (Status s = writeFileAtomically(
            file, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
        !s) {
        return s;
    }
    // The proxy URL may hold a password: owner only (the data directory should be 0700 too).
    std::error_code ec;
    std::filesystem::permissions(
        file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
    if (ec)
        return makeError("cannot restrict the permissions of " + file.string() + ": " +
                         ec.message());
    return {};
}

}  // namespace tandem::core
