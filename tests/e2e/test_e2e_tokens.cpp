// A run on a SentencePiece-tokenized corpus, end to end: `tandem-coordinator tokenizer train`
// makes a 512-token BPE model from the test's text, a coordinator created with --tokenizer
// tokenizes the corpus once into uint16 shards, and two headless workers train on token ranges
// they download by HTTP Range (never the whole shard). The validation loss after the last
// round is clearly below the first.
#include "e2e_harness.hpp"

#include <set>

using namespace tandem;
using namespace tandem::e2e;

class TestE2eTokens : public QObject {
    Q_OBJECT

  private slots:
    void sentencePieceRunLearns() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const auto corpus = corpusArgs(dir);
        QProcess train;
        train.start(TANDEM_COORDINATOR_BIN, toArgs([&] {
                        std::vector<std::string> a = {"tokenizer",    "train",
                                                      "--vocab-size", "512",
                                                      "--out",        (dir / "tok.model").string()};
                        a.insert(a.end(), corpus.begin(), corpus.end());
                        return a;
                    }()));
        QVERIFY(train.waitForFinished(120000));
        QVERIFY2(train.exitCode() == 0, train.readAllStandardError().constData());
        QVERIFY(fs::exists(dir / "tok.model"));

        Coordinator coord;
        std::vector<std::string> args = {
            "--model",       "tiny", "--tokenizer",     (dir / "tok.model").string(),
            "--inner-steps", "40",   "--batch",         "4",
            "--quorum",      "2",    "--round-timeout", "60",
            "--threads",     "1",    "--corpus"};
        args.insert(args.end(), corpus.begin(), corpus.end());
        QVERIFY2(coord.start(dir, args), tail(coord.log).c_str());
        const std::string created = tail(coord.log);
        QVERIFY2(created.find("V=512") != std::string::npos, created.c_str());
        QVERIFY2(created.find("(sentencepiece)") != std::string::npos, created.c_str());

        constexpr int kUnitsPerWorker = 6;
        std::vector<std::unique_ptr<Worker>> workers;
        for (int i = 0; i < 2; ++i) {
            workers.push_back(std::make_unique<Worker>());
            workers.back()->start(coord, dir, "worker" + std::to_string(i),
                                  {"--max-work-units", std::to_string(kUnitsPerWorker)});
        }
        for (auto& w : workers) {
            QVERIFY2(w->wait(300000), tail(w->log).c_str());
            QVERIFY2(w->process.exitCode() == 0, tail(w->log).c_str());
        }
        auto client = coord.client();
        QVERIFY(client);
        net::RunStatus status;
        for (int i = 0; i < 300; ++i) {
            auto st = client->status();
            QVERIFY2(st, st ? "" : st.error().message.c_str());
            status = *st;
            if (!status.history.empty() && status.history.back().valLoss)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        QCOMPARE(status.model.vocabSize, 512);
        QVERIFY2(status.history.size() >= 3,
                 ("closed rounds: " + std::to_string(status.history.size())).c_str());
        const double first = *status.history.front().valLoss;
        const double last = *status.history.back().valLoss;
        qInfo("rounds %zu, validation loss %.4f after round 0 -> %.4f after round %lld",
              status.history.size(), first, last,
              static_cast<long long>(status.history.back().round));
        QVERIFY2(last < first - 0.3,
                 (std::to_string(first) + " -> " + std::to_string(last)).c_str());

        // Each data download was one unit's tokens (2 bytes each), never the whole shard.
        const auto shardBytes = static_cast<int64_t>(
            fs::file_size(coord.stateDir / "data" / "tokens_train_000000.bin"));
        const auto lengths = coord.query("SELECT DISTINCT data_length FROM work_units");
        std::set<int64_t> unitBytes;
        for (const auto& row : lengths)
            unitBytes.insert(2 * std::stoll(row.at(0)));
        int downloads = 0;
        for (auto& w : workers) {
            auto ledger = core::Ledger::open(w->dataDir / "ledger.db");
            QVERIFY(ledger);
            auto transfers = (*ledger)->recentTransfers(1000);
            QVERIFY(transfers);
            for (const auto& t : *transfers) {
                if (t.purpose != "data" || !t.ok)
                    continue;
                ++downloads;
                QVERIFY2(unitBytes.count(t.bytes), std::to_string(t.bytes).c_str());
                QVERIFY(t.bytes < shardBytes);
            }
        }
        QVERIFY(downloads >= 2);
        coord.stop();
    }
};

QTEST_GUILESS_MAIN(TestE2eTokens)
#include "test_e2e_tokens.moc"
