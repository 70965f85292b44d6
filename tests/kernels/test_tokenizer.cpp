// The run's tokenizers behind one interface: bytes, a SentencePiece model trained here on the
// fortunes text, and llm.c's GPT-2 file, each recognised by loadTokenizer; bad files refused.
#include "tokenizer.hpp"

#include <sentencepiece_trainer.h>

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <fstream>

using namespace tandem;

class TestTokenizer : public QObject {
    Q_OBJECT

  private slots:
    void bytesRoundTrip() {
        auto t = makeByteTokenizer();
        QCOMPARE(t->vocabSize(), 256);
        const std::string text = "caf\xC3\xA9 \x01";
        auto ids = t->encode(text);
        QVERIFY(ids);
        QCOMPARE(ids->size(), text.size());
        QCOMPARE((*ids)[3], 0xC3);
        QCOMPARE(t->decode(*ids), text);
        // Bytes that do not form a character show as U+FFFD; ids outside are skipped.
        QCOMPARE(t->decode(std::vector<int32_t>{'a', 0xC3, 'b', 300, -1}),
                 std::string("a\xEF\xBF\xBD"
                             "b"));
    }

    void sentencePieceModelTrainedHere() {
        QTemporaryDir dir;
        const std::string corpus = dir.filePath("text.txt").toStdString();
        {
            std::ofstream out(corpus);
            for (int i = 0; i < 200; ++i)
                out << "The quick brown fox jumps over the lazy dog number " << i << ".\n"
                    << "Pack my box with five dozen liquor jugs, said fox " << i * 7 << ".\n";
        }
        const std::string prefix = dir.filePath("spm").toStdString();
        const auto st = sentencepiece::SentencePieceTrainer::Train(
            "--input=" + corpus + " --model_prefix=" + prefix +
            " --vocab_size=500 --model_type=bpe --byte_fallback=true --minloglevel=2");
        QVERIFY2(st.ok(), st.ToString().c_str());
        auto t = loadTokenizer(prefix + ".model");
        QVERIFY2(t, t ? "" : t.error().message.c_str());
        QCOMPARE((*t)->kind(), std::string("sentencepiece"));
        QCOMPARE((*t)->vocabSize(), 500);
        const std::string text = "The lazy fox jumps over five dozen jugs.";
        auto ids = (*t)->encode(text);
        QVERIFY(ids);
        QVERIFY(ids->size() < text.size() / 2);  // real merges, not bytes
        for (int32_t id : *ids)
            QVERIFY(id >= 0 && id < 500);
        QCOMPARE((*t)->decode(*ids), text);
        // Byte fallback: text the model never saw still round-trips.
        const std::string unseen = "\xC3\xBC\xC3\xA9 \xE2\x82\xAC";
        auto unseenIds = (*t)->encode(unseen);
        QVERIFY(unseenIds);
        QCOMPARE((*t)->decode(*unseenIds), unseen);
    }

    void llmcTokenizerFileIsRecognised() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("gpt2_tokenizer.bin").toStdString();
        {
            std::vector<uint32_t> header(256, 0);
            header[0] = 20240328;
            header[1] = 2;
            header[2] = 257;
            header[3] = 256;
            std::ofstream out(path, std::ios::binary);
            out.write(reinterpret_cast<const char*>(header.data()), 1024);
            for (int b = 0; b < 256; ++b) {
                out.put(1);
                out.put(static_cast<char>(b));
            }
            out.put(13);
            out.write("<|endoftext|>", 13);
        }
        auto t = loadTokenizer(path);
        QVERIFY2(t, t ? "" : t.error().message.c_str());
        QCOMPARE((*t)->kind(), std::string("gpt2"));
        QCOMPARE((*t)->vocabSize(), 257);
        auto ids = (*t)->encode("hi there");
        QVERIFY(ids);
        QCOMPARE((*t)->decode(*ids), std::string("hi there"));
    }

    void refusesWhatIsNoTokenizer() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("notes.txt").toStdString();
        std::ofstream(path) << "just some notes, not a model\n";
        auto t = loadTokenizer(path);
        QVERIFY(!t);
        QVERIFY2(t.error().message.find("neither an llm.c tokenizer file nor a SentencePiece") !=
                     std::string::npos,
                 t.error().message.c_str());
        QVERIFY(!loadTokenizer(dir.filePath("missing.model").toStdString()));
    }
};

QTEST_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
