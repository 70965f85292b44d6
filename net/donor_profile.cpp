#include "donor_profile.hpp"

#include "crypto.hpp"
#include "protocol_json.hpp"
#include "safe_text.hpp"

#include <cstdio>

namespace tandem::net {

using protocol_json::json;
using protocol_json::Reader;

namespace {

struct CodePoint {
    char32_t value = 0;
    size_t offset = 0, bytes = 0;  // where it is in the UTF-8 text
};

std::string hex(uint32_t value, int digits) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%0*X", digits, value);
    return buf;
}

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
Expected<std::vector<CodePoint>> decodeUtf8(std::string_view s, std::string_view field) {
    std::vector<CodePoint> out;
    for (size_t i = 0; i < s.size();) {
        const auto b0 = static_cast<unsigned char>(s[i]);
        size_t n = b0 < 0x80         ? 1
                   : (b0 >> 5) == 6  ? 2
                   : (b0 >> 4) == 14 ? 3
                   : (b0 >> 3) == 30 ? 4
                                     : 0;
        char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
        bool ok = n > 0 && i + n <= s.size();
        for (size_t k = 1; ok && k < n; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            ok = (b >> 6) == 2;
            cp = (cp << 6) | (b & 0x3F);
        }
        static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (ok && (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
            ok = false;
        if (!ok)
            return makeError(std::string(field) + " must be valid UTF-8; byte " +
                             std::to_string(i + 1) + " (0x" + hex(b0, 2) +
                             ") does not start a well-formed character");
        out.push_back({cp, i, n});
        i += n;
    }
    return out;
}

bool isSpace(char32_t c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Control characters, line and paragraph separators, and the bidirectional embeddings,
// overrides and isolates (which would turn the text around them on a page), BOM and
// noncharacters.
bool isForbidden(char32_t c) {
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0xFEFF ||
           (c & 0xFFFE) == 0xFFFE || (c >= 0xFDD0 && c <= 0xFDEF);
}

void appendUtf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

char32_t foldCase(char32_t c) {
    if (c >= 'A' && c <= 'Z')
        return c + 0x20;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7)  // Latin-1 capitals
        return c + 0x20;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)  // Greek capitals
        return c + 0x20;
    if (c >= 0x410 && c <= 0x42F)  // Cyrillic А-Я
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40F)  // Cyrillic Ѐ-Џ
        return c + 0x50;
    return c;
}

}  // namespace

Expected<std::string> checkPublicName(std::string_view raw, std::string_view field) {
    auto cps = decodeUtf8(raw, field);
    if (!cps)
        return cps.error();
    if (cps->empty())
        return std::string();
    size_t first = 0, last = cps->size();
    while (first < last && isSpace((*cps)[first].value))
        ++first;
    while (last > first && isSpace((*cps)[last - 1].value))
        --last;
    if (first == last)
        return makeError(std::string(field) +
                         " is only white space; send \"\" to remove it, or a name with at least "
                         "one visible character");
    for (size_t i = first; i < last; ++i)
        if (isForbidden((*cps)[i].value))
            return makeError(std::string(field) + " may hold printable characters only; found U+" +
                             hex(static_cast<uint32_t>((*cps)[i].value), 4) + " at character " +
                             std::to_string(i - first + 1));
    if (last - first > kMaxPublicNameChars)
        return makeError(
            std::string(field) + " may have at most " + std::to_string(kMaxPublicNameChars) +
            " characters after trimming white space, found " + std::to_string(last - first));
    const size_t begin = (*cps)[first].offset;
    const size_t end = (*cps)[last - 1].offset + (*cps)[last - 1].bytes;
    return std::string(raw.substr(begin, end - begin));
}

