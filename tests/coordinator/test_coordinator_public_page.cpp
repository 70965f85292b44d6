// The public run page (coordinator/public_page.hpp): escaping against hand-written expectations,
// numbers in words, the chart's coordinates worked out by hand, and the page over HTTPS: its
// headers, a hostile display name shown as text, the loss chart and sample after rounds, the
// cache (the same page until something it shows changed), and 404 for another run.
#include "codec.hpp"
#include "direct.hpp"
#include "public_page.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

size_t count(const std::string& s, const std::string& part) {
    size_t n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1))
        ++n;
    return n;
}

}  // namespace

class TestCoordinatorPublicPage : public QObject {
    Q_OBJECT

  private slots:
    void escapesMarkupAndBrokenUtf8() {
        QCOMPARE(
            coord::htmlEscape("<script>alert('x') & \"y\"</script>"),
            std::string("&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"));
        QCOMPARE(coord::htmlEscape("caf\xC3\xA9 \xF0\x9F\x98\x80"),
                 std::string("caf\xC3\xA9 \xF0\x9F\x98\x80"));  // well-formed: unchanged
        // A lone continuation byte, an overlong '<' and a surrogate become U+FFFD each byte.
        QCOMPARE(coord::htmlEscape("a\x80"
                                   "b"),
                 std::string("a\xEF\xBF\xBD"
                             "b"));
        QCOMPARE(coord::htmlEscape("\xC0\xBC"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
        QCOMPARE(coord::htmlEscape("\xED\xA0\x80"),
                 std::string("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
    }

    void countsInWords() {
        QCOMPARE(coord::countInWords(0), std::string("0"));
        QCOMPARE(coord::countInWords(999), std::string("999"));
        QCOMPARE(coord::countInWords(7664), std::string("7,664"));
        QCOMPARE(coord::countInWords(9'999'999), std::string("9,999,999"));
        QCOMPARE(coord::countInWords(124'439'808), std::string("124.4 million"));
        QCOMPARE(coord::countInWords(1'500'000'000), std::string("1.50 billion"));
        QCOMPARE(coord::countInWords(12'000'000'000), std::string("12.0 billion"));
    }

    void chartCoordinatesByHand() {
        // Rounds 1..3, losses 3.0, 2.5, 2.0. Plot area: x 52..548 (496 wide), y 12..192
        // (180 high). Loss range 2.0..3.0 padded by 8% of 1.0: 1.92..3.08.
        // x(1) = 52, x(2) = 300, x(3) = 548; y(3.0) = 12 + 0.08/1.16*180 = 24.41,
        // y(2.5) = 12 + 0.58/1.16*180 = 102.0, y(2.0) = 12 + 1.08/1.16*180 = 179.59.
        const std::vector<coord::LossPoint> pts = {{1, 3.0}, {2, 2.5}, {3, 2.0}};
        const std::string svg = coord::lossChartSvg(pts);
        QVERIFY2(svg.find("points=\"52.0,24.4 300.0,102.0 548.0,179.6\"") != std::string::npos,
                 svg.c_str());
        QVERIFY(svg.starts_with("<svg id=\"loss-chart\""));
        // Round labels 1, 2, 3 (a step of 0.5 would give halves, which are left out).
        QVERIFY(svg.find(">1</text>") != std::string::npos);
        QVERIFY(svg.find(">3</text>") != std::string::npos);
        QVERIFY(svg.find(">1.5</text>") == std::string::npos);
        // One point: a curve of one vertex and its dot, in the middle of a padded range.
        const std::vector<coord::LossPoint> one = {{4, 2.0}};
        QVERIFY(coord::lossChartSvg(one).find("cx=\"300.0\"") != std::string::npos);
        QVERIFY(coord::lossChartSvg({}).find("No validation loss yet") != std::string::npos);
    }

    void pageOverHttps() {
        auto cfg = directConfig();
        cfg.quorum = 1;
        cfg.validationBatches = 1;
        cfg.validationBatch = 2;
        cfg.samples.prompts = {"The <b>"};
        cfg.samples.tokens = 8;
        cfg.samples.maxSeconds = 1e6;
        DirectCoordinator f(cfg, 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto& c = f.coordinator();
        auto http = f.t().connect();

        auto empty = http->Get("/");
        QVERIFY(empty);
        QCOMPARE(empty->status, 200);
        QVERIFY(empty->get_header_value("Content-Type").starts_with("text/html"));
        QVERIFY(empty->get_header_value("Content-Security-Policy").find("default-src 'none'") !=
                std::string::npos);
        QVERIFY(empty->body.find("No validation loss yet") != std::string::npos);
        QVERIFY(empty->body.find("7,664 parameters</div><div class=\"d\">1 layer, 16 channels") !=
                std::string::npos);

        auto a = f.t().registerClient("secret-device-name");
        auto put = a.http->Put("/v1/clients/self", a.auth(),
                               R"({"display_name": "<script>alert(1)</script>", "team": "A&B"})",
                               "application/json");
        QVERIFY(put && put->status == 200);
        DirectClient direct{a.id, std::move(a.key)};
        std::vector<uint16_t> delta(static_cast<size_t>(c.parameterCount()));
        for (size_t i = 0; i < delta.size(); ++i)
            delta[i] = floatToHalf(0.02f * float(int(i % 7) - 3));
        for (int round = 0; round < 2; ++round) {
            QVERIFY(f.upload(direct, buildResult(f.work(direct), delta, direct.key)).ok());
            c.waitForValidation();
        }

        auto page = http->Get("/runs/" + std::to_string(c.runId()));
        QVERIFY(page);
        QCOMPARE(page->status, 200);
        const std::string& html = page->body;
        QVERIFY(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
        QCOMPARE(count(html, "<script"), size_t{0});
        QVERIFY(html.find("A&amp;B") != std::string::npos);
        QVERIFY(html.find("<svg id=\"loss-chart\"") != std::string::npos);
        QVERIFY(html.find("<b>The &lt;b&gt;</b>") != std::string::npos);  // the sample's prompt
        QCOMPARE(count(html, "<tr class=\"donor\">"), size_t{1});
        QVERIFY(html.find("secret-device-name") == std::string::npos);
        QVERIFY(html.find(a.token) == std::string::npos);
        QVERIFY(html.find("127.0.0.1") == std::string::npos);
        const auto samples = c.samples(c.runId(), 1);
        QCOMPARE(samples.size(), size_t{1});
        QVERIFY(html.find(coord::htmlEscape(samples[0].text)) != std::string::npos);

        // The cache: nothing changed, the same page; a name change shows at once.
        auto again = http->Get("/");
        QVERIFY(again && again->body == html);
        auto rename = a.http->Put("/v1/clients/self", a.auth(), R"({"display_name": "Ada"})",
                                  "application/json");
        QVERIFY(rename && rename->status == 200);
        auto renamed = http->Get("/");
        QVERIFY(renamed && renamed->body.find(">Ada</td>") != std::string::npos);

        auto other = http->Get("/runs/77");
        QVERIFY(other);
        QCOMPARE(other->status, 404);
        QVERIFY(other->get_header_value("Content-Type").starts_with("text/html"));
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorPublicPage)
#include "test_coordinator_public_page.moc"
