// GPT-2's byte-level BPE, read from llm.c's tokenizer file (gpt2_tokenizer.bin): a header of
// 256 x uint32 (magic 20240328, version 1 or 2, vocabulary size, and in version 2 the
// end-of-text id), then per token one length byte and that many raw bytes.
//
// The file holds no merge list, but GPT-2's ids are its merge ranks (ids 256 and up are the
// merges in the order they were learned), so encoding merges the adjacent pair whose joined bytes
// form the token with the lowest id, as tiktoken does with its ranks.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem {

inline constexpr uint32_t kGpt2TokenizerMagic = 20240328;

class Gpt2Tokenizer {
  public:
    static Expected<Gpt2Tokenizer> load(const std::filesystem::path& path);
    static Expected<Gpt2Tokenizer> parse(std::span<const uint8_t> file);

    int vocabSize() const { return static_cast<int>(m_tokens.size()); }
    int endOfText() const { return m_endOfText; }  // -1 when the file does not name it

    // Pieces as GPT-2's pre-tokenizer splits them (contractions, words with their leading
    // space, digit runs, punctuation runs, white space), then BPE within each piece. Letters are
    // ASCII letters and every non-ASCII character; digits are ASCII digits.
    std::vector<int32_t> encode(std::string_view text) const;
    // The bytes of the tokens joined; ids outside the vocabulary are skipped. The result may cut
    // a UTF-8 character at either end.
    std::string decode(std::span<const int32_t> tokens) const;

    // The pre-tokenizer alone (exposed for its test).
    static std::vector<std::string_view> splitPieces(std::string_view text);

  private:
    void encodePiece(std::string_view piece, std::vector<int32_t>& out) const;

    std::vector<std::string> m_tokens;
    std::unordered_map<std::string, int32_t> m_ids;  // bytes -> lowest id with those bytes
    int32_t m_byteIds[256] = {};
    int m_endOfText = -1;
};

}  // namespace tandem
