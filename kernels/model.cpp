#include "model.hpp"

#include "random.hpp"

#include <cmath>

namespace tandem {

ParameterLayout::ParameterLayout(const ModelConfig& config) : m_config(config) {
    const int C = config.channels;
    auto add = [this](std::string name, std::vector<int> shape) {
        int64_t size = 1;
        for (int d : shape)
            size *= d;
        const bool decays = shape.size() >= 2;
        m_tensors.push_back({std::move(name), std::move(shape), m_count, size, decays});
        m_count += size;
        return m_tensors.back().offset;
    };
    add("wte", {config.paddedVocab(), C});  // rows V..Vp-1 are padding, kept at zero
    m_wpe = add("wpe", {config.maxSeqLen, C});
    m_firstBlock = m_count;
    for (int l = 0; l < config.layers; ++l) {
        const std::string p = "blocks." + std::to_string(l) + ".";
        const int64_t start = m_count;
        BlockOffsets b{};
        b.ln1Weight = add(p + "ln1.weight", {C}) - start;
        b.ln1Bias = add(p + "ln1.bias", {C}) - start;
        b.qkvWeight = add(p + "attn.qkv.weight", {3 * C, C}) - start;
        b.qkvBias = add(p + "attn.qkv.bias", {3 * C}) - start;
        b.attnProjWeight = add(p + "attn.proj.weight", {C, C}) - start;
        b.attnProjBias = add(p + "attn.proj.bias", {C}) - start;
        b.ln2Weight = add(p + "ln2.weight", {C}) - start;
        b.ln2Bias = add(p + "ln2.bias", {C}) - start;
        b.fcWeight = add(p + "mlp.fc.weight", {4 * C, C}) - start;
        b.fcBias = add(p + "mlp.fc.bias", {4 * C}) - start;
        b.fcProjWeight = add(p + "mlp.proj.weight", {C, 4 * C}) - start;
        b.fcProjBias = add(p + "mlp.proj.bias", {C}) - start;
        m_block = b;
        m_blockSize = m_count - start;
    }
    m_lnf = add("lnf.weight", {C});
    add("lnf.bias", {C});
}

const TensorInfo* ParameterLayout::find(std::string_view name) const {
    for (const auto& t : m_tensors) {
        if (t.name == name)
            return &t;
    }
    return nullptr;
}

void initParameters(const ParameterLayout& layout, std::span<float> parameters, uint64_t seed) {
    Rng rng(seed);
    const float residualStd = 0.02f / std::sqrt(2.0f * static_cast<float>(layout.config().layers));
    for (const auto& t : layout.tensors()) {
        float* p = parameters.data() + t.offset;
        const bool isLayerNormWeight = t.name.ends_with("ln1.weight") ||
                                       t.name.ends_with("ln2.weight") || t.name == "lnf.weight";
        if (isLayerNormWeight) {
            std::fill(p, p + t.size, 1.0f);
        } else if (t.shape.size() == 1) {
            std::fill(p, p + t.size, 0.0f);
        } else {
            const bool residual =
                t.name.ends_with("attn.proj.weight") || t.name.ends_with("mlp.proj.weight");
            const float stddev = residual ? residualStd : 0.02f;
            for (int64_t i = 0; i < t.size; ++i)
                p[i] = stddev * rng.normal();
        }
    }
    // The padded vocabulary rows start at zero; with no gradient and zero moments, AdamW keeps
    // them there (its decay of a zero weight is zero).
    const ModelConfig& c = layout.config();
    float* padded = parameters.data() + layout.wte() + int64_t{c.vocabSize} * c.channels;
    std::fill(padded, padded + int64_t{c.paddedVocab() - c.vocabSize} * c.channels, 0.0f);
}

}  // namespace tandem
