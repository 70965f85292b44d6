// The SentencePiece kind of Tokenizer (tokenizer.hpp), over Debian's libsentencepiece.
#include "text.hpp"
#include "tokenizer.hpp"

#include <sentencepiece_processor.h>

namespace tandem {

namespace {

class SentencePieceTokenizer final : public Tokenizer {
  public:
    explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
        : m_sp(std::move(sp)) {}
    std::string kind() const override { return "sentencepiece"; }
    int vocabSize() const override { return m_sp->GetPieceSize(); }
    Expected<std::vector<int32_t>> encode(std::string_view text) const override {
        std::vector<int> ids;
        if (auto st = m_sp->Encode(text, &ids); !st.ok())
            return makeError("SentencePiece cannot encode the text: " + st.ToString());
        return std::vector<int32_t>(ids.begin(), ids.end());
    }
    std::string decode(std::span<const int32_t> tokens) const override {
        std::vector<int> ids;
        for (int32_t id : tokens)
            if (id >= 0 && id < vocabSize())
                ids.push_back(id);
        std::string text;
        if (auto st = m_sp->Decode(ids, &text); !st.ok())
            return {};
        return validUtf8(text);
    }

  private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> m_sp;
};

}  // namespace

Expected<std::unique_ptr<Tokenizer>> loadSentencePieceTokenizer(const std::filesystem::path& path) {
    auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
    if (auto st = sp->Load(path.string()); !st.ok())
        return makeError("the tokenizer " + path.string() +
                         " is neither an llm.c tokenizer file nor a SentencePiece model (" +
                         st.ToString() + ")");
    return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
}

}  // namespace tandem
