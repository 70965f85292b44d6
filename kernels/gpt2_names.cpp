#include "gpt2_names.hpp"

#include <nlohmann/json.hpp>

namespace tandem {

std::vector<Gpt2Tensor> gpt2Tensors(const ParameterLayout& layout) {
    const ModelConfig& m = layout.config();
    std::vector<Gpt2Tensor> out;
    auto add = [&](std::string hf, const std::string& tandemName, bool transposed) {
        const TensorInfo* t = layout.find(tandemName);
        Gpt2Tensor g{std::move(hf), t, {}, transposed, 0};
        if (t->shape.size() == 1) {
            g.shape = {t->shape[0]};
        } else {
            g.rows = tandemName == "wte" ? m.vocabSize : t->shape[0];
            g.shape = transposed ? std::vector<int64_t>{t->shape[1], g.rows}
                                 : std::vector<int64_t>{g.rows, t->shape[1]};
        }
        out.push_back(std::move(g));
    };
    add("wte.weight", "wte", false);
    add("wpe.weight", "wpe", false);
    for (int l = 0; l < m.layers; ++l) {
        const std::string h = "h." + std::to_string(l) + ".";
        const std::string b = "blocks." + std::to_string(l) + ".";
        add(h + "ln_1.weight", b + "ln1.weight", false);
        add(h + "ln_1.bias", b + "ln1.bias", false);
        add(h + "attn.c_attn.weight", b + "attn.qkv.weight", true);
        add(h + "attn.c_attn.bias", b + "attn.qkv.bias", false);
        add(h + "attn.c_proj.weight", b + "attn.proj.weight", true);
        add(h + "attn.c_proj.bias", b + "attn.proj.bias", false);
        add(h + "ln_2.weight", b + "ln2.weight", false);
        add(h + "ln_2.bias", b + "ln2.bias", false);
        add(h + "mlp.c_fc.weight", b + "mlp.fc.weight", true);
        add(h + "mlp.c_fc.bias", b + "mlp.fc.bias", false);
        add(h + "mlp.c_proj.weight", b + "mlp.proj.weight", true);
        add(h + "mlp.c_proj.bias", b + "mlp.proj.bias", false);
    }
    add("ln_f.weight", "lnf.weight", false);
    add("ln_f.bias", "lnf.bias", false);
    return out;
}

void gpt2ToTandem(const Gpt2Tensor& t, const float* hf, float* dst) {
    if (!t.transposed) {
        int64_t n = 1;
        for (int64_t d : t.shape)
            n *= d;
        std::copy(hf, hf + n, dst);
        return;
    }
    const int64_t in = t.shape[0], outRows = t.shape[1];  // hf (in, out); Tandem (out, in)
    for (int64_t o = 0; o < outRows; ++o)
        for (int64_t i = 0; i < in; ++i)
            dst[o * in + i] = hf[i * outRows + o];
}

void tandemToGpt2(const Gpt2Tensor& t, const float* src, float* hf) {
    if (!t.transposed) {
        int64_t n = 1;
        for (int64_t d : t.shape)
            n *= d;
        std::copy(src, src + n, hf);
        return;
    }
    const int64_t in = t.shape[0], outRows = t.shape[1];
    for (int64_t o = 0; o < outRows; ++o)
        for (int64_t i = 0; i < in; ++i)
            hf[i * outRows + o] = src[o * in + i];
}

std::string gpt2ConfigJson(const ModelConfig& m, const SpecialTokens& special) {
    auto id = [](const std::optional<int>& v) {
        return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    nlohmann::ordered_json j{
        {"model_type", "gpt2"},
        {"architectures", {"GPT2LMHeadModel"}},
        {"vocab_size", m.vocabSize},
        {"n_positions", m.maxSeqLen},
        {"n_ctx", m.maxSeqLen},
        {"n_embd", m.channels},
        {"n_layer", m.layers},
        {"n_head", m.heads},
        {"n_inner", nullptr},  // 4 x n_embd, as Tandem's MLP
        // Tandem's GELU is the tanh approximation (kernels/cpu_reference), HF's "gelu_new".
        {"activation_function", "gelu_new"},
        {"layer_norm_epsilon", 1e-5},  // kLayernormEps in every op set
        {"resid_pdrop", 0.0},
        {"embd_pdrop", 0.0},
        {"attn_pdrop", 0.0},
        {"initializer_range", 0.02},
        {"scale_attn_weights", true},  // scores / sqrt(head size)
        {"scale_attn_by_inverse_layer_idx", false},
        {"reorder_and_upcast_attn", false},
        {"summary_type", "cls_index"},
        {"summary_use_proj", true},
        {"summary_activation", nullptr},
        {"summary_proj_to_labels", true},
        {"summary_first_dropout", 0.1},
        {"bos_token_id", id(special.bos)},
        {"eos_token_id", id(special.eos)},
        {"tie_word_embeddings", true},  // the output layer is wte
        {"torch_dtype", "float32"},
        {"use_cache", true}};
    return j.dump(2) + "\n";
}

}  // namespace tandem
