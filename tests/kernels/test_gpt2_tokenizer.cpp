// GPT-2's BPE from an llm.c tokenizer file: the pre-tokenizer against GPT-2's own pattern (as an
// ECMAScript regex over ASCII, an independent oracle) on random text, BPE against the classic
// merge-list algorithm and hand-worked values on a made-up vocabulary, and refusal of bad files.
#include "gpt2_tokenizer.hpp"
#include "random.hpp"

#include <QtTest>

#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <vector>

using namespace tandem;

namespace {

// A tokenizer file: 256 byte tokens in a shuffled order (GPT-2's are not in byte order), then
// one token per merge, in merge order, then optionally an end-of-text token.
std::vector<uint8_t> tokenizerFile(const std::vector<std::string>& tokens, uint32_t version,
                                   uint32_t eot) {
    std::vector<uint8_t> f(1024, 0);
    const uint32_t header[4] = {kGpt2TokenizerMagic, version, static_cast<uint32_t>(tokens.size()),
                                eot};
    std::memcpy(f.data(), header, sizeof header);
    for (const std::string& t : tokens) {
        f.push_back(static_cast<uint8_t>(t.size()));
        f.insert(f.end(), t.begin(), t.end());
    }
    return f;
}

struct Vocabulary {
    std::vector<std::string> tokens;  // 256 bytes, then one per merge, then end-of-text
    std::vector<std::pair<std::string, std::string>> merges;
};

Vocabulary withMerges(const std::vector<std::pair<std::string, std::string>>& merges) {
    Vocabulary v;
    for (int b = 0; b < 256; ++b)
        v.tokens.push_back(std::string(1, static_cast<char>((b * 37 + 11) % 256)));
    for (const auto& [a, b] : merges) {
        v.merges.emplace_back(a, b);
        v.tokens.push_back(a + b);
    }
    v.tokens.push_back("<|endoftext|>");
    return v;
}

// Classic BPE training (the way GPT-2's merges were made): merge the most frequent adjacent
// pair of the words' symbols (ties: the smaller pair), `count` times.
Vocabulary trainVocabulary(const std::vector<std::string>& words, int count) {
    std::vector<std::vector<std::string>> split;
    for (const std::string& w : words) {
        split.emplace_back();
        for (char c : w)
            split.back().emplace_back(1, c);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (int m = 0; m < count; ++m) {
        std::map<std::pair<std::string, std::string>, int> freq;
        for (const auto& w : split)
            for (size_t k = 0; k + 1 < w.size(); ++k)
                ++freq[{w[k], w[k + 1]}];
        if (freq.empty())
            break;
        auto best = freq.begin();
        for (auto it = freq.begin(); it != freq.end(); ++it)
            if (it->second > best->second)
                best = it;
        merges.push_back(best->first);
        for (auto& w : split) {
            std::vector<std::string> next;
            for (size_t k = 0; k < w.size(); ++k) {
                if (k + 1 < w.size() && std::pair(w[k], w[k + 1]) == best->first) {
                    next.push_back(w[k] + w[k + 1]);
                    ++k;
                } else {
                    next.push_back(w[k]);
                }
            }
            w = std::move(next);
        }
    }
    return withMerges(merges);
}

// The classic BPE: repeatedly find the lowest-ranked merge among adjacent pairs and apply it to
// every occurrence, left to right.
std::vector<std::string> classicBpe(const std::string& piece, const Vocabulary& v) {
    std::map<std::pair<std::string, std::string>, size_t> rank;
    for (size_t i = 0; i < v.merges.size(); ++i)
        rank.emplace(v.merges[i], i);
    std::vector<std::string> parts;
    for (char c : piece)
        parts.emplace_back(1, c);
    while (true) {
        size_t best = SIZE_MAX;
        for (size_t k = 0; k + 1 < parts.size(); ++k)
            if (auto it = rank.find({parts[k], parts[k + 1]}); it != rank.end())
                best = std::min(best, it->second);
        if (best == SIZE_MAX)
            return parts;
        std::vector<std::string> next;
        for (size_t k = 0; k < parts.size(); ++k) {
            if (k + 1 < parts.size() && std::pair(parts[k], parts[k + 1]) == v.merges[best]) {
                next.push_back(parts[k] + parts[k + 1]);
                ++k;
            } else {
                next.push_back(parts[k]);
            }
        }
        parts = std::move(next);
    }
}

}  // namespace

class TestGpt2Tokenizer : public QObject {
    Q_OBJECT

  private slots:
    void preTokenizerMatchesGpt2Pattern() {
        // GPT-2's pattern with \p{L} and \p{N} narrowed to ASCII (the oracle's alphabet).
        const std::regex pattern(
            R"('s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+)");
        const std::string alphabet = "ab Zs'tdmlrve19 \n\t!.,-";
        Rng rng(7);
        for (int trial = 0; trial < 3000; ++trial) {
            std::string text;
            const size_t n = rng.below(24);
            for (size_t i = 0; i < n; ++i)
                text += alphabet[rng.below(alphabet.size())];
            std::vector<std::string> expected;
            for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
                 it != std::sregex_iterator(); ++it)
                expected.push_back(it->str());
            std::vector<std::string> found;
            for (std::string_view p : Gpt2Tokenizer::splitPieces(text))
                found.emplace_back(p);
            if (found != expected)
                QFAIL(qPrintable("pieces differ for \"" + QString::fromStdString(text) + "\""));
        }
    }

