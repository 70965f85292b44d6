// What the model writes: the positions a sampling pass costs (hand-worked), the samples the
// coordinator stores after each version against samples written again here from that version's
// published weights, the newest one in the status, the switch-off when sampling would be too
// slow, and GET /v1/runs/{run}/samples with its refusals.
#include "checkpoint.hpp"
#include "codec.hpp"
#include "direct.hpp"
#include "samples.hpp"

#include <nlohmann/json.hpp>

#include <QtTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

void uploadRounds(DirectCoordinator& f, int rounds) {
    auto a = f.registerClient("a");
    std::vector<uint16_t> delta(static_cast<size_t>(f.coordinator().parameterCount()));
    for (size_t i = 0; i < delta.size(); ++i)
        delta[i] = floatToHalf(0.02f * float(int(i % 7) - 3));
    for (int round = 0; round < rounds; ++round) {
        QVERIFY(f.upload(a, buildResult(f.work(a), delta, a.key)).ok());
        f.coordinator().waitForValidation();  // else only the newest queued version is sampled
    }
}

coord::CoordinatorConfig sampleConfig() {
    auto cfg = directConfig();
    cfg.quorum = 1;
    cfg.validationBatches = 1;
    cfg.validationBatch = 2;
    cfg.samples.prompts = {"ab", "The cat"};
    cfg.samples.tokens = 12;
    cfg.samples.maxSeconds = 1e6;
    return cfg;
}

}  // namespace

class TestCoordinatorSamples : public QObject {
    Q_OBJECT

  private slots:
    void samplingPositionsHandWorked() {
        const ModelConfig model = *ModelConfig::parse("L=1,NH=2,C=16,T=16");
        // Prompt of 3: contexts 3, 4, 5, 6; prompt of 15: 15, 16, 16, 16 (capped at T).
        const std::vector<int64_t> prompts = {3, 15};
        QCOMPARE(coord::samplingPositions(model, prompts, 4), int64_t{18 + 63});
        QCOMPARE(coord::samplingPositions(model, prompts, 0), int64_t{0});
    }

    void storedSamplesAreThoseOfThePublishedVersion() {
        const auto cfg = sampleConfig();
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        uploadRounds(f, 2);
        auto& c = f.coordinator();
        const auto stored = c.samples(c.runId(), 100);
        QCOMPARE(stored.size(), size_t{4});  // versions 2 and 1, two prompts each
        const auto bytes = makeByteTokenizer();
        for (size_t i = 0; i < stored.size(); ++i) {
            const int64_t version = i < 2 ? 2 : 1;
            QCOMPARE(stored[i].version, version);
            QCOMPARE(stored[i].prompt, cfg.samples.prompts[i % 2]);
            auto ck = loadCheckpoint(
                f.t().stateDir() / "weights" / ("v" + std::to_string(version) + ".ckpt"),
                c.model());
            QVERIFY(ck);
            auto again =
                coord::writeSamples(c.model(), ck->parameters, *bytes, cfg.samples, version, 1);
            QVERIFY(again);
            QCOMPARE(stored[i].text, (*again)[i % 2].text);
        }
        // 12 byte tokens each, shown as valid UTF-8 (a stray byte is one U+FFFD, 3 bytes).
        for (const auto& s : stored)
            QVERIFY(!s.text.empty() && s.text.size() <= 36);
        const auto status = c.status();
        QVERIFY(status.latestSample);
        QCOMPARE(status.latestSample->version, int64_t{2});
        QCOMPARE(status.latestSample->prompt, std::string("ab"));
        QCOMPARE(status.latestSample->text, stored[0].text);
        // It survives the status's JSON.
        auto parsed = net::RunStatus::fromJson(status.toJson());
        QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
        QCOMPARE(parsed->latestSample, status.latestSample);
        QCOMPARE(c.samples(c.runId(), 1).size(), size_t{1});
        QVERIFY(c.samples(c.runId() + 1, 10).empty());
    }

    void onlyTheNewestQueuedVersionIsSampled() {
        DirectCoordinator f(sampleConfig());
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        auto a = f.registerClient("a");
        // Small, and not zero: the gate refuses an all-zero delta.
        std::vector<uint16_t> delta(static_cast<size_t>(f.coordinator().parameterCount()));
        for (size_t i = 0; i < delta.size(); ++i)
            delta[i] = floatToHalf(1e-4f * float(int(i % 7) - 3));
        for (int round = 0; round < 3; ++round)
            QVERIFY(f.upload(a, buildResult(f.work(a), delta, a.key)).ok());
        f.coordinator().waitForValidation();
        const auto stored = f.coordinator().samples(f.coordinator().runId(), 100);
        QCOMPARE(stored.size(), size_t{2});
        QCOMPARE(stored[0].version, int64_t{3});
        QCOMPARE(f.coordinator().status().history.size(), size_t{3});
        for (const auto& h : f.coordinator().status().history)
            QVERIFY(h.valLoss);  // every version still gets its loss
    }

    void noSamplesWhenTheyWouldTakeTooLong() {
        auto cfg = sampleConfig();
        cfg.samples.maxSeconds = 1e-9;
        DirectCoordinator f(cfg);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        uploadRounds(f, 2);
        auto& c = f.coordinator();
        QVERIFY(c.samples(c.runId(), 10).empty());
        QVERIFY(!c.status().latestSample);
        QVERIFY(f.logged("samples are off for this model"));
        QVERIFY(!net::RunStatus::fromJson(c.status().toJson())->latestSample);
    }

    void servedOverHttps() {
        DirectCoordinator f(sampleConfig(), 200000, true);
        QVERIFY2(f.t().ok(), f.t().error().c_str());
        uploadRounds(f, 1);
        const int64_t run = f.coordinator().runId();
        auto http = f.t().connect();
        auto res = http->Get("/v1/runs/" + std::to_string(run) + "/samples?limit=1");
        QVERIFY(res);
        QCOMPARE(res->status, 200);
        const auto j = nlohmann::json::parse(res->body);
        QCOMPARE(j["samples"].size(), size_t{1});
        QCOMPARE(j["samples"][0]["version"].get<int64_t>(), int64_t{1});
        QCOMPARE(j["samples"][0]["prompt"].get<std::string>(), std::string("ab"));
        QCOMPARE(j["samples"][0]["text"].get<std::string>(),
                 f.coordinator().samples(run, 1)[0].text);
        auto all = http->Get("/v1/runs/" + std::to_string(run) + "/samples");
        QVERIFY(all && all->status == 200);
        QCOMPARE(nlohmann::json::parse(all->body)["samples"].size(), size_t{2});
        for (const char* bad : {"limit=0", "limit=x", "limit=-1", "limit=99999"}) {
            auto r = http->Get("/v1/runs/" + std::to_string(run) + "/samples?" + bad);
            QVERIFY(r);
            QCOMPARE(r->status, 400);
        }
        auto other = http->Get("/v1/runs/" + std::to_string(run + 1) + "/samples");
        QVERIFY(other);
        QCOMPARE(other->status, 404);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorSamples)
#include "test_coordinator_samples.moc"
