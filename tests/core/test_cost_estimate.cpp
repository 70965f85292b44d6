// The donor's cost estimate (core/cost_estimate) against hand-worked figures, the unit sizing it
// shares with the coordinator (base/unit_sizing), and the speed test (core/speed_test) on a
// backend that counts its calls and on the real CPU backend.
#include "cost_estimate.hpp"
#include "speed_test.hpp"

#include "backend.hpp"
#include "model.hpp"
#include "weight_delta_file.hpp"

#include <QtTest>

#include <chrono>
#include <thread>

using namespace tandem;
using namespace tandem::core;

namespace {

// P = 1000, B x T = 64, 30 s units of 5 to 50 steps, 2-byte tokens, 1,000 tokens/s.
CostInputs handWorked() {
    CostInputs in;
    in.parameterCount = 1000;
    in.sizing = {64, 30, 5, 50};
    in.tokenBytes = 2;
    in.tokensPerSecond = 1000;
    in.setupSeconds = 0.5;
    in.downMbitPerSecond = 1;
    in.upMbitPerSecond = 0.01;
    in.latencyMs = 50;
    in.hoursPerDay = 8;
    in.deviceWatts = 100;
    in.pricePerKwh = 0.30;
    return in;
}

// A backend whose steps take a known time and which counts them; nothing is computed.
class CountingBackend : public Backend {
  public:
    int forwards = 0, allocations = 0;
    std::chrono::milliseconds firstStep{0}, laterSteps{0};
    Status refuse;  // what canRun answers

    std::string name() const override { return "counting"; }
    MemoryEstimate estimateMemory(const ModelConfig&, int, int) const override { return {}; }
    Status canRun(const ModelConfig&, int, int) const override { return refuse; }
    Status allocate(const ModelConfig&, int, int) override {
        ++allocations;
        return {};
    }
    Status loadParameters(std::span<const float>) override { return {}; }
    Status storeParameters(std::span<float>) const override { return {}; }
    Status storeGradients(std::span<float>) const override { return {}; }
    Status loadOptimizerState(const OptimizerState&) override { return {}; }
    Expected<OptimizerState> storeOptimizerState() const override { return OptimizerState{}; }
    Expected<float> forward(std::span<const int32_t>, std::span<const int32_t>, int, int) override {
        std::this_thread::sleep_for(forwards++ == 0 ? firstStep : laterSteps);
        return 1.0f;
    }
    Status storeProbabilities(int, int, std::span<float>) const override { return {}; }
    Status backward() override { return {}; }
    Expected<StepStats> adamwStep(const AdamWConfig&, float) override { return StepStats{}; }
    Expected<EncodeStats> encodePseudoGradient(std::span<const float>,
                                               std::span<uint16_t>) override {
        return EncodeStats{};
    }
};

}  // namespace

class TestCostEstimate : public QObject {
    Q_OBJECT

  private slots:
    void handWorkedUnitAndDay() {
        const CostEstimate c = estimateCosts(handWorked());
        QCOMPARE(c.innerSteps, 50);  // 1000 x 30 / 64 = 468.75 steps, capped at 50
        QCOMPARE(c.tokensPerUnit, int64_t{3200});
        QCOMPARE(c.downloadBytesPerUnit, int64_t{4000 + 6400 + kManifestBytes});
        QCOMPARE(c.uploadBytesPerUnit, int64_t{2000 + 128});
        QVERIFY(qFuzzyCompare(c.downloadSecondsPerUnit, 11936 * 8 / 1e6));
        QVERIFY(qFuzzyCompare(c.uploadSecondsPerUnit, 1.7024));
        QVERIFY(qFuzzyCompare(c.trainSecondsPerUnit, 3.2));
        // 4 round trips of 50 ms, the download, 0.5 s loading, 3.2 s training; the 1.7 s upload
        // overlaps them.
        const double perUnit = 0.2 + 0.095488 + 0.5 + 3.2;
        QVERIFY(qFuzzyCompare(c.secondsPerUnit, perUnit));
        QVERIFY(qFuzzyCompare(c.unitsPerDay, 8 * 3600 / perUnit));
        QVERIFY(qFuzzyCompare(c.downloadBytesPerDay, 8 * 3600 / perUnit * 11936));
        QVERIFY(qFuzzyCompare(c.uploadBytesPerDay, 8 * 3600 / perUnit * 2128));
        QVERIFY(qFuzzyCompare(c.trainingHoursPerDay, 8 * 3.2 / perUnit));
        QVERIFY(qFuzzyCompare(c.kwhPerDay, 0.1 * 8 * 3.2 / perUnit));
        QVERIFY(qFuzzyCompare(c.costPerDay, 0.03 * 8 * 3.2 / perUnit));
    }