    void handWorkedPieces() {
        std::vector<std::string> found;
        for (std::string_view p : Gpt2Tokenizer::splitPieces("I'll say  hi!\n\nok 42"))
            found.emplace_back(p);
        const std::vector<std::string> expected = {"I", "'ll", " say", " ",  " hi",
                                                   "!", "\n",  "\n",   "ok", " 42"};
        QCOMPARE(found, expected);
    }

    void bpeMatchesClassicAlgorithm() {
        const std::string alphabet = "thelowsraq ";
        Rng rng(3);
        auto randomText = [&](size_t maxLen) {
            std::string text;
            const size_t n = 1 + rng.below(maxLen);
            for (size_t i = 0; i < n; ++i)
                text += alphabet[rng.below(alphabet.size())];
            return text;
        };
        std::vector<std::string> words;
        for (int i = 0; i < 300; ++i)
            for (std::string_view piece : Gpt2Tokenizer::splitPieces(randomText(12)))
                words.emplace_back(piece);
        const Vocabulary v = trainVocabulary(words, 60);
        QCOMPARE(v.merges.size(), size_t{60});
        auto tok = Gpt2Tokenizer::parse(tokenizerFile(v.tokens, 2, v.tokens.size() - 1));
        QVERIFY2(tok, tok ? "" : tok.error().message.c_str());
        QCOMPARE(tok->vocabSize(), static_cast<int>(v.tokens.size()));
        QCOMPARE(tok->endOfText(), static_cast<int>(v.tokens.size()) - 1);
        std::map<std::string, int32_t> id;
        for (size_t i = 0; i + 1 < v.tokens.size(); ++i)
            id.emplace(v.tokens[i], static_cast<int32_t>(i));
        size_t merged = 0;
        for (int trial = 0; trial < 2000; ++trial) {
            const std::string text = randomText(16);
            std::vector<int32_t> expected;
            for (std::string_view piece : Gpt2Tokenizer::splitPieces(text))
                for (const std::string& part : classicBpe(std::string(piece), v))
                    expected.push_back(id.at(part));
            QCOMPARE(tok->encode(text), expected);
            QCOMPARE(tok->decode(expected), text);
            merged += text.size() - expected.size();
        }
        QVERIFY(merged > 2000);  // the merges were really used
    }

    void handWorkedEncoding() {
        const Vocabulary v = withMerges({{"t", "h"},
                                         {"th", "e"},
                                         {" ", "the"},
                                         {"a", "a"},
                                         {"aa", "a"},
                                         {"l", "o"},
                                         {"lo", "w"}});
        auto tok = Gpt2Tokenizer::parse(tokenizerFile(v.tokens, 1, 0));
        QVERIFY(tok);
        QCOMPARE(tok->endOfText(), -1);
        auto idOf = [&](const std::string& s) {
            for (size_t i = 0; i < v.tokens.size(); ++i)
                if (v.tokens[i] == s)
                    return static_cast<int32_t>(i);
            return int32_t{-1};
        };
        // t+h first (rank 0), then th+e, then " "+the.
        QCOMPARE(tok->encode(" the low"),
                 (std::vector<int32_t>{idOf(" the"), idOf(" "), idOf("low")}));
        // a+a outranks aa+a, so "aaaa" is two "aa", never "aaa" + "a".
        QCOMPARE(tok->encode("aaaa"), (std::vector<int32_t>{idOf("aa"), idOf("aa")}));
        // Bytes outside ASCII round-trip through their byte tokens.
        const std::string utf8 = "caf\xc3\xa9";
        QCOMPARE(tok->decode(tok->encode(utf8)), utf8);
        QCOMPARE(tok->encode(utf8).size(), size_t{5});
    }

    void endOfTextIsNeverMerged() {
        const Vocabulary v = withMerges({{"<", "|"}, {"|", ">"}});
        auto tok = Gpt2Tokenizer::parse(tokenizerFile(v.tokens, 2, v.tokens.size() - 1));
        QVERIFY(tok);
        for (int32_t id : tok->encode("<|endoftext|>"))
            QVERIFY(id != tok->endOfText());
        QCOMPARE(tok->decode(std::vector<int32_t>{tok->endOfText()}), std::string("<|endoftext|>"));
    }

    void refusesBadFiles() {
        const Vocabulary v = withMerges({{"a", "b"}});
        const auto good = tokenizerFile(v.tokens, 2, v.tokens.size() - 1);
        auto expectError = [](std::vector<uint8_t> file, const char* words) {
            auto t = Gpt2Tokenizer::parse(file);
            QVERIFY(!t);
            QVERIFY2(t.error().message.find(words) != std::string::npos, t.error().message.c_str());
        };
        expectError(std::vector<uint8_t>(good.begin(), good.begin() + 100), "header");
        auto wrongMagic = good;
        wrongMagic[0] ^= 1;
        expectError(wrongMagic, "magic");
        auto wrongVersion = good;
        wrongVersion[4] = 9;
        expectError(wrongVersion, "version 9");
        expectError(std::vector<uint8_t>(good.begin(), good.end() - 3), "runs past the end");
        auto extra = good;
        extra.push_back(0);
        expectError(extra, "after the last token");
        auto eotOutside = tokenizerFile(v.tokens, 2, 100000);
        expectError(eotOutside, "end-of-text id 100000");
        std::vector<std::string> missingByte(v.tokens.begin() + 1, v.tokens.end());
        expectError(tokenizerFile(missingByte, 1, 0), "no token for the byte");
    }
};

QTEST_APPLESS_MAIN(TestGpt2Tokenizer)
#include "test_gpt2_tokenizer.moc"
