// Weight deltas end to end (issue 15): a real coordinator with --weight-deltas int8 and a real
// tandem-worker over HTTPS on 127.0.0.1, one unit per round (quorum 1, no overlap), so each unit
// after the first starts from a newer version. The worker downloads the whole weights file once;
// every later unit whose version it does not hold yet costs only its deltas (int8: about one byte
// per parameter, a quarter of the file), counted in the worker's ledger; the weights it rebuilt
// are the coordinator's published file byte for byte.
#include "e2e_harness.hpp"

#include "file_io.hpp"
#include "model.hpp"
#include "weight_delta_file.hpp"

#include <algorithm>

using namespace tandem;
using namespace tandem::e2e;

class TestE2eDeltas : public QObject {
    Q_OBJECT

  private slots:
    void workerDownloadsDeltasAfterTheFirstUnit() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Coordinator coord;
        std::vector<std::string> args = {"--model",         "tiny", "--inner-steps", "8",
                                         "--batch",         "2",    "--quorum",      "1",
                                         "--round-timeout", "60",   "--threads",     "1",
                                         "--weight-deltas", "int8"};
        args.push_back("--corpus");
        for (const auto& c : corpusArgs(dir))
            args.push_back(c);
        QVERIFY2(coord.start(dir, args), tail(coord.log).c_str());

        constexpr int kUnits = 4;
        Worker worker;
        worker.start(coord, dir, "worker",
                     {"--max-work-units", std::to_string(kUnits), "--no-overlap"});
        QVERIFY2(worker.wait(240000), tail(worker.log).c_str());
        QVERIFY2(worker.process.exitCode() == 0, tail(worker.log).c_str());

        auto ledger = core::Ledger::open(worker.dataDir / "ledger.db");
        QVERIFY(ledger);
        auto rows = (*ledger)->workUnits(100);
        QVERIFY(rows);
        QCOMPARE(static_cast<int>(rows->size()), kUnits);
        std::vector<core::WorkUnitRecord> units;
        for (const auto& r : *rows)
            units.push_back(r.unit);
        std::sort(units.begin(), units.end(),
                  [](const auto& a, const auto& b) { return std::stoll(a.id) < std::stoll(b.id); });
        const std::vector<core::Transfer> transfers = (*ledger)->recentTransfers(1000).value();
        auto weightsBytes = [&](const std::string& id) {
            int64_t sum = 0;
            for (const core::Transfer& t : transfers)
                if (t.direction == core::Direction::Down && t.purpose == "weights" &&
                    t.workUnitId == id)
                    sum += t.bytes;
            return sum;
        };

        // The first unit downloads the whole file (4 bytes per parameter and a header).
        const int64_t P = ModelConfig::parse("tiny")->parameterCount();
        const int64_t full = weightsBytes(units[0].id);
        QVERIFY2(full > 4 * P, std::to_string(full).c_str());
        const int64_t delta = weightDeltaFileBytes(WeightDeltaCodec::Int8, P);
        QVERIFY(delta < full / 3);
        // Each later unit: nothing when its version is held already, else the deltas from the
        // version held (the whole file if they would be larger).
        int64_t held = units[0].baseVersion;
        int rebuilt = 0;
        std::string seen;
        std::vector<std::string> lines;  // the worker's log lines for the rebuilt units
        for (size_t i = 1; i < units.size(); ++i) {
            const auto& u = units[i];
            const int64_t got = weightsBytes(u.id);
            seen += "unit " + u.id + " v" + std::to_string(u.baseVersion) + ": " +
                    std::to_string(got) + " B; ";
            int64_t expected = 0;
            if (u.baseVersion > held) {
                const int64_t n = u.baseVersion - held, chain = n * delta;
                expected = chain < full ? chain : full;
                if (chain < full) {
                    ++rebuilt;
                    lines.push_back("work unit " + u.id + ": weights of version " +
                                    std::to_string(u.baseVersion) + " rebuilt from " +
                                    std::to_string(n) + (n == 1 ? " delta (" : " deltas (") +
                                    std::to_string(chain) + " bytes) instead of " +
                                    std::to_string(full) + " bytes");
                }
                held = u.baseVersion;
            }
            QVERIFY2(got == expected, (seen + "expected " + std::to_string(expected)).c_str());
        }
        qInfo("weights bytes down: unit %s (v%lld) %lld B (whole file); %s", units[0].id.c_str(),
              static_cast<long long>(units[0].baseVersion), static_cast<long long>(full),
              seen.c_str());
        QVERIFY2(rebuilt >= 1, seen.c_str());
        const std::string log = tail(worker.log, 1 << 22);
        for (const std::string& line : lines)
            QVERIFY2(log.find(line) != std::string::npos, line.c_str());

        // The weights held, rebuilt from deltas, are the coordinator's published file.
        auto heldInfo = readFile(worker.dataDir / "held_weights.json");
        QVERIFY(heldInfo);
        const std::string info(heldInfo->begin(), heldInfo->end());
        const auto at = info.find("\"sha256\":\"");
        QVERIFY(at != std::string::npos);
        const std::string hex = info.substr(at + 10, 64);
        auto mine = readFile(worker.dataDir / "cache" / (hex + ".weights"));
        auto published =
            readFile(coord.stateDir / "weights" / ("v" + std::to_string(held) + ".ckpt"));
        QVERIFY2(mine, mine ? "" : mine.error().message.c_str());
        QVERIFY2(published, published ? "" : published.error().message.c_str());
        QVERIFY(*mine == *published);
        QVERIFY(info.find("\"version\":" + std::to_string(held)) != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestE2eDeltas)
#include "test_e2e_deltas.moc"