std::string publicNameKey(std::string_view name) {
    auto cps = decodeUtf8(name, "name");
    if (!cps)
        return std::string(name);
    std::string out;
    for (const CodePoint& c : *cps)
        appendUtf8(out, foldCase(c.value));
    return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

std::string DonorProfile::toJson() const {
    json j = json::object();
    if (displayName)
        j["display_name"] = *displayName;
    if (team)
        j["team"] = *team;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<DonorProfile> DonorProfile::fromJson(std::string_view text) {
    auto j = protocol_json::parseObject(text, "profile");
    if (!j)
        return j.error();
    DonorProfile out;
    for (auto [field, dest] :
         {std::pair{"display_name", &out.displayName}, std::pair{"team", &out.team}}) {
        auto it = j->find(field);
        if (it == j->end())
            continue;
        if (it->is_null())
            *dest = std::string();
        else if (it->is_string())
            *dest = it->get<std::string>();
        else
            return makeError(std::string("profile: field '") + field +
                             "' must be a string or null, found " + it->type_name());
    }
    return out;
}

namespace {

json donorToJson(const DonorStanding& d) {
    return {{"rank", d.rank},           {"display_name", d.displayName},
            {"anonymous", d.anonymous}, {"team", d.team},
            {"tokens", d.tokens},       {"units", d.units},
            {"credit", d.credit}};
}

json teamToJson(const TeamStanding& t) {
    return {{"rank", t.rank},     {"team", t.team},   {"members", t.members},
            {"tokens", t.tokens}, {"units", t.units}, {"credit", t.credit}};
}

constexpr double kMaxCredit = 1e300;

DonorStanding donorFromJson(const json& o, const std::string& where, Reader& outer) {
    DonorStanding d;
    if (!o.is_object())
        return outer.fail(where + " must be an object"), d;
    Reader r(o, where);
    d.rank = r.integer("rank", 0, protocol_json::kMaxI64);
    d.displayName = r.string("display_name", 1, 4 * kMaxPublicNameChars);
    const json* anon = r.field("anonymous");
    if (anon && !anon->is_boolean())
        r.fail("field 'anonymous' must be true or false");
    d.anonymous = anon && anon->is_boolean() && anon->get<bool>();
    d.team = r.string("team", 0, 4 * kMaxPublicNameChars);
    d.tokens = r.integer("tokens", 0, protocol_json::kMaxI64);
    d.units = r.integer("units", 0, protocol_json::kMaxI64);
    d.credit = r.number("credit", 0, kMaxCredit);
    if (r.failed())
        outer.fail(r.error().message);
    return d;
}

TeamStanding teamFromJson(const json& o, const std::string& where, Reader& outer) {
    TeamStanding t;
    if (!o.is_object())
        return outer.fail(where + " must be an object"), t;
    Reader r(o, where);
    t.rank = r.integer("rank", 0, protocol_json::kMaxI64);
    t.team = r.string("team", 1, 4 * kMaxPublicNameChars);
    t.members = r.integer("members", 0, protocol_json::kMaxI64);
    t.tokens = r.integer("tokens", 0, protocol_json::kMaxI64);
    t.units = r.integer("units", 0, protocol_json::kMaxI64);
    t.credit = r.number("credit", 0, kMaxCredit);
    if (r.failed())
        outer.fail(r.error().message);
    return t;
}

}  // namespace

std::string Leaderboard::toJson() const {
    json donors_ = json::array(), teams_ = json::array();
    for (const auto& d : donors)
        donors_.push_back(donorToJson(d));
    for (const auto& t : teams)
        teams_.push_back(teamToJson(t));
    json out{{"run_id", runId},
             {"donor_count", donorCount},
             {"team_count", teamCount},
             {"donors", donors_},
             {"teams", teams_}};
    if (you)
        out["you"] = donorToJson(*you);
    if (yourTeam)
        out["your_team"] = teamToJson(*yourTeam);
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<Leaderboard> Leaderboard::fromJson(std::string_view text) {
    auto j = protocol_json::parseObject(text, "leaderboard");
    if (!j)
        return j.error();
    Reader r(*j, "leaderboard");
    Leaderboard out;
    out.runId = r.integer("run_id", 1, protocol_json::kMaxI64);
    out.donorCount = r.integer("donor_count", 0, protocol_json::kMaxI64);
    out.teamCount = r.integer("team_count", 0, protocol_json::kMaxI64);
    if (const json* list = r.array("donors"))
        for (size_t i = 0; i < list->size() && !r.failed(); ++i)
            out.donors.push_back(donorFromJson((*list)[i], "donors[" + std::to_string(i) + "]", r));
    if (const json* list = r.array("teams"))
        for (size_t i = 0; i < list->size() && !r.failed(); ++i)
            out.teams.push_back(teamFromJson((*list)[i], "teams[" + std::to_string(i) + "]", r));
    if (const json* y = r.optionalObject("you"))
        out.you = donorFromJson(*y, "you", r);
    if (const json* y = r.optionalObject("your_team"))
        out.yourTeam = teamFromJson(*y, "your_team", r);
    if (r.failed())
        return r.error();
    return out;
}

}  // namespace tandem::net
