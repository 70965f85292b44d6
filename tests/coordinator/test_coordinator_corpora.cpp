// Token corpora through the Coordinator (direct calls): llm.c shards are served as token ranges
// across every train shard (each range's SHA-256 checked against the file's bytes read here);
// the _val_ shards or a held-out tail are the validation split; a SentencePiece run stores its
// tokenizer and its shards decode back to the corpus; every bad input (wrong magic, truncated
// shard, token id >= V, uint16 shards with V > 65536, a tokenizer that does not match V) is
// refused with a message naming the problem and leaves no state directory behind.
#include "coordinator.hpp"
#include "corpus.hpp"
#include "crypto.hpp"
#include "file_io.hpp"
#include "token_shard.hpp"
#include "tokenizer.hpp"
#include "tokenizer_training.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <iterator>
#include <map>
#include <set>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

coord::CoordinatorConfig baseConfig(const fs::path& stateDir, const std::string& model) {
    coord::CoordinatorConfig c;
    c.stateDir = stateDir;
    c.model = model;
    c.innerSteps = 8;
    c.minInnerSteps = 2;
    c.batch = 2;
    c.quorum = 100;
    c.backgroundThreads = false;
    c.threads = 1;
    c.maxWorkUnitsPerClient = 1000;
    c.newClientWorkUnits = 1000;
    return c;
}

std::vector<uint16_t> tokens(size_t n, int salt, int V) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; ++i)
        t[i] = static_cast<uint16_t>((i * 31 + static_cast<size_t>(salt) * 7) %
                                     static_cast<size_t>(V));
    return t;
}

void writeShard(const fs::path& path, std::span<const uint16_t> t) {
    QVERIFY(writeFileAtomically(path, llmcShardBytes(t)));
}

std::vector<uint8_t> fileBytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

struct Opened {
    std::unique_ptr<coord::Coordinator> c;
    std::string error;
    std::vector<std::string> log;
    bool logged(const std::string& part) const {
        for (const auto& l : log)
            if (l.find(part) != std::string::npos)
                return true;
        return false;
    }
};

Opened open(const coord::CoordinatorConfig& cfg) {
    Opened o;
    auto c = coord::Coordinator::open(cfg, [&o](const std::string& l) { o.log.push_back(l); });
    if (c)
        o.c = std::move(*c);
    else
        o.error = c.error().message;
    return o;
}

net::Manifest askWork(coord::Coordinator& c, int64_t client) {
    net::WorkRequest w;
    w.device = "cpu";
    auto offer = c.requestWork(client, w.toJson());
    if (!offer.ok() || !offer.value().manifest)
        return {};
    return *offer.value().manifest;
}

int64_t registerClient(coord::Coordinator& c) {
    auto r = c.registerClient(
        net::RegisterRequest{"w", net::SigningKey::generate().value().publicKey(), "t"}.toJson());
    return r.ok() ? r.value().clientId : 0;
}

// Debian's fortunes (the first 1 MB), else generated words of random letters.
std::string corpusText() {
    const fs::path fortunes[] = {"/usr/share/games/fortunes"};
    if (auto t = loadTextCorpus(fortunes); t && t->size() > 1000000)
        return std::string(t->begin(), t->begin() + 1000000);
    std::string s;
    uint64_t x = 7;
    while (s.size() < 400000) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int len = 1 + static_cast<int>((x >> 60) % 8);
        for (int k = 0; k < len; ++k)
            s += static_cast<char>('a' + (x >> (8 + 5 * k)) % 26);
        s += (x >> 50) % 10 == 0 ? ".\n" : " ";
    }
    return s;
}

}  // namespace

class TestCoordinatorCorpora : public QObject {
    Q_OBJECT

