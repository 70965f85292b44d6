#include "public_page.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace tandem::coord {

std::string htmlEscape(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 16);
    for (size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b < 0x80) {
            switch (b) {
                case '&':
                    out += "&amp;";
                    break;
                case '<':
                    out += "&lt;";
                    break;
                case '>':
                    out += "&gt;";
                    break;
                case '"':
                    out += "&quot;";
                    break;
                case '\'':
                    out += "&#39;";
                    break;
                default:
                    out += static_cast<char>(b);
            }
            ++i;
            continue;
        }
        // A multi-byte character passes whole when it is well-formed (RFC 3629).
        const size_t n = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + n <= text.size();
        uint32_t cp = n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
        for (size_t k = 1; ok && k < n; ++k) {
            const auto c = static_cast<unsigned char>(text[i + k]);
            ok = (c >> 6) == 2;
            cp = (cp << 6) | (c & 0x3F);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        ok = ok && cp >= kMin[n] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
        if (ok) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

namespace {

std::string groupDigits(int64_t n) {
    std::string digits = std::to_string(n < 0 ? -n : n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0)
            out += ',';
        out += digits[i];
    }
    return (n < 0 ? "-" : "") + out;
}

}  // namespace

std::string countInWords(int64_t n) {
    char buf[64];
    if (n >= 10'000'000'000LL) {
        std::snprintf(buf, sizeof buf, "%.1f billion", static_cast<double>(n) / 1e9);
        return buf;
    }
    if (n >= 1'000'000'000LL) {
        std::snprintf(buf, sizeof buf, "%.2f billion", static_cast<double>(n) / 1e9);
        return buf;
    }
    if (n >= 10'000'000LL) {
        std::snprintf(buf, sizeof buf, "%.1f million", static_cast<double>(n) / 1e6);
        return buf;
    }
    return groupDigits(n);
}

namespace {

constexpr const char* kStyle = R"css(
:root{color-scheme:light dark;--fg:#1d2330;--muted:#5b6473;--bg:#f6f7f9;--card:#fff;
--line:#d9dde3;--accent:#2f6fde}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ef;--muted:#9aa3b2;--bg:#14171c;
--card:#1d2129;--line:#343a46;--accent:#6d9eff}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
main{max-width:980px;margin:0 auto;padding:16px}
h1{font-size:1.6rem;margin:.4em 0 .1em}h2{font-size:1.2rem;margin:1.4em 0 .5em}
.muted{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(140px,1fr));gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .k{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:1.15rem;font-weight:600;overflow-wrap:anywhere}
.card .d{font-size:.85rem;color:var(--muted)}
.panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px}
.chart{width:100%;height:auto;display:block}
.chart .grid{stroke:var(--line);stroke-width:1}
.chart .frame{fill:none;stroke:var(--line)}
.chart .label{fill:var(--muted);font-size:13px}
.chart .curve{fill:none;stroke:var(--accent);stroke-width:2.5;stroke-linejoin:round}
.chart .dot{fill:var(--accent)}
.sample{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font:15px/1.45 ui-monospace,
SFMono-Regular,Menlo,Consolas,monospace}
.sample b{color:var(--muted);font-weight:600}
.boards{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:16px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;background:var(--card);font-size:.95rem}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
td.name{white-space:normal;overflow-wrap:anywhere;min-width:8em}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.you td{font-weight:600}
footer{margin:2em 0 1em;font-size:.85rem;color:var(--muted)}
a{color:var(--accent)}
)css";

std::string card(const std::string& key, const std::string& value, const std::string& detail) {
    return "<div class=\"card\"><div class=\"k\">" + key + "</div><div class=\"v\">" + value +
           "</div><div class=\"d\">" + detail + "</div></div>\n";
}

