#include "model_config.hpp"

#include <charconv>
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
    // Any vocabulary: 256 for byte-level runs, a tokenizer's or a token corpus's otherwise.
    if (auto s = range("vocabulary size (V)", vocabSize, 2, 1 << 20); !s)
        return s;
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

}  // namespace tandem
