#include "llmc_checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

namespace tandem {

static_assert(std::endian::native == std::endian::little, "llm.c checkpoints are little endian");

namespace {

// One of llm.c's 16 tensors: its name there, its shape, and where each layer's slice lives in
// Tandem's buffer (per-layer tensors) or the one offset (the others).
struct LlmcTensor {
    const char* name;
    std::vector<int64_t> shape;  // with L first for per-layer tensors
    bool perLayer;
    int64_t offset;  // Tandem's: absolute, or relative to a block's start when perLayer
};

std::vector<LlmcTensor> llmcTensors(const ParameterLayout& layout, int64_t vp, int64_t maxT,
                                    int64_t L, int64_t C) {
    const BlockOffsets& b = layout.block();
    return {{"wte", {vp, C}, false, layout.wte()},
            {"wpe", {maxT, C}, false, layout.wpe()},
            {"ln1w", {L, C}, true, b.ln1Weight},
            {"ln1b", {L, C}, true, b.ln1Bias},
            {"qkvw", {L, 3 * C, C}, true, b.qkvWeight},
            {"qkvb", {L, 3 * C}, true, b.qkvBias},
            {"attprojw", {L, C, C}, true, b.attnProjWeight},
            {"attprojb", {L, C}, true, b.attnProjBias},
            {"ln2w", {L, C}, true, b.ln2Weight},
            {"ln2b", {L, C}, true, b.ln2Bias},
            {"fcw", {L, 4 * C, C}, true, b.fcWeight},
            {"fcb", {L, 4 * C}, true, b.fcBias},
            {"fcprojw", {L, C, 4 * C}, true, b.fcProjWeight},
            {"fcprojb", {L, C}, true, b.fcProjBias},
            {"lnfw", {C}, false, layout.lnfWeight()},
            {"lnfb", {C}, false, layout.lnfBias()}};
}

int64_t elements(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

int32_t readI32(std::span<const uint8_t> file, int index) {
    int32_t v;
    std::memcpy(&v, file.data() + 4 * index, 4);
    return v;
}

int64_t wteRows(const ParameterLayout& layout) {
    return layout.find("wte")->shape[0];
}

}  // namespace

bool looksLikeLlmc(std::span<const uint8_t> bytes) {
    return bytes.size() >= 4 && readI32(bytes, 0) == kLlmcMagic;
}

Expected<LlmcHeader> parseLlmcHeader(std::span<const uint8_t> file) {
    if (static_cast<int64_t>(file.size()) < kLlmcHeaderBytes)
        return makeError("llm.c checkpoint: the file has " + std::to_string(file.size()) +
                         " bytes, fewer than the 1024-byte header (truncated?)");
    if (readI32(file, 0) != kLlmcMagic)
        return makeError("llm.c checkpoint: magic " + std::to_string(readI32(file, 0)) +
                         ", expected " + std::to_string(kLlmcMagic));
    const int32_t version = readI32(file, 1);
    if (version != kLlmcVersionFp32)
        return makeError("llm.c checkpoint: version " + std::to_string(version) +
                         (version == 5 ? " (bf16)" : "") + ", expected " +
                         std::to_string(kLlmcVersionFp32) + " (fp32)");
    LlmcHeader h{readI32(file, 2), readI32(file, 3), readI32(file, 4),
                 readI32(file, 5), readI32(file, 6), readI32(file, 7)};
    if (h.maxT <= 0 || h.vocab <= 0 || h.layers <= 0 || h.heads <= 0 || h.channels <= 0 ||
        h.paddedVocab < h.vocab)
        return makeError("llm.c checkpoint: header sizes maxT " + std::to_string(h.maxT) + ", V " +
                         std::to_string(h.vocab) + ", L " + std::to_string(h.layers) + ", NH " +
                         std::to_string(h.heads) + ", C " + std::to_string(h.channels) +
                         ", padded V " + std::to_string(h.paddedVocab) + " make no model");
    return h;
}

std::vector<uint8_t> serializeLlmc(const ParameterLayout& layout, std::span<const float> params) {
    const ModelConfig& m = layout.config();
    const int64_t vp = wteRows(layout);
    std::vector<int32_t> header(256, 0);
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersionFp32;
    header[2] = m.maxSeqLen;
    header[3] = m.vocabSize;
    header[4] = m.layers;
    header[5] = m.heads;
    header[6] = m.channels;
    header[7] = static_cast<int32_t>(vp);
    std::vector<uint8_t> out(static_cast<size_t>(kLlmcHeaderBytes + layout.parameterCount() * 4));
    std::memcpy(out.data(), header.data(), kLlmcHeaderBytes);
    uint8_t* p = out.data() + kLlmcHeaderBytes;
    for (const auto& t : llmcTensors(layout, vp, m.maxSeqLen, m.layers, m.channels)) {
        const int64_t slice = t.perLayer ? elements(t.shape) / m.layers : elements(t.shape);
        for (int l = 0; l < (t.perLayer ? m.layers : 1); ++l) {
            const int64_t at = t.perLayer ? layout.blockStart(l) + t.offset : t.offset;
            std::memcpy(p, params.data() + at, static_cast<size_t>(slice) * 4);
            p += slice * 4;
        }
    }
    return out;
}

Expected<std::vector<float>> parseLlmc(std::span<const uint8_t> file,
                                       const ParameterLayout& layout) {
    auto h = parseLlmcHeader(file);
    if (!h)
        return h.error();
    const ModelConfig& m = layout.config();
    if (h->heads != m.heads)
        return makeError("llm.c checkpoint: " + std::to_string(h->heads) +
                         " attention heads (NH), the run's model has " + std::to_string(m.heads));
    if (h->vocab != m.vocabSize)
        return makeError("llm.c checkpoint: vocabulary V " + std::to_string(h->vocab) +
                         ", the run's model has V " + std::to_string(m.vocabSize));
    const int64_t C = m.channels, L = m.layers;
    const auto expected = llmcTensors(layout, wteRows(layout), m.maxSeqLen, L, C);
    const auto found = llmcTensors(layout, h->paddedVocab, h->maxT, h->layers, h->channels);
    int64_t total = 0;
    for (size_t i = 0; i < found.size(); ++i) {
        // wte's stored rows may differ (padding); its real rows (V) were checked above.
        const bool wte = i == 0;
        if (wte ? found[i].shape[1] != C : found[i].shape != expected[i].shape)
            return makeError("llm.c checkpoint: tensor " + std::string(found[i].name) +
                             " has shape " + shapeText(found[i].shape) +
                             ", the run's model expects " + shapeText(expected[i].shape));
        total += elements(found[i].shape);
    }
    const int64_t need = kLlmcHeaderBytes + total * 4;
    if (static_cast<int64_t>(file.size()) != need)
        return makeError("llm.c checkpoint: the file has " + std::to_string(file.size()) +
                         " bytes, its header describes " + std::to_string(need) +
                         (static_cast<int64_t>(file.size()) < need ? " (truncated)" : ""));
    std::vector<float> params(static_cast<size_t>(layout.parameterCount()), 0.0f);
    const uint8_t* p = file.data() + kLlmcHeaderBytes;
    for (size_t i = 0; i < found.size(); ++i) {
        const auto& t = found[i];
        if (i == 0) {  // the first V rows; padding rows in the file are not the model's
            std::memcpy(params.data() + t.offset, p, static_cast<size_t>(m.vocabSize * C) * 4);
            p += elements(t.shape) * 4;
            continue;
        }
        const int64_t slice = t.perLayer ? elements(t.shape) / L : elements(t.shape);
        for (int64_t l = 0; l < (t.perLayer ? L : 1); ++l) {
            const int64_t at =
                t.perLayer ? layout.blockStart(static_cast<int>(l)) + t.offset : t.offset;
            std::memcpy(params.data() + at, p, static_cast<size_t>(slice) * 4);
            p += slice * 4;
        }
    }
    return params;
}

}  // namespace tandem
