// The Hugging Face GPT-2 layout of Tandem's parameters: each tensor's name there
// ("h.0.attn.c_attn.weight"), its shape, and whether it is the transpose of Tandem's
// (Hugging Face keeps GPT-2's matrices as Conv1D weights, (in, out), where Tandem keeps
// Linear weights, (out, in)); and GPT2Config's config.json for a model.
//
// Dimensions: L layers, C channels, T positions, V vocabulary (the real one; padded wte rows
// have no Hugging Face counterpart).
#pragma once

#include "model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct Gpt2Tensor {
    std::string hfName;          // "wte.weight", "h.3.mlp.c_fc.weight", ...
    const TensorInfo* tandem;    // the tensor in Tandem's layout
    std::vector<int64_t> shape;  // in the Hugging Face layout
    bool transposed = false;     // shape is Tandem's (out, in) reversed
    int64_t rows = 0;            // of a 2-D Tandem tensor taken: V for wte, else all of them
};

// Every parameter, in Hugging Face's order (wte, wpe, h.0 ... h.L-1, ln_f).
std::vector<Gpt2Tensor> gpt2Tensors(const ParameterLayout& layout);

// Hugging Face values -> Tandem values of one tensor (dst: the tensor's span in the flat
// buffer) and back. Rows of wte at or above V are left alone / not written.
void gpt2ToTandem(const Gpt2Tensor& t, const float* hf, float* tandemTensor);
void tandemToGpt2(const Gpt2Tensor& t, const float* tandemTensor, float* hf);

// Token ids the tokenizer gives BOS/EOS, when it has them (null in config.json otherwise).
struct SpecialTokens {
    std::optional<int> bos, eos;
};

// GPT2Config's keys (model_type gpt2, n_embd, n_layer, ...), with the LayerNorm epsilon
// (1e-5) and the GELU (tanh approximation: gelu_new) that Tandem's kernels use and no dropout.
std::string gpt2ConfigJson(const ModelConfig& config, const SpecialTokens& special);

}  // namespace tandem
