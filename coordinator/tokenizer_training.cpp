// SentencePiece training behind Expected: nothing here throws or aborts.
#include "tokenizer_training.hpp"

#include "corpus.hpp"
#include "file_io.hpp"

#include <sentencepiece_trainer.h>

#include <unordered_map>

namespace tandem::coord {
namespace fs = std::filesystem;

namespace {

constexpr int kMinVocab = 320;  // 256 byte pieces, <unk>, and room for merges

// The corpus one line at a time: SentencePiece trains on sentences, and a fortune file's lines
// are short enough (its limit is 4192 bytes a sentence).
class LineIterator : public sentencepiece::SentenceIterator {
  public:
    explicit LineIterator(const std::vector<uint8_t>& text) : m_text(text) { Next(); }
    bool done() const override { return m_done; }
    void Next() override {
        while (m_pos < m_text.size()) {
            size_t end = m_pos;
            while (end < m_text.size() && m_text[end] != '\n')
                ++end;
            m_line.assign(reinterpret_cast<const char*>(m_text.data()) + m_pos, end - m_pos);
            m_pos = end + 1;
            if (!m_line.empty())
                return;
        }
        m_done = true;
    }
    const std::string& value() const override { return m_line; }
    sentencepiece::util::Status status() const override { return {}; }

  private:
    const std::vector<uint8_t>& m_text;
    size_t m_pos = 0;
    std::string m_line;
    bool m_done = false;
};

}  // namespace

Status trainTokenizer(const TokenizerTraining& t) {
    if (t.vocabSize < kMinVocab || t.vocabSize > 65536)
        return makeError("tokenizer vocabulary size " + std::to_string(t.vocabSize) +
                         " is out of range; expected " + std::to_string(kMinVocab) +
                         " to 65536 (256 byte pieces for byte fallback, and uint16 token shards)");
    const fs::path folder = t.output.parent_path().empty() ? fs::path(".") : t.output.parent_path();
    std::error_code ec;
    if (!fs::is_directory(folder, ec))
        return makeError("cannot write the tokenizer to '" + t.output.string() + "': the folder '" +
                         folder.string() + "' does not exist");
    auto text = loadTextCorpus(t.corpus);
    if (!text)
        return makeError("tokenizer corpus: " + text.error().message);
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", "bpe"},
        {"vocab_size", std::to_string(t.vocabSize)},
        {"byte_fallback", "true"},
        {"character_coverage", "0.9995"},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"add_dummy_prefix", "false"},
        {"split_digits", "true"},
        {"bos_id", "-1"},
        {"eos_id", "-1"},
        {"unk_id", "0"},
        {"max_sentence_length", "16384"},
        {"minloglevel", "2"},
    };
    LineIterator lines(*text);
    std::string model;
    const auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
    if (!st.ok())
        return makeError("SentencePiece could not train a " + std::to_string(t.vocabSize) +
                         "-token BPE model on this text: " + std::string(st.message()));
    return writeFileAtomically(
        t.output, std::span(reinterpret_cast<const uint8_t*>(model.data()), model.size()));
}

}  // namespace tandem::coord
