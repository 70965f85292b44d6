// Display names and teams (net/donor_profile.hpp): trimming, the limit in characters (not
// bytes), UTF-8 well-formedness by RFC 3629, the characters refused, the case-folded key, and
// the JSON of a profile and of the leaderboard, with the refusals of malformed answers.
#include "donor_profile.hpp"

#include <QtTest>

using namespace tandem::net;

namespace {

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
        out += s;
    return out;
}

std::string errorOf(std::string_view raw) {
    auto r = checkPublicName(raw, "display_name");
    return r ? std::string() : r.error().message;
}

}  // namespace

class TestNetDonorProfile : public QObject {
    Q_OBJECT

  private slots:
    void trimsAndCountsCharacters() {
        QCOMPARE(*checkPublicName("  Ada Lovelace \t", "x"), std::string("Ada Lovelace"));
        QCOMPARE(*checkPublicName("", "x"), std::string());
        // U+3000 (ideographic space, 3 bytes) is trimmed too; inner spaces stay.
        QCOMPARE(*checkPublicName("\xE3\x80\x80"
                                  "a b\xE3\x80\x80",
                                  "x"),
                 std::string("a b"));
        // 32 characters of 4 bytes each (U+1F600) pass; 33 do not.
        const std::string smile = "\xF0\x9F\x98\x80";
        QVERIFY(checkPublicName(repeat(smile, 32), "x").ok());
        QVERIFY(errorOf(repeat(smile, 33)).find("at most 32 characters") != std::string::npos);
        QVERIFY(errorOf(repeat(smile, 33)).find("found 33") != std::string::npos);
        QVERIFY(errorOf(" \t ").find("only white space") != std::string::npos);
    }

    void refusesWhatIsNotPrintableText() {
        // Control characters: C0, DEL, C1 (U+0085 is white space, so inside a name it counts).
        QVERIFY(errorOf("a\x01"
                        "b")
                    .find("U+0001 at character 2") != std::string::npos);
        QVERIFY(errorOf("a\x7F").find("U+007F") != std::string::npos);
        QVERIFY(errorOf("a\xC2\x9B"
                        "b")
                    .find("U+009B") != std::string::npos);
        QVERIFY(errorOf("a\nb").find("U+000A") != std::string::npos);
        // Bidirectional overrides and isolates, line separators, BOM, noncharacters.
        for (const char* bad : {"a\xE2\x80\xAE"
                                "b",
                                "a\xE2\x81\xA6"
                                "b",
                                "a\xE2\x80\xA8"
                                "b",
                                "a\xEF\xBB\xBF"
                                "b",
                                "a\xEF\xBF\xBE"
                                "b"})
            QVERIFY2(errorOf(bad).find("printable characters only") != std::string::npos, bad);
        // Not UTF-8: a lone continuation byte, an overlong '/', a surrogate, beyond U+10FFFF,
        // a sequence cut short.
        for (const char* bad :
             {"a\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "ab\xE2\x82"})
            QVERIFY2(errorOf(bad).find("valid UTF-8") != std::string::npos, bad);
        QVERIFY(errorOf("ab\xE2\x82").find("byte 3 (0xE2)") != std::string::npos);
        // Markup is printable text: the page escapes it, the name is not refused for it.
        QVERIFY(checkPublicName("<script>alert(1)</script>", "x").ok());
    }

    void foldsCase() {
        QCOMPARE(publicNameKey("Ada"), std::string("ada"));
        QCOMPARE(publicNameKey("\xC3\x89"
                               "COLE"),
                 std::string("\xC3\xA9"
                             "cole"));  // ÉCOLE
        QCOMPARE(publicNameKey("\xD0\x9C\xD0\x98\xD0\xA0"),
                 std::string("\xD0\xBC\xD0\xB8\xD1\x80"));             // МИР -> мир
        QCOMPARE(publicNameKey("\xCE\xA9"), std::string("\xCF\x89"));  // Ω -> ω
        QCOMPARE(publicNameKey("\xC3\x97"), std::string("\xC3\x97"));  // × is no letter
        QCOMPARE(publicNameKey("ANONYMOUS"), std::string(kAnonymousName));
    }

    void profileJson() {
        auto p = DonorProfile::fromJson(R"({"display_name": "Ada", "team": null, "x": 1})");
        QVERIFY(p.ok());
        QCOMPARE(*p->displayName, std::string("Ada"));
        QCOMPARE(*p->team, std::string());  // null clears
        auto only = DonorProfile::fromJson(R"({"team": "Red"})");
        QVERIFY(only.ok() && !only->displayName && *only->team == "Red");
        QCOMPARE(DonorProfile::fromJson(only->toJson()).value(), only.value());
        QCOMPARE(DonorProfile{}.toJson(), std::string("{}"));
        auto bad = DonorProfile::fromJson(R"({"display_name": 5})");
        QVERIFY(!bad.ok());
        QVERIFY(bad.error().message.find("'display_name' must be a string or null, found number") !=
                std::string::npos);
        QVERIFY(!DonorProfile::fromJson("[1]").ok());
    }

    void leaderboardJson() {
        Leaderboard b;
        b.runId = 3;
        b.donorCount = 2;
        b.teamCount = 1;
        b.donors = {{1, "Ada", false, "Red", 1000, 2, 950.5},
                    {2, "anonymous", true, "", 10, 1, 10}};
        b.teams = {{1, "Red", 4, 1000, 2, 950.5}};
        b.you = b.donors[0];
        b.yourTeam = b.teams[0];
        auto back = Leaderboard::fromJson(b.toJson());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back.value(), b);
        b.you.reset();
        b.yourTeam.reset();
        QCOMPARE(Leaderboard::fromJson(b.toJson()).value(), b);
        // Malformed answers name the field.
        auto negative = Leaderboard::fromJson(
            R"({"run_id": 1, "donor_count": 0, "team_count": 0, "teams": [], "donors": [)"
            R"({"rank": 1, "display_name": "a", "anonymous": false, "team": "", "tokens": -5,)"
            R"( "units": 1, "credit": 1}]})");
        QVERIFY(!negative.ok());
        QVERIFY(negative.error().message.find("donors[0]") != std::string::npos);
        QVERIFY(negative.error().message.find("tokens") != std::string::npos);
        QVERIFY(!Leaderboard::fromJson(R"({"run_id": 1})").ok());
    }
};

QTEST_GUILESS_MAIN(TestNetDonorProfile)
#include "test_net_donor_profile.moc"
