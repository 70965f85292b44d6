#include "model.hpp"

#include "random.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

namespace tandem {

namespace {

// Large enough for a GPT-2 XL sized run, small enough that int indexing of one tensor is safe.
constexpr int kMaxLayers = 96;
constexpr int kMaxChannels = 8192;
constexpr int kMaxSeqLen = 16384;
constexpr int64_t kMaxParameters = int64_t{2} << 30;  // 2 G floats: 8 GiB of fp32 weights

Expected<int> parseInt(std::string_view text, std::string_view key) {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
        return makeError("model config: " + std::string(key) + " must be a whole number, found '" +
                         std::string(text) + "'");
    }
    return value;
}

}  // namespace

Expected<ModelConfig> ModelConfig::parse(std::string_view text) {
    ModelConfig c;
    if (text == "tiny") {
        c = {2, 4, 128, 64};
    } else if (text == "small") {
        c = {4, 4, 256, 128};
    } else if (text == "medium") {
        c = {6, 6, 384, 256};
    } else {
        // "L=2,NH=4,C=128,T=64[,V=256]"
        bool seen[5] = {};
        size_t pos = 0;
        while (pos <= text.size()) {
            size_t comma = text.find(',', pos);
            std::string_view item =
                text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
            size_t eq = item.find('=');
            if (eq == std::string_view::npos) {
                return makeError(
                    "model config: expected tiny, small, medium or L=..,NH=..,C=..,T=.. but found "
                    "'" +
                    std::string(text) + "'");
            }
            std::string_view key = item.substr(0, eq);
            auto value = parseInt(item.substr(eq + 1), key);
            if (!value)
                return value.error();
            static constexpr std::string_view keys[] = {"L", "NH", "C", "T", "V"};
            int* fields[] = {&c.layers, &c.heads, &c.channels, &c.maxSeqLen, &c.vocabSize};
            bool known = false;
            for (int i = 0; i < 5; ++i) {
                if (key == keys[i]) {
                    *fields[i] = *value;
                    seen[i] = known = true;
                }
            }
            if (!known) {
                return makeError("model config: unknown key '" + std::string(key) +
                                 "' (expected L, NH, C, T or V)");
            }
            if (comma == std::string_view::npos)
                break;
            pos = comma + 1;
        }
        if (!seen[0] || !seen[1] || !seen[2] || !seen[3]) {
            return makeError("model config: '" + std::string(text) +
                             "' must give all of L, NH, C and T");
        }
    }
    if (auto s = c.validate(); !s)
        return s.error();
    return c;
}

Status ModelConfig::validate() const {
    auto range = [](const char* what, int value, int lo, int hi) -> Status {
        if (value < lo || value > hi) {
            return makeError("model config: " + std::string(what) + " is " + std::to_string(value) +
                             ", expected " + std::to_string(lo) + " to " + std::to_string(hi));
        }
        return {};
    };
    if (auto s = range("layers (L)", layers, 1, kMaxLayers); !s)
        return s;
    if (auto s = range("heads (NH)", heads, 1, kMaxChannels); !s)
        return s;
    if (auto s = range("channels (C)", channels, 1, kMaxChannels); !s)
        return s;
    if (auto s = range("sequence length (T)", maxSeqLen, 1, kMaxSeqLen); !s)
        return s;
    if (vocabSize != 256) {
        return makeError("model config: vocabulary size is " + std::to_string(vocabSize) +
                         ", expected 256 (byte-level)");
    }
    if (channels % heads != 0) {
        return makeError("model config: channels (C=" + std::to_string(channels) +
                         ") must be divisible by heads (NH=" + std::to_string(heads) + ")");
    }
    if (parameterCount() > kMaxParameters) {
        return makeError("model config: " + describe() + " has " +
                         std::to_string(parameterCount()) + " parameters, more than the limit of " +
                         std::to_string(kMaxParameters));
    }
    return {};
}

std::string ModelConfig::describe() const {
    std::ostringstream s;
    s << "L=" << layers << " NH=" << heads << " C=" << channels << " T=" << maxSeqLen
      << " V=" << vocabSize;
    return s.str();
}

int64_t ModelConfig::parameterCount() const {
    const int64_t C = channels;
    const int64_t perBlock =
        2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
    return int64_t{vocabSize} * C + int64_t{maxSeqLen} * C + layers * perBlock + 2 * C;
}

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
    add("wte", {config.vocabSize, C});
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
}

}  // namespace tandem
