// A run's tokenizer: text to token ids and back. Three kinds: bytes (V = 256, the demo's),
// a SentencePiece model (trained on the operator's text), and GPT-2's BPE from llm.c's
// tokenizer file (gpt2_tokenizer.hpp).
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class Tokenizer {
  public:
    virtual ~Tokenizer() = default;
    virtual std::string kind() const = 0;  // "bytes", "sentencepiece", "gpt2"
    virtual int vocabSize() const = 0;
    virtual Expected<std::vector<int32_t>> encode(std::string_view text) const = 0;
    // The text of the tokens; bytes that do not form UTF-8 characters become U+FFFD.
    virtual std::string decode(std::span<const int32_t> tokens) const = 0;
};

std::unique_ptr<Tokenizer> makeByteTokenizer();
// An llm.c tokenizer file (recognised by its magic) or a SentencePiece model.
Expected<std::unique_ptr<Tokenizer>> loadTokenizer(const std::filesystem::path& path);
Expected<std::unique_ptr<Tokenizer>> loadSentencePieceTokenizer(const std::filesystem::path& path);

}  // namespace tandem