    void slowUplinkSetsThePace() {
        CostInputs in = handWorked();
        in.upMbitPerSecond = 0.001;  // 2,128 bytes take 17.024 s
        const CostEstimate c = estimateCosts(in);
        QVERIFY(qFuzzyCompare(c.secondsPerUnit, 17.024));
        QVERIFY(qFuzzyCompare(c.unitsPerDay, 8 * 3600 / 17.024));
        // Training hours fall with the pace: the device waits for the link.
        QVERIFY(qFuzzyCompare(c.trainingHoursPerDay, 8 * 3.2 / 17.024));
    }

    // A run with int8 results (GET /v1/status says so) sends P bytes and a 4-byte scale per 256
    // values: for P = 1000, 1000 + 4 x 4 + the 128-byte header, and a slow uplink's pace follows.
    void int8ResultsShrinkTheUpload() {
        CostInputs in = handWorked();
        in.resultEncoding = net::kEncodingInt8;
        in.upMbitPerSecond = 0.001;
        const CostEstimate c = estimateCosts(in);
        QCOMPARE(c.uploadBytesPerUnit, int64_t{1000 + 16 + 128});
        QVERIFY(qFuzzyCompare(c.secondsPerUnit, 1144 * 8 / 1000.0));
        QVERIFY(qFuzzyCompare(c.uploadBytesPerDay, 8 * 3600 / (1144 * 8 / 1000.0) * 1144));
    }

    // With weight deltas the steady state downloads one delta a unit instead of the fp32 file:
    // int8, P + a 4-byte scale per 256 values + the delta file's header.
    void weightDeltasShrinkTheDownload() {
        CostInputs in = handWorked();
        in.weightDeltas = WeightDeltaCodec::Int8;
        const CostEstimate c = estimateCosts(in);
        const int64_t delta = weightDeltaFileBytes(WeightDeltaCodec::Int8, 1000);
        QVERIFY(delta >= 1016 && delta < 1016 + 256);
        QCOMPARE(c.downloadBytesPerUnit, delta + 6400 + kManifestBytes);
        in.weightDeltas = WeightDeltaCodec::Fp16;
        QCOMPARE(estimateCosts(in).downloadBytesPerUnit,
                 weightDeltaFileBytes(WeightDeltaCodec::Fp16, 1000) + 6400 + kManifestBytes);
    }

    void dailyCapsLimitTheDay() {
        CostInputs in = handWorked();
        const double byHours = 8 * 3600 / (0.2 + 0.095488 + 0.5 + 3.2);  // 7,208 units
        in.dailyDownloadCapBytes = 11936 * 1000;                         // 1,000 units
        CostEstimate c = estimateCosts(in);
        QVERIFY(c.capped);
        QVERIFY(qFuzzyCompare(c.unitsPerDay, 1000.0));
        QVERIFY(qFuzzyCompare(c.uploadBytesPerDay, 1000.0 * 2128));
        QVERIFY(qFuzzyCompare(c.trainingHoursPerDay, 1000 * 3.2 / 3600));
        in.dailyUploadCapBytes = 2128 * 500;  // the tighter one wins: 500 units
        QVERIFY(qFuzzyCompare(estimateCosts(in).unitsPerDay, 500.0));
        in.dailyDownloadCapBytes = in.dailyUploadCapBytes = int64_t{1} << 50;  // never reached
        c = estimateCosts(in);
        QVERIFY(!c.capped);
        QVERIFY(qFuzzyCompare(c.unitsPerDay, byHours));
    }

    void scheduleGivesTheHours() {
        RulesConfig r;
        QCOMPARE(scheduledHoursPerDay(r), 24.0);  // no schedule: any time
        r.useTimeWindows = true;
        // 18:00-08:00 (past midnight, 14 h) on weekdays: 70 h a week; 10:00-12:00 on Saturday
        // and Sunday: 4 h. 74 / 7 = 10.571 h a day.
        r.timeWindows = {{TimeWindow::kWeekdays, 18 * 60, 8 * 60}, {0x60, 10 * 60, 12 * 60}};
        QVERIFY(qFuzzyCompare(scheduledHoursPerDay(r), 74.0 / 7));
        r.timeWindows = {{TimeWindow::kEveryDay, 0, 0}};  // a whole day, every day
        QCOMPARE(scheduledHoursPerDay(r), 24.0);
    }