  private slots:
    void shardRunAssignsTokenRangesAcrossShards() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "shards");
        const int V = 1000;
        writeShard(dir / "shards" / "fw_train_000000.bin", tokens(3000, 0, V));
        writeShard(dir / "shards" / "fw_train_000001.bin", tokens(500, 1, V));
        writeShard(dir / "shards" / "fw_val_000000.bin", tokens(400, 2, V));
        auto cfg = baseConfig(dir / "state", "L=1,NH=2,C=16,T=16,V=1000");
        cfg.shards = {dir / "shards"};
        Opened o = open(cfg);
        QVERIFY2(o.c, o.error.c_str());
        QVERIFY(o.logged("3500 train tokens, 400 validation tokens (llmc)"));
        QCOMPARE(o.c->model().vocabSize, V);
        QVERIFY(!o.c->tokenizerPath());
        const int64_t client = registerClient(*o.c);
        std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> ranges;
        int64_t total = 0;
        for (int i = 0; i < 100; ++i) {
            const net::Manifest m = askWork(*o.c, client);
            if (m.workUnitId == 0)
                break;
            QCOMPARE(m.dataTokenBytes, 2);
            QCOMPARE(m.dataHeaderBytes, int64_t{1024});
            QCOMPARE(m.dataUrl, "/v1/runs/1/data/" + std::to_string(m.dataShard));
            const fs::path file =
                dir / "shards" / (m.dataShard == 0 ? "fw_train_000000.bin" : "fw_train_000001.bin");
            const int64_t shardTokens = m.dataShard == 0 ? 3000 : 500;
            QVERIFY(m.dataShard == 0 || m.dataShard == 1);
            QVERIFY2(m.dataOffset >= 0 && m.dataOffset + m.dataLength <= shardTokens,
                     (std::to_string(m.dataOffset) + "+" + std::to_string(m.dataLength)).c_str());
            const auto bytes = fileBytes(file);
            const auto range =
                std::span(bytes).subspan(static_cast<size_t>(1024 + 2 * m.dataOffset),
                                         static_cast<size_t>(2 * m.dataLength));
            QCOMPARE(net::toHex(net::sha256(range)), net::toHex(m.dataSha256));
            auto served = o.c->dataShard(1, m.dataShard);
            QVERIFY(served.ok());
            QCOMPARE(fs::canonical(served.value().path), fs::canonical(file));
            QCOMPARE(served.value().bytes, static_cast<int64_t>(bytes.size()));
            ranges[m.dataShard].push_back({m.dataOffset, m.dataLength});
            total += m.dataLength;
        }
        // 8 steps x 2 x 16 = 256 tokens a unit: 11 units in shard 0 (2816 tokens), the tail of
        // 184 skipped, then one of 256 in shard 1, whose other 244 tokens cannot hold another.
        QCOMPARE(ranges.size(), size_t(2));
        QCOMPARE(ranges[0].size(), size_t(11));
        QCOMPARE(ranges[1].size(), size_t(1));
        QCOMPARE(total, int64_t{12 * 256});
        for (auto& [shard, list] : ranges) {
            std::sort(list.begin(), list.end());
            for (size_t i = 1; i < list.size(); ++i)
                QVERIFY(list[i - 1].first + list[i - 1].second <= list[i].first);
        }
        auto unknown = o.c->dataShard(1, 2);
        QVERIFY(!unknown.ok());
        QCOMPARE(unknown.refusal().code, std::string("unknown_shard"));
        // Restart: the shards are mapped again and checked against their rows.
        o.c.reset();
        Opened again = open(cfg);
        QVERIFY2(again.c, again.error.c_str());
        QVERIFY(again.logged("round 0 open"));
    }

    void heldOutTailWithoutValidationShard() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        writeShard(dir / "only.bin", tokens(4000, 3, 300));
        auto cfg = baseConfig(dir / "state", "L=1,NH=2,C=16,T=16,V=300");
        cfg.shards = {dir / "only.bin"};
        Opened o = open(cfg);
        QVERIFY2(o.c, o.error.c_str());
        // 5% of 4000 = 200 tokens held out of the last (only) shard.
        QVERIFY(o.logged("3800 train tokens, 200 validation tokens (llmc)"));
        const int64_t client = registerClient(*o.c);
        const net::Manifest m = askWork(*o.c, client);
        QVERIFY(m.dataOffset + m.dataLength <= 3800);
    }

    void badShardsAreRefusedAndLeaveNoRun_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("defect");  // 0 magic, 1 truncated, 2 token >= V, 3 V > 65536
        QTest::addColumn<QString>("expected");
        QTest::newRow("wrong magic")
            << "L=1,NH=2,C=16,T=16,V=1000" << 0 << "has magic 20240521; expected 20240520";
        QTest::newRow("truncated")
            << "L=1,NH=2,C=16,T=16,V=1000" << 1
            << "says it holds 2000 tokens, which is 5024 bytes, but it has 5023";
        QTest::newRow("token >= V") << "L=1,NH=2,C=16,T=16,V=1000" << 2
                                    << "token 1000 at token offset 1234 (byte 3492) is not below "
                                       "the model's vocabulary size V=1000";
        QTest::newRow("V > 65536") << "L=1,NH=2,C=16,T=16,V=70000" << 3
                                   << "V=70000 does not fit llm.c's uint16 token shards";
    }
    void badShardsAreRefusedAndLeaveNoRun() {
        QFETCH(QString, model);
        QFETCH(int, defect);
        QFETCH(QString, expected);
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "shards");
        writeShard(dir / "shards" / "a_train_0.bin", tokens(1000, 0, 1000));
        auto bad = tokens(2000, 1, 1000);
        if (defect == 2)
            bad[1234] = 1000;
        auto bytes = llmcShardBytes(bad);
        if (defect == 0)
            bytes[0] += 1;
        if (defect == 1)
            bytes.pop_back();
        const fs::path badPath = dir / "shards" / "b_train_1.bin";
        QVERIFY(writeFileAtomically(badPath, bytes));
        for (bool stateDirExists : {false, true}) {
            const fs::path state = dir / "state";
            if (stateDirExists)
                fs::create_directories(state);
            auto cfg = baseConfig(state, model.toStdString());
            cfg.shards = {dir / "shards"};
            Opened o = open(cfg);
            QVERIFY(!o.c);
            QVERIFY2(o.error.find(expected.toStdString()) != std::string::npos, o.error.c_str());
            if (defect != 3)
                QVERIFY2(o.error.find(badPath.string()) != std::string::npos, o.error.c_str());
            // As before the failed create: no directory, or the empty one it was.
            QCOMPARE(fs::exists(state), stateDirExists);
            if (stateDirExists)
                QVERIFY(fs::is_empty(state));
        }
    }

    void sentencePieceRunKeepsItsTokenizer() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const std::string text = corpusText();
        QVERIFY(writeFileAtomically(
            dir / "corpus.txt",
            std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
        coord::TokenizerTraining training{{dir / "corpus.txt"}, 400, dir / "tok.model"};
        auto trained = coord::trainTokenizer(training);
        QVERIFY2(trained, trained ? "" : trained.error().message.c_str());
        auto loaded = loadTokenizer(dir / "tok.model");
        QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
        const Tokenizer* tok = loaded->get();
        QCOMPARE(tok->kind(), std::string("sentencepiece"));
        QCOMPARE(tok->vocabSize(), 400);

        // A --model naming another V is refused, naming both, and leaves nothing.
        auto mismatch = baseConfig(dir / "state", "L=1,NH=2,C=16,T=16,V=300");
        mismatch.corpus = {dir / "corpus.txt"};
        mismatch.tokenizer = dir / "tok.model";
        Opened refused = open(mismatch);
        QVERIFY(!refused.c);
        QVERIFY2(refused.error.find("has V=400 tokens, but --model 'L=1,NH=2,C=16,T=16,V=300' "
                                    "has V=300") != std::string::npos,
                 refused.error.c_str());
        QVERIFY(!fs::exists(dir / "state"));

        auto cfg = baseConfig(dir / "state", "L=1,NH=2,C=16,T=16");
        cfg.corpus = {dir / "corpus.txt"};
        cfg.tokenizer = dir / "tok.model";
        Opened o = open(cfg);
        QVERIFY2(o.c, o.error.c_str());
        QCOMPARE(o.c->model().vocabSize, 400);
        const auto kept = o.c->tokenizerPath();
        QVERIFY(kept);
        QCOMPARE(*kept, dir / "state" / "data" / "tokenizer.model");
        QCOMPARE(fileBytes(*kept), fileBytes(dir / "tok.model"));
        // The train and validation shards, read as llm.c shards and decoded, are the corpus.
        std::string decoded;
        for (const char* name : {"tokens_train_000000.bin", "tokens_val_000000.bin"}) {
            auto shard = TokenShard::openLlmc(dir / "state" / "data" / name);
            QVERIFY2(shard, shard ? "" : shard.error().message.c_str());
            const TokenView t = shard->tokens();
            std::vector<int32_t> ids(static_cast<size_t>(t.count));
            for (int64_t i = 0; i < t.count; ++i)
                ids[static_cast<size_t>(i)] = t[i];
            QVERIFY(firstTokenAtOrAbove(t, 400) < 0);
            decoded += tok->decode(ids);
        }
        QVERIFY2(decoded == text, "the token shards do not decode to the corpus");
        // Byte fallback: text the tokenizer never saw still encodes and decodes to itself.
        const std::string unseen = "\xc3\xa9t\xc3\xa9 \xe2\x82\xac 42\t\x01";
        auto ids = tok->encode(unseen);
        QVERIFY(ids);
        QCOMPARE(tok->decode(*ids), unseen);

        const int64_t client = registerClient(*o.c);
        const net::Manifest m = askWork(*o.c, client);
        QCOMPARE(m.dataTokenBytes, 2);
        QCOMPARE(m.model.vocabSize, 400);
    }

    void tokenizerInputsAreChecked() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        QVERIFY(writeFileAtomically(dir / "not.model", std::vector<uint8_t>(100, 'x')));
        auto cfg = baseConfig(dir / "state", "L=1,NH=2,C=16,T=16");
        cfg.corpus = {dir / "not.model"};
        cfg.tokenizer = dir / "not.model";
        Opened o = open(cfg);
        QVERIFY(!o.c);
        QVERIFY2(o.error.find("is neither an llm.c tokenizer file nor a SentencePiece model") !=
                     std::string::npos,
                 o.error.c_str());
        QVERIFY(!fs::exists(dir / "state"));
        auto small = coord::trainTokenizer({{dir / "not.model"}, 100, dir / "t.model"});
        QVERIFY(!small);
        QVERIFY2(
            small.error().message.find("vocabulary size 100 is out of range") != std::string::npos,
            small.error().message.c_str());
        auto nowhere = coord::trainTokenizer({{dir / "not.model"}, 400, dir / "no" / "t.model"});
        QVERIFY(!nowhere);
        QVERIFY(nowhere.error().message.find("does not exist") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorCorpora)
#include "test_coordinator_corpora.moc"
