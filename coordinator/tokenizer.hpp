// The run's SentencePiece tokenizer (Debian's libsentencepiece): training a BPE model on the
// operator's text (`tandem-coordinator tokenizer train`), and encoding a corpus with it once,
// when a run is created. byte_fallback is on and normalization is the identity, so every text
// encodes and decodes back to itself.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::coord {

struct TokenizerTraining {
    std::vector<std::filesystem::path> corpus;  // text files or directories (loadTextCorpus)
    int vocabSize = 0;                          // V, at least 320 (256 byte pieces + merges)
    std::filesystem::path output;               // the .model file, written atomically
};

// Trains a BPE model; refuses an output whose folder does not exist, and a V the text cannot
// fill (SentencePiece's message, with the V asked for).
Status trainTokenizer(const TokenizerTraining& training);

class Tokenizer {
  public:
    // Loads a SentencePiece .model file; a file that is not one gives an error naming it.
    static Expected<Tokenizer> load(const std::filesystem::path& model);
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    int vocabSize() const;
    // Token ids of `text`, in [0, vocabSize()).
    Expected<std::vector<int>> encode(std::string_view text) const;
    Expected<std::string> decode(std::span<const int> ids) const;

  private:
    struct State;
    explicit Tokenizer(std::unique_ptr<State> state);
    std::unique_ptr<State> m_s;
};

}  // namespace tandem::coord
