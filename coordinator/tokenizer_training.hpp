// Training a run's SentencePiece tokenizer (Debian's libsentencepiece): a BPE model on the
// operator's text (`tandem-coordinator tokenizer train`). byte_fallback is on and normalization
// is the identity, so every text encodes and decodes back to itself. Loading, encoding and
// decoding are kernels/tokenizer.hpp's, shared with the samples.
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

}  // namespace tandem::coord
