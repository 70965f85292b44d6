// The GPT model's parameters: the one table that describes every parameter tensor inside the
// single flat fp32 buffer, built from a ModelConfig (base/model_config.hpp).
//
// Dimensions: L layers, NH heads, C channels, T sequence length (maxSeqLen), V vocabulary,
// Vp padded vocabulary (ModelConfig::paddedVocab()).
#pragma once

#include "model_config.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

struct TensorInfo {
    std::string name;  // e.g. "blocks.0.attn.qkv.weight"
    std::vector<int> shape;
    int64_t offset = 0;   // in floats, into the flat parameter buffer
    int64_t size = 0;     // in floats
    bool decays = false;  // AdamW weight decay applies (matrices only)
};

// Offsets of the tensors of one transformer block, relative to the block's first float.
struct BlockOffsets {
    int64_t ln1Weight, ln1Bias;            // (C), (C)
    int64_t qkvWeight, qkvBias;            // (3C, C), (3C)
    int64_t attnProjWeight, attnProjBias;  // (C, C), (C)
    int64_t ln2Weight, ln2Bias;            // (C), (C)
    int64_t fcWeight, fcBias;              // (4C, C), (4C)
    int64_t fcProjWeight, fcProjBias;      // (C, 4C), (C)
};

// The layout of all parameters in one buffer: wte (Vp, C), wpe (T, C), then L blocks, then the
// final LayerNorm. The output layer is tied to wte; wte's rows V..Vp-1 are padding (zero, never
// an input, never predicted).
class ParameterLayout {
  public:
    explicit ParameterLayout(const ModelConfig& config);

    const ModelConfig& config() const { return m_config; }
    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    int64_t parameterCount() const { return m_count; }
    const TensorInfo* find(std::string_view name) const;

    int64_t wte() const { return 0; }
    int64_t wpe() const { return m_wpe; }
    int64_t blockStart(int layer) const { return m_firstBlock + layer * m_blockSize; }
    const BlockOffsets& block() const { return m_block; }  // add blockStart(layer)
    int64_t lnfWeight() const { return m_lnf; }
    int64_t lnfBias() const { return m_lnf + m_config.channels; }

  private:
    ModelConfig m_config;
    std::vector<TensorInfo> m_tensors;
    BlockOffsets m_block{};
    int64_t m_wpe = 0, m_firstBlock = 0, m_blockSize = 0, m_lnf = 0, m_count = 0;
};

// GPT-2 initialisation: weights N(0, 0.02), residual projections N(0, 0.02 / sqrt(2L)),
// biases 0, LayerNorm weights 1, padded wte rows 0. Deterministic in the seed.
void initParameters(const ParameterLayout& layout, std::span<float> parameters, uint64_t seed);

}  // namespace tandem