// One decimal, digits grouped: "12,345.6".
std::string creditText(double credit) {
    const int64_t tenths = std::llround(credit * 10);
    return groupDigits(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string dataInWords(const PublicRunView& v) {
    const std::string tokens = countInWords(v.trainTokens);
    if (v.dataKind == "sentencepiece")
        return "SentencePiece tokens|" + tokens + " training tokens of text, vocabulary " +
               countInWords(v.model.vocabSize);
    if (v.dataKind == "llmc")
        return "llm.c token shards|" + tokens + " training tokens, vocabulary " +
               countInWords(v.model.vocabSize);
    return "bytes of text|" + tokens + " training bytes, one token per byte";
}

std::string donorsTable(const net::Leaderboard& b) {
    if (b.donors.empty())
        return "<p class=\"muted\">No accepted work yet.</p>\n";
    std::string s =
        "<div class=\"scroll\"><table id=\"donors\"><thead><tr><th class=\"n\">#"
        "</th><th>Donor</th><th>Team</th><th class=\"n\">Tokens</th><th class=\"n\">"
        "Units</th><th class=\"n\">Credit</th></tr></thead><tbody>\n";
    for (const auto& d : b.donors)
        s += "<tr class=\"donor\"><td class=\"n\">" + std::to_string(d.rank) +
             "</td><td class=\"name" + (d.anonymous ? " muted" : "") + "\">" +
             htmlEscape(d.displayName) + "</td><td class=\"name\">" + htmlEscape(d.team) +
             "</td><td class=\"n\">" + countInWords(d.tokens) + "</td><td class=\"n\">" +
             std::to_string(d.units) + "</td><td class=\"n\">" + creditText(d.credit) +
             "</td></tr>\n";
    return s + "</tbody></table></div>\n";
}

std::string teamsTable(const net::Leaderboard& b) {
    if (b.teams.empty())
        return "<p class=\"muted\">No team has accepted work yet.</p>\n";
    std::string s =
        "<div class=\"scroll\"><table id=\"teams\"><thead><tr><th class=\"n\">#"
        "</th><th>Team</th><th class=\"n\">Members</th><th class=\"n\">Tokens</th>"
        "<th class=\"n\">Credit</th></tr></thead><tbody>\n";
    for (const auto& t : b.teams)
        s += "<tr class=\"team\"><td class=\"n\">" + std::to_string(t.rank) +
             "</td><td class=\"name\">" + htmlEscape(t.team) + "</td><td class=\"n\">" +
             std::to_string(t.members) + "</td><td class=\"n\">" + countInWords(t.tokens) +
             "</td><td class=\"n\">" + creditText(t.credit) + "</td></tr>\n";
    return s + "</tbody></table></div>\n";
}

std::string utcTime(int64_t unix) {
    const std::time_t t = static_cast<std::time_t>(unix);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
    return buf;
}

}  // namespace

std::string renderRunPage(const PublicRunView& v) {
    const std::string run = std::to_string(v.runId);
    const ModelConfig& m = v.model;
    std::string s =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta http-equiv=\"refresh\" content=\"120\">\n<title>Tandem run " +
        run + "</title>\n<style>" + kStyle + "</style></head>\n<body><main>\n";
    s += "<h1>Tandem run " + run +
         "</h1>\n<p class=\"muted\">A language model trained together "
         "by volunteers' computers: each trains a copy on its own slice of the data for a few "
         "minutes, and the coordinator merges what they learned into the next version.</p>\n";

    const std::string dataText = dataInWords(v);
    const size_t bar = dataText.find('|');
    s += "<section class=\"cards\" id=\"facts\">\n";
    s += card("Model", countInWords(v.parameters) + " parameters",
              std::to_string(m.layers) + (m.layers == 1 ? " layer, " : " layers, ") +
                  std::to_string(m.channels) + " channels, " + std::to_string(m.heads) +
                  " attention heads, context of " + std::to_string(m.maxSeqLen) + " tokens");
    s += card("Data", dataText.substr(0, bar), dataText.substr(bar + 1));
    s += card("Tokens trained", countInWords(v.tokensSoFar), "accepted from donors");
    s += card("Rounds", countInWords(v.roundsClosed),
              "closed; each makes a new version of the model");
    s += card("Donors active now", countInWords(v.activeDonors), "training a work unit");
    s += card("Tokens per hour", countInWords(v.tokensLastHour),
              "in rounds closed in the last hour");
    s += "</section>\n";

    s += "<h2>Validation loss</h2>\n<div class=\"panel\">\n" + lossChartSvg(v.losses);
    if (!v.losses.empty()) {
        char loss[32];
        std::snprintf(loss, sizeof loss, "%.4f", v.losses.back().loss);
        s += "<p class=\"muted\">Lower is better: the model's average surprise at text it has "
             "never trained on. Latest: " +
             std::string(loss) + " after round " + std::to_string(v.losses.back().round) +
             ".</p>\n";
    }
    s += "</div>\n";

    s += "<h2>What the model writes now</h2>\n<section class=\"panel\" id=\"sample\">\n";
    if (v.sample)
        s += "<p class=\"sample\"><b>" + htmlEscape(v.sample->prompt) + "</b>" +
             htmlEscape(v.sample->text) + "</p>\n<p class=\"muted\">Version " +
             std::to_string(v.sample->version) + "; the prompt is in bold.</p>\n";
    else
        s += "<p class=\"muted\">No sample yet.</p>\n";
    s += "</section>\n";

    s += "<h2>Leaderboard</h2>\n<p class=\"muted\">" + countInWords(v.board.donorCount) +
         " donors and " + countInWords(v.board.teamCount) +
         " teams with accepted work. Credit is the weight of a donor's accepted results (the "
         "tokens trained, less for late ones).</p>\n<div class=\"boards\"><section><h3>Donors"
         "</h3>\n" +
         donorsTable(v.board) + "</section><section><h3>Teams</h3>\n" + teamsTable(v.board) +
         "</section></div>\n";

    s += "<footer>Updated " + utcTime(v.builtUnix) +
         ". The same as JSON: <a href=\"/v1/status\">"
         "/v1/status</a>, <a href=\"/v1/runs/" +
         run + "/leaderboard\">/v1/runs/" + run + "/leaderboard</a>, <a href=\"/v1/runs/" + run +
         "/samples\">/v1/runs/" + run + "/samples</a>.</footer>\n</main></body></html>\n";
    return s;
}

}  // namespace tandem::coord
