// llm.c token shards: shards written by an independent Python writer (llmc_shards.py, numpy,
// by llm.c's rules) are read back token by token; shards Tandem writes are read by the Python
// reader; each malformed shard is refused with a message that says what was found; TokenView
// and the sampler over uint16 tokens, with hand-worked values.
#include "corpus.hpp"
#include "file_io.hpp"
#include "token_shard.hpp"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <sstream>
#include <string>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

const char* kScript = TANDEM_SOURCE_DIR "/tests/kernels/llmc_shards.py";

bool havePythonNumpy() {
    QProcess p;
    p.start("/usr/bin/python3", {"-c", "import numpy"});
    return p.waitForFinished(30000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

QString python(const QStringList& args, int* exitCode) {
    QProcess p;
    p.start("/usr/bin/python3", QStringList{kScript} + args);
    p.waitForFinished(120000);
    *exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    return QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
}

std::vector<int32_t> listed(const std::string& text) {
    std::vector<int32_t> out;
    std::istringstream in(text);
    int64_t v = 0;
    while (in >> v)
        out.push_back(static_cast<int32_t>(v));
    return out;
}

}  // namespace

class TestTokenShard : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!havePythonNumpy())
            QSKIP("/usr/bin/python3 with numpy is not installed (python3-numpy)");
    }

    void pythonShardsReadBackTokenByToken() {
        QTemporaryDir tmp;
        int rc = 0;
        const QString out = python({"write", tmp.path()}, &rc);
        QVERIFY2(rc == 0, qPrintable(out));
        const fs::path dir = tmp.path().toStdString();
        for (int i = 0; i < 4; ++i) {
            const std::string stem = "shard_0" + std::to_string(i);
            auto shard = TokenShard::openLlmc(dir / (stem + ".bin"));
            QVERIFY2(shard, shard ? "" : shard.error().message.c_str());
            std::ifstream in(dir / (stem + ".txt"));
            std::stringstream ss;
            ss << in.rdbuf();
            const auto expected = listed(ss.str());
            const TokenView t = shard->tokens();
            QCOMPARE(t.width, 2);
            QCOMPARE(shard->headerBytes(), int64_t{1024});
            QCOMPARE(t.count, static_cast<int64_t>(expected.size()));
            for (int64_t k = 0; k < t.count; ++k)
                if (t[k] != expected[static_cast<size_t>(k)])
                    QFAIL(qPrintable(QString("%1 token %2: read %3, written %4")
                                         .arg(QString::fromStdString(stem))
                                         .arg(k)
                                         .arg(t[k])
                                         .arg(expected[static_cast<size_t>(k)])));
        }
    }

    void tandemShardsReadByPython() {
        QTemporaryDir tmp;
        const std::vector<uint16_t> tokens = {0, 1, 255, 256, 50256, 65535, 12345, 7};
        const fs::path path = fs::path(tmp.path().toStdString()) / "mine.bin";
        QVERIFY(writeFileAtomically(path, llmcShardBytes(tokens)));
        int rc = 0;
        const QString out = python({"read", QString::fromStdString(path.string())}, &rc);
        QVERIFY2(rc == 0, qPrintable(out));
        const auto back = listed(out.toStdString());
        QCOMPARE(back, std::vector<int32_t>(tokens.begin(), tokens.end()));
    }

    void malformedShardsAreRefused() {
        QTemporaryDir tmp;
        int rc = 0;
        const QString out = python({"write", tmp.path()}, &rc);
        QVERIFY2(rc == 0, qPrintable(out));
        const fs::path dir = tmp.path().toStdString();
        const std::pair<const char*, const char*> cases[] = {
            {"bad_magic.bin", "has magic 20240521; expected 20240520"},
            {"bad_version.bin", "has version 2; expected 1"},
            {"bad_llama3.bin", "llama-3 format (magic 20240801, uint32 tokens)"},
            {"bad_count.bin", "says it holds 65 tokens, which is 1154 bytes, but it has 1152"},
            {"bad_truncated.bin", "says it holds 64 tokens, which is 1152 bytes, but it has 1149"},
            {"bad_short.bin", "has 100 bytes, fewer than llm.c's 1024-byte header"},
        };
        for (const auto& [file, message] : cases) {
            auto shard = TokenShard::openLlmc(dir / file);
            QVERIFY2(!shard, file);
            QVERIFY2(shard.error().message.find(message) != std::string::npos,
                     shard.error().message.c_str());
            QVERIFY2(shard.error().message.find(file) != std::string::npos,
                     shard.error().message.c_str());
        }
        auto missing = TokenShard::openLlmc(dir / "none.bin");
        QVERIFY(!missing);
        QVERIFY(missing.error().message.find("none.bin") != std::string::npos);
    }

    void tokenViewReadsLittleEndian() {
        const uint8_t bytes[] = {0x34, 0x12, 0xff, 0xff, 0x00, 0x01};
        const TokenView t(bytes, 3, 2);
        QCOMPARE(t[0], 0x1234);
        QCOMPARE(t[1], 65535);
        QCOMPARE(t[2], 256);
        QCOMPARE(t.slice(1, 2)[0], 65535);
        QCOMPARE(t.slice(1, 2).bytes().size(), size_t(4));
        QCOMPARE(firstTokenAtOrAbove(t, 65535), int64_t{1});
        QCOMPARE(firstTokenAtOrAbove(t, 4660), int64_t{0});
        QCOMPARE(firstTokenAtOrAbove(t, 4661), int64_t{1});
        QCOMPARE(firstTokenAtOrAbove(t, 65536), int64_t{-1});
        const std::vector<uint8_t> text = {'a', 'b'};
        const TokenView b(text);
        QCOMPARE(b.width, 1);
        QCOMPARE(b[1], int32_t{'b'});
    }

    // Over uint16 tokens i*7 (all distinct), every window is T+1 consecutive tokens of the
    // sequence: inputs t+1 equal targets t, and the window's first token names its start.
    void samplerDrawsConsecutiveTokenWindows() {
        std::vector<uint16_t> ids(3000);
        for (size_t i = 0; i < ids.size(); ++i)
            ids[i] = static_cast<uint16_t>(i * 7);
        const auto file = llmcShardBytes(ids);
        const TokenView t(file.data() + kLlmcHeaderBytes, static_cast<int64_t>(ids.size()), 2);
        BatchSampler sampler(t, 42);
        const int B = 4, T = 16;
        std::vector<int32_t> in(B * T), out(B * T);
        for (int draw = 0; draw < 20; ++draw) {
            sampler.next(B, T, in, out);
            for (int b = 0; b < B; ++b) {
                const int32_t first = in[b * T];
                QCOMPARE(first % 7, 0);
                const int start = first / 7;
                QVERIFY(start + T < static_cast<int>(ids.size()));
                for (int k = 0; k < T; ++k) {
                    QCOMPARE(in[b * T + k], int32_t{ids[start + k]});
                    QCOMPARE(out[b * T + k], int32_t{ids[start + k + 1]});
                }
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestTokenShard)
#include "test_token_shard.moc"
