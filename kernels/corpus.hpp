// Training text as byte tokens, and the random windows a work unit trains on (over any tokens:
// bytes of text or uint16 token ids, TokenView).
//
// Dimensions: B batch, T sequence.
#pragma once

#include "expected.hpp"
#include "random.hpp"
#include "token_shard.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace tandem {

// Reads text files, or every regular text file below a directory (sorted by path, so the result
// is the same everywhere), concatenated into one byte sequence. Skips fortune's binary .dat
// indexes and symbolic links (fortune's .u8 links repeat the plain files).
Expected<std::vector<uint8_t>> loadTextCorpus(std::span<const std::filesystem::path> paths);

// Draws B windows of T+1 consecutive tokens at random offsets; inputs are the first T tokens,
// targets the last T. Deterministic in the seed; its state fits in a checkpoint.
class BatchSampler {
  public:
    BatchSampler(TokenView tokens, uint64_t seed);
    // inputs (B,T), targets (B,T); requires tokens.size() > T.
    void next(int B, int T, std::span<int32_t> inputs, std::span<int32_t> targets);
    uint64_t state() const { return m_rng.state(); }
    void setState(uint64_t state) { m_rng.setState(state); }

  private:
    TokenView m_tokens;
    Rng m_rng;
};

}  // namespace tandem
