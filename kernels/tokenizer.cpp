#include "tokenizer.hpp"

#include "gpt2_tokenizer.hpp"
#include "text.hpp"

#include <cstring>
#include <fstream>

namespace tandem {

namespace {

class ByteTokenizer final : public Tokenizer {
  public:
    std::string kind() const override { return "bytes"; }
    int vocabSize() const override { return 256; }
    Expected<std::vector<int32_t>> encode(std::string_view text) const override {
        std::vector<int32_t> ids;
        ids.reserve(text.size());
        for (unsigned char c : text)
            ids.push_back(c);
        return ids;
    }
    std::string decode(std::span<const int32_t> tokens) const override {
        std::string text;
        for (int32_t id : tokens)
            if (id >= 0 && id < 256)
                text += static_cast<char>(id);
        return validUtf8(text);
    }
};

class Gpt2BpeTokenizer final : public Tokenizer {
  public:
    explicit Gpt2BpeTokenizer(Gpt2Tokenizer bpe) : m_bpe(std::move(bpe)) {}
    std::string kind() const override { return "gpt2"; }
    int vocabSize() const override { return m_bpe.vocabSize(); }
    Expected<std::vector<int32_t>> encode(std::string_view text) const override {
        return m_bpe.encode(text);
    }
    std::string decode(std::span<const int32_t> tokens) const override {
        return validUtf8(m_bpe.decode(tokens));
    }

  private:
    Gpt2Tokenizer m_bpe;
};

}  // namespace

std::unique_ptr<Tokenizer> makeByteTokenizer() {
    return std::make_unique<ByteTokenizer>();
}

Expected<std::unique_ptr<Tokenizer>> loadTokenizer(const std::filesystem::path& path) {
    uint32_t magic = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return makeError("cannot open the tokenizer " + path.string());
    in.read(reinterpret_cast<char*>(&magic), sizeof magic);
    if (in.gcount() == sizeof magic && magic == kGpt2TokenizerMagic) {
        auto bpe = Gpt2Tokenizer::load(path);
        if (!bpe)
            return bpe.error();
        return std::unique_ptr<Tokenizer>(std::make_unique<Gpt2BpeTokenizer>(std::move(*bpe)));
    }
    return loadSentencePieceTokenizer(path);
}

}  // namespace tandem
