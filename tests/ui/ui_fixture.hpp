// Shared by the GUI tests: a ledger with known rows at a fixed clock, and fake Services.
#pragma once

#include "engine_bridge.hpp"
#include "ledger.hpp"
#include "services.hpp"

#include <QTemporaryDir>
#include <QThreadPool>
#include <QtTest>

#include <atomic>
#include <memory>

namespace tandem::uitest {

constexpr int64_t kDayMs = 86400'000;
// 2026-11-22 12:00:00 UTC, a Sunday.
constexpr int64_t kNowMs = 1795348800000;

// Deterministic answers; counts the calls.
class FakeServices final : public ui::Services {
  public:
    std::atomic<int> deviceCalls{0}, bandwidthCalls{0}, statusCalls{0}, standingCalls{0},
        speedCalls{0};
    bool speedFails = false;
    bool bandwidthFails = false;
    core::Problem bandwidthProblem = core::Problem::Unreachable;  // of a failed measurement
    int workUnitSeconds = 0;  // what the coordinator's status says (0: an older one, silent)
    bool withSample = true;   // the status carries what the model wrote
    std::vector<ui::RoundInfo> history;  // the run's rounds; empty: rounds 1..8 and an open 9
    std::string lastUrl;
    // What standing() answers; set before the page asks (read on the thread pool).
    ui::StandingInfo standingAnswer = [] {
        ui::StandingInfo s;
        s.ok = true;
        s.registered = true;
        s.rank = 3;
        s.donorCount = 41;
        s.anonymous = false;
        s.team = QStringLiteral("Foo");
        s.teamRank = 2;
        s.teamCount = 7;
        return s;
    }();

    // Pages query services on the global thread pool (ui/async.hpp); a query still running
    // when a test ends must not outlive this object.
    ~FakeServices() override { QThreadPool::globalInstance()->waitForDone(); }

