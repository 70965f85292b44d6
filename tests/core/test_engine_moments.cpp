// The AdamW moments carried from one unit to the next stay in the backend (core/unit_runner.hpp):
// written to optimizer.ckpt on the checkpoint clock and when the backend is given back (a pause,
// quitting), not after every unit; and a unit trained from moments kept in memory sends the same
// result, bit for bit, as one whose moments went through the file.
#include "engine_harness.hpp"

#include "checkpoint.hpp"

#include <QTest>

using namespace tandem;
using namespace tandem::testing;

namespace {

struct Run {
    int momentSaves = 0;
    std::optional<int64_t> savedStep;  // optimizer.ckpt's AdamW step count at the end
    std::map<int64_t, std::vector<uint8_t>> accepted;
};

// Three units of H = 6; intervalMs: the checkpoint clock (the test clock stands still);
// pauseAfterFirst: "finish then pause" after unit 1, then resume (the backend is given back).
Run threeUnits(int64_t intervalMs, bool pauseAfterFirst) {
    FakeCoordinator api;
    Harness h(api);
    h.cfg.maxWorkUnits = 3;
    h.cfg.checkpointIntervalMs = intervalMs;
    auto saves = std::make_shared<std::atomic<int>>(0);
    h.cfg.testHook = [saves](const char* point) {
        if (std::string(point) == "moments")
            ++*saves;
    };
    Run out;
    if (!h.make().ok())
        return out;
    if (pauseAfterFirst) {
        // Set while unit 1 trains (without a unit in hand it would pause at once).
        Engine* e = h.engine.get();
        h.recorder.onProgress = [e, set = false](const std::string& id, int64_t) mutable {
            if (id == "1" && !set) {
                set = true;
                e->setFinishThenPause(true);
            }
        };
    }
    h.engine->start();
    if (pauseAfterFirst) {
        if (!h.waitState(EngineState::Paused))
            return out;
        // Paused between units: the moments went to disk with the backend.
        if (!eventually([&] { return saves->load() == 1; }))
            return out;
        h.engine->resume();
    }
    if (!h.waitState(EngineState::Stopped))
        return out;
    out.momentSaves = saves->load();
    if (auto ck = loadCheckpoint(h.dataDir / "optimizer.ckpt"); ck && ck->optimizer)
        out.savedStep = ck->optimizer->step;
    std::lock_guard lock(api.mu);
    out.accepted = api.accepted;
    return out;
}

}  // namespace

class TestEngineMoments : public QObject {
    Q_OBJECT

  private slots:
    void savedOnlyAtTheStopWhenTheClockDoesNotCall() {
        const Run r = threeUnits(5 * 60 * 1000, false);
        QCOMPARE(r.momentSaves, 1);  // at the stop; before, after every unit (3)
        QCOMPARE(r.savedStep, std::optional<int64_t>(18));  // 3 units x 6 steps, all carried
        QCOMPARE(r.accepted.size(), size_t{3});
    }

    void savedAfterEachUnitWhenTheClockCalls() {
        const Run r = threeUnits(0, false);
        QCOMPARE(r.momentSaves, 3);
        QCOMPARE(r.savedStep, std::optional<int64_t>(18));
    }

    // Unit 2 after a pause takes its moments from optimizer.ckpt; without one, from memory. The
    // results of all three units are the same bytes.
    void memoryAndFileCarryAgree() {
        const Run viaMemory = threeUnits(5 * 60 * 1000, false);
        const Run viaFile = threeUnits(5 * 60 * 1000, true);
        QCOMPARE(viaFile.momentSaves, 2);  // at the pause and at the stop
        QCOMPARE(viaMemory.accepted.size(), size_t{3});
        QCOMPARE(viaFile.accepted.size(), size_t{3});
        for (const auto& [id, body] : viaMemory.accepted)
            QVERIFY2(viaFile.accepted.at(id) == body, ("work unit " + std::to_string(id)).c_str());
        QCOMPARE(viaFile.savedStep, std::optional<int64_t>(18));
    }
};

QTEST_GUILESS_MAIN(TestEngineMoments)
#include "test_engine_moments.moc"