    void sizingFollowsTheCoordinatorsRule() {
        CostInputs in = handWorked();
        in.tokensPerSecond = 5;  // 5 x 30 / 64 = 2.3 steps: raised to the minimum of 5
        QCOMPARE(estimateCosts(in).innerSteps, 5);
        in.tokensPerSecond = 20;  // 9.375 steps: 9
        QCOMPARE(estimateCosts(in).innerSteps, 9);
        QVERIFY(qFuzzyCompare(estimateCosts(in).trainSecondsPerUnit, 9 * 64 / 20.0));
        // A slow uplink: 2,128 bytes at 62.5 B/s take 34.05 s, so the coordinator makes units of
        // 1.1 x that: 37.45 s x 20 / 64 = 11.7 steps.
        in.upMbitPerSecond = 0.0005;
        QCOMPARE(estimateCosts(in).innerSteps, 11);
        in.upMbitPerSecond = 0.01;
        QCOMPARE(innerStepsFor({64, 30, 5, 50}, 20), 9);
        // A 10,000-byte result at 100 B/s takes 100 s: the unit lasts 110 s, 110 x 20 / 64 =
        // 34.4 steps; at 1 MB/s the 30 s target wins; at 10 B/s the cap of 50.
        QCOMPARE(innerStepsFor({64, 30, 5, 50, 10000}, 20, 100), 34);
        QCOMPARE(innerStepsFor({64, 30, 5, 50, 10000}, 20, 1e6), 9);
        QCOMPARE(innerStepsFor({64, 30, 5, 50, 10000}, 20, 10), 50);
        QCOMPARE(innerStepsFor({64, 30, 5, 50, 10000}, 20, 0), 9);  // uplink unknown
    }

    void unknownFiguresGiveNoGuess() {
        CostInputs in = handWorked();
        in.tokensPerSecond = 0;  // not measured: the coordinator's maximum, no time or day
        CostEstimate c = estimateCosts(in);
        QCOMPARE(c.innerSteps, 50);
        QCOMPARE(c.downloadBytesPerUnit, int64_t{4000 + 6400 + kManifestBytes});
        QCOMPARE(c.secondsPerUnit, 0.0);
        QCOMPARE(c.unitsPerDay, 0.0);
        in = handWorked();
        in.deviceWatts = 0;  // no power figure: no energy, no money
        c = estimateCosts(in);
        QCOMPARE(c.kwhPerDay, 0.0);
        QCOMPARE(c.costPerDay, 0.0);
        QVERIFY(c.unitsPerDay > 0);
        in = handWorked();
        in.pricePerKwh = 0;
        c = estimateCosts(in);
        QVERIFY(c.kwhPerDay > 0);
        QCOMPARE(c.costPerDay, 0.0);
    }

    void speedTestTimesStepsAfterTheWarmUp() {
        const ModelConfig model = *ModelConfig::parse("tiny");
        CountingBackend b;
        b.firstStep = std::chrono::milliseconds(400);  // the warm-up: must not be timed
        b.laterSteps = std::chrono::milliseconds(10);
        SpeedTestOptions o;
        o.minSeconds = 0.05;
        o.maxSteps = 50;
        auto r = measureTrainingSpeed(b, model, 2, 16, o);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(b.allocations, 1);
        QCOMPARE(b.forwards, r->timedSteps + 1);
        QVERIFY(r->timedSteps >= 1);
        // Each timed step sleeps 10 ms at least: never faster than 32 tokens / 10 ms.
        QVERIFY(r->tokensPerSecond <= 32 / 0.010);
        QVERIFY(qFuzzyCompare(r->tokensPerSecond, 32.0 * r->timedSteps / r->timedSeconds));
        QVERIFY(r->timedSeconds < 0.4);  // the 400 ms warm-up is not in it
    }

    void speedTestStopsAtMaxSteps() {
        CountingBackend b;
        SpeedTestOptions o;
        o.minSeconds = 1000;
        o.maxSteps = 3;
        auto r = measureTrainingSpeed(b, *ModelConfig::parse("tiny"), 1, 8, o);
        QVERIFY(r.ok());
        QCOMPARE(r->timedSteps, 3);
        QCOMPARE(b.forwards, 4);
    }

    void speedTestRefusals() {
        CountingBackend b;
        b.refuse = Error{"needs 9 GB, 2 GB free"};
        const ModelConfig tiny = *ModelConfig::parse("tiny");
        auto r = measureTrainingSpeed(b, tiny, 8, 64);
        QVERIFY(!r);
        QCOMPARE(QString::fromStdString(r.error().message), QString("needs 9 GB, 2 GB free"));
        QCOMPARE(b.allocations, 0);
        b.refuse = {};
        QVERIFY(!measureTrainingSpeed(b, tiny, 8, 65));  // T beyond the model's 64
        QVERIFY(!measureTrainingSpeed(b, tiny, 0, 64));
        QCOMPARE(b.allocations, 0);
    }

    void speedTestOnTheCpuBackend() {
        auto backend = makeCpuBackend("cpu", 1);
        QVERIFY(backend.ok());
        SpeedTestOptions o;
        o.minSeconds = 0.2;
        auto r = measureTrainingSpeed(**backend, *ModelConfig::parse("tiny"), 2, 64, o);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY(r->timedSteps >= 1 && r->tokensPerSecond > 0 && r->setupSeconds > 0);
    }
};

QTEST_APPLESS_MAIN(TestCostEstimate)
#include "test_cost_estimate.moc"
