// kill -9 of a worker at random moments of its work units (downloading, training, writing a
// checkpoint, uploading, after the upload before the receipt), many times, against a real
// coordinator over HTTPS. After every restart it goes on; in the end the coordinator holds each
// contribution exactly once, the ledger passes PRAGMA integrity_check, and the ledger's accepted
// units are exactly the coordinator's results for this worker (nothing lost, nothing twice).
// TANDEM_E2E_KILLS sets the number of kills (default 12; the slow variant runs 60).
#include "e2e_harness.hpp"

#include "random.hpp"

#include <csignal>

using namespace tandem;
using namespace tandem::e2e;

namespace {

// The last "state: X" the worker logged before it was killed.
std::string lastState(const fs::path& log) {
    const std::string t = tail(log, 20000);
    const auto p = t.rfind("state: ");
    if (p == std::string::npos)
        return "starting";
    const auto end = t.find_first_of(" \n", p + 7);
    return t.substr(p + 7, end - p - 7);
}

}  // namespace

class TestE2eKill : public QObject {
    Q_OBJECT

  private slots:
    void killNineAtRandomPoints() {
        int kills = 12;
        if (const char* env = std::getenv("TANDEM_E2E_KILLS"))
            kills = std::max(1, std::atoi(env));
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Coordinator coord;
        std::vector<std::string> args = {
            "--model",  "tiny", "--inner-steps",       "40", "--batch",   "4",
            "--quorum", "1",    "--heartbeat-timeout", "60", "--threads", "1"};
        args.push_back("--corpus");
        for (const auto& c : corpusArgs(dir))
            args.push_back(c);
        QVERIFY2(coord.start(dir, args), tail(coord.log).c_str());

        // A kill point at the end of a unit (receipt) needs a whole unit trained and uploaded:
        // in the 300-kill soak on a loaded machine 3 of 30 missed a 60 s wait, and 1 of 30 still
        // missed this one (not explained yet; docs/fuzzing.md).
        const int reachWithinMs = 240000;
        Rng rng(20261122);
        std::map<std::string, int> phases;
        // Every other kill is at a random moment; the others at a named point of the engine
        // (TANDEM_TEST_KILL_AT), so each dangerous moment is hit: mid-download, between a
        // checkpoint file and its progress record, between the result file and the ledger,
        // mid-upload, and after the coordinator accepted the upload but before the receipt was
        // stored.
        const char* points[] = {"download", "checkpoint", "result", "upload", "receipt"};
        for (int k = 0; k < kills; ++k) {
            Worker w;
            std::string killAt;
            if (k % 2 == 1) {
                killAt = points[(k / 2) % 5];
                if (killAt == "checkpoint")
                    killAt += ":" + std::to_string(1 + rng.below(4));
            }
            // Checkpoints every few steps, so kills also land while one is being written.
            w.start(coord, dir, "worker", {"--checkpoint-steps", "3"}, killAt);
            if (killAt.empty()) {
                const int delayMs = 100 + static_cast<int>(rng.below(2400));
                QVERIFY2(!w.wait(delayMs), tail(w.log).c_str());  // still running when killed
                ::kill(static_cast<pid_t>(w.process.processId()), SIGKILL);
                QVERIFY(w.wait(10000));
                ++phases["random (" + lastState(w.log) + ")"];
                std::ofstream(w.log, std::ios::app)
                    << "---- killed (-9) after " << delayMs << " ms\n";
            } else {
                // It kills itself there; if the point is not reached in time, kill it anyway.
                const bool reached = w.wait(reachWithinMs);
                if (!reached) {
                    ::kill(static_cast<pid_t>(w.process.processId()), SIGKILL);
                    QVERIFY(w.wait(10000));
                }
                ++phases[killAt.substr(0, killAt.find(':')) + (reached ? "" : " (not reached)")];
                std::ofstream(w.log, std::ios::app) << "---- killed (-9) at " << killAt << "\n";
            }
            QCOMPARE(w.process.exitStatus(), QProcess::CrashExit);
        }
        std::string summary;
        for (const auto& [phase, n] : phases)
            summary += phase + " " + std::to_string(n) + ", ";
        qInfo("%d kills: %s", kills, summary.c_str());
        for (const auto& [phase, n] : phases)
            QVERIFY2(phase.find("not reached") == std::string::npos, phase.c_str());

        // A last run that completes: two more units, every pending result settled.
        Worker final;
        final.start(coord, dir, "worker", {"--max-work-units", "2"});
        QVERIFY2(final.wait(240000), tail(final.log).c_str());
        QVERIFY2(final.process.exitCode() == 0, tail(final.log).c_str());

        auto ledger = core::Ledger::open(final.dataDir / "ledger.db");
        QVERIFY(ledger);
        auto integrity = (*ledger)->integrityCheck();
        QVERIFY2(integrity.ok(), integrity.ok() ? "" : integrity.error().message.c_str());
        auto rows = (*ledger)->workUnits(100000);
        QVERIFY(rows);
        const net::PublicKey coordKey = coord.publicKey();
        std::set<std::string> ledgerAccepted;
        for (const auto& r : *rows) {
            const auto s = r.unit.state;
            QVERIFY2(s == core::WorkUnitState::Accepted || s == core::WorkUnitState::Rejected ||
                         s == core::WorkUnitState::Abandoned || s == core::WorkUnitState::Failed,
                     ("unit " + r.unit.id + " left in state " + core::toString(s)).c_str());
            if (s != core::WorkUnitState::Accepted)
                continue;
            QVERIFY2(ledgerAccepted.insert(r.unit.id).second, "a unit twice in the ledger");
            auto receipt = (*ledger)->receipt(r.unit.id);
            QVERIFY(receipt && *receipt);
            auto parsed = net::Receipt::fromJson(
                std::string((*receipt)->body.begin(), (*receipt)->body.end()));
            QVERIFY(parsed && parsed->verify(coordKey));
        }
        auto totals = (*ledger)->totals();
        QVERIFY(totals);
        QCOMPARE(totals->workUnitsAccepted, static_cast<int64_t>(ledgerAccepted.size()));
        QCOMPARE(totals->workUnitsPending, int64_t{0});

        // The coordinator's view: each result once, and exactly the ledger's accepted units.
        std::set<std::string> coordinatorResults;
        for (const auto& row : coord.query("SELECT work_unit_id FROM results"))
            QVERIFY2(coordinatorResults.insert(row.at(0)).second, "a result counted twice");
        std::string diff;
        for (const auto& id : coordinatorResults)
            if (!ledgerAccepted.count(id))
                diff += " coordinator-only " + id;
        for (const auto& id : ledgerAccepted)
            if (!coordinatorResults.count(id))
                diff += " ledger-only " + id;
        QVERIFY2(diff.empty(), diff.c_str());
        auto sum = coord.query("SELECT COALESCE(SUM(contributors), 0) FROM rounds");
        QCOMPARE(std::stoll(sum.at(0).at(0)), static_cast<long long>(coordinatorResults.size()));
        QVERIFY(ledgerAccepted.size() >= 2);
        qInfo("accepted %zu units; ledger and coordinator agree", ledgerAccepted.size());
        // Nothing left behind in the data directory.
        QVERIFY(fs::is_empty(final.dataDir / "results"));
        QVERIFY(fs::is_empty(final.dataDir / "work"));
        coord.stop();
    }
};

QTEST_GUILESS_MAIN(TestE2eKill)
#include "test_e2e_kill.moc"