    ui::DeviceReport detectDevices() override {
        ++deviceCalls;
        ui::DeviceReport r;
        ui::DeviceInfo gpu;
        gpu.id = QStringLiteral("cuda:0");
        gpu.name = QStringLiteral("NVIDIA GeForce GTX 1060");
        gpu.details = QStringLiteral("6.0 GB, compute capability 6.1");
        gpu.usable = false;
        gpu.reason = QStringLiteral("compute capability 6.1; Tandem needs 7.5 or newer");
        ui::DeviceInfo cpu;
        cpu.id = QStringLiteral("cpu");
        cpu.name = QStringLiteral("Test CPU");
        cpu.details = QStringLiteral("8 threads");
        r.devices = {gpu, cpu};
        r.gpuUnavailableReason = QStringLiteral("no GPU with compute capability 7.5 or newer");
        return r;
    }
    ui::BandwidthReport measureBandwidth(const core::Settings& s) override {
        ++bandwidthCalls;
        lastUrl = s.coordinatorUrl;
        ui::BandwidthReport r;
        if (bandwidthFails) {
            r.problem = bandwidthProblem;
            r.error = bandwidthProblem == core::Problem::WrongPin
                          ? QStringLiteral("the public key of 127.0.0.1:9 is not the pinned one")
                          : QStringLiteral("connection refused by 127.0.0.1:9");
            return r;
        }
        r.ok = true;
        r.downMbitPerSecond = 80;
        r.upMbitPerSecond = 20;
        r.latencyMs = 12;
        return r;
    }
    ui::RunInfo runStatus(const core::Settings&) override {
        ++statusCalls;
        ui::RunInfo r;
        r.ok = true;
        r.runId = 1;
        r.round = 9;
        r.model = QStringLiteral("L=2 NH=4 C=128 T=64 V=256");
        r.parameterCount = 1'000'000;
        r.unitMemoryCpuBytes = 3'000'000'000;
        r.unitMemoryGpuBytes = 2'000'000'000;
        r.unitMemoryHostBytes = 1'000'000'000;
        r.activeWorkers = 3;
        r.totalTokens = 123456;
        r.workUnitSeconds = workUnitSeconds;
        // Units of 5 to 500 steps of 4 x 64 byte tokens.
        r.modelConfig = *ModelConfig::parse("tiny");
        r.batch = 4;
        r.seqLen = 64;
        r.innerStepsMin = 5;
        r.innerStepsMax = 500;
        r.tokenBytes = 1;
        r.latestExportPath = QStringLiteral("/srv/exports/run1-v7");
        r.latestExportFormat = QStringLiteral("safetensors");
        r.latestExportVersion = 7;
        r.history = history;
        if (history.empty()) {
            for (int i = 1; i <= 8; ++i)
                r.history.push_back({i, 5.0 - 0.25 * i, 2, 1000});
            r.history.push_back({9, std::nullopt, 0, 0});  // not evaluated yet
        }
        if (withSample) {
            r.sampleVersion = 9;
            r.samplePrompt = QStringLiteral("The ");
            r.sampleText = QStringLiteral("cat <sat> & ") + QString(100, QLatin1Char('x'));
        }
        return r;
    }
    ui::StandingInfo standing(const core::Settings&) override {
        ++standingCalls;
        return standingAnswer;
    }
    // 1,000 tokens/s on 8 CPU threads (96 W by the stated estimate), 0.5 s to load a unit.
    ui::SpeedReport measureSpeed(const core::Settings&, const ui::RunInfo& run) override {
        ++speedCalls;
        ui::SpeedReport r;
        if (speedFails || !run.ok) {
            r.error = QStringLiteral("not enough memory: needs 9 GB, 2 GB free");
            return r;
        }
        r.ok = true;
        r.device = QStringLiteral("cpu");
        r.tokensPerSecond = 1000;
        r.setupSeconds = 0.5;
        r.cpuThreads = 8;
        r.watts = 96;
        return r;
    }
};

// Rows a page test can check by hand:
//   unit 101: cuda:0, trained 2 days ago, 1000 tokens, 3600 s; receipt round 5, credit 10
//   unit 102: cpu, trained yesterday, 2000 tokens, 1800 s; receipt round 6, credit 20
//   unit 103: cpu, training now (not trained)
//   10 samples in the last hour (minutes 1..10 before now): tokens/s 100, 110, ... 190,
//     utilisation 0.5, 60 °C
//   transfers: yesterday down 4 MB weights (unit 102), yesterday up 2 MB result (unit 102),
//     today down 1 MB data, failed
//   events: info, warning, error
// The fixture must be written completely; a failure ends the test program with the reason.
template <class S>
void must(const S& status) {
    if (!status.ok())
        qFatal("fixture: %s", status.error().message.c_str());
}

inline std::unique_ptr<core::Ledger> makeFixtureLedger(const QString& dir) {
    auto ledger = core::Ledger::open((dir + QStringLiteral("/ledger.db")).toStdString());
    if (!ledger)
        qFatal("ledger: %s", ledger.error().message.c_str());
    core::Ledger& l = **ledger;
    auto unit = [&](const char* id, const char* device, int64_t tokens, double seconds,
                    int64_t createdMs) {
        core::WorkUnitRecord u;
        u.id = id;
        u.run = "1";
        u.config = "L=2 NH=4 C=128 T=64";
        u.device = device;
        u.innerSteps = 100;
        u.batchSize = 4;
        u.seqLen = 64;
        u.tokens = tokens;
        u.steps = 100;
        u.computeSeconds = seconds;
        u.lossFirst = 5.5;
        u.lossLast = 4.25;
        u.state = core::WorkUnitState::Training;
        u.createdAtMs = createdMs;
        u.updatedAtMs = createdMs;
        must(l.recordWorkUnit(u));
    };
    auto receipt = [&](const char* id, int64_t round, double credit, int64_t atMs) {
        core::Receipt r;
        r.workUnitId = id;
        r.roundApplied = round;
        r.weight = 1;
        r.credit = credit;
        r.receivedAtMs = atMs;
        r.signature = {1, 2, 3};
        r.body = {'{', '}'};
        must(l.recordReceipt(r));
    };
    unit("101", "cuda:0", 1000, 3600, kNowMs - 2 * kDayMs - 3600'000);
    must(l.recordTransition("101", core::WorkUnitState::Trained, kNowMs - 2 * kDayMs));
    receipt("101", 5, 10, kNowMs - 2 * kDayMs + 60'000);
    unit("102", "cpu", 2000, 1800, kNowMs - kDayMs - 1800'000);
    must(l.recordTransition("102", core::WorkUnitState::Trained, kNowMs - kDayMs));
    receipt("102", 6, 20, kNowMs - kDayMs + 60'000);
    unit("103", "cpu", 500, 60, kNowMs - 600'000);
    for (int k = 1; k <= 10; ++k) {
        core::DeviceSample s;
        s.atMs = kNowMs - (11 - k) * 60'000;
        s.device = "cuda:0";
        s.tokensPerSecond = 90 + 10 * k;
        s.utilisation = 0.5;
        s.temperatureC = 60;
        must(l.recordSample(s));
    }
    auto transfer = [&](int64_t atMs, core::Direction d, const char* purpose, int64_t bytes,
                        bool ok, const char* unitId) {
        core::Transfer t;
        t.atMs = atMs;
        t.direction = d;
        t.purpose = purpose;
        t.bytes = bytes;
        t.durationMs = 2000;
        t.ok = ok;
        t.workUnitId = unitId;
        t.detail = ok ? "" : "connection reset";
        must(l.recordTransfer(t));
    };
    transfer(kNowMs - kDayMs, core::Direction::Down, "weights", 4'000'000, true, "102");
    transfer(kNowMs - kDayMs + 1000, core::Direction::Up, "result", 2'000'000, true, "102");
    transfer(kNowMs - 3600'000, core::Direction::Down, "data", 1'000'000, false, "");
    must(l.recordEvent(kNowMs - 7200'000, core::EventLevel::Info,
                       "registered with the coordinator"));
    must(l.recordEvent(kNowMs - 3600'000, core::EventLevel::Warning,
                       "upload failed: connection reset"));
    must(l.recordEvent(kNowMs - 1800'000, core::EventLevel::Error, "GPU error: out of memory"));
    return std::move(*ledger);
}

}  // namespace tandem::uitest
