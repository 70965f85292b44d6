// GptBackend runs the GPT graph (forward, backward, AdamW) through one Ops implementation.
// Every backend is a GptBackend with a different op set, so the graph is written once.
#pragma once

#include "backend.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace tandem {

class GptBackend final : public Backend {
  public:
    // availableBytes tells how much memory the op set can still allocate (RAM or GPU memory).
    GptBackend(std::string name, std::unique_ptr<Ops> ops, std::function<int64_t()> availableBytes);
    ~GptBackend() override;

    std::string name() const override { return m_name; }
    MemoryEstimate estimateMemory(const ModelConfig& config, int B, int T) const override;
    Status canRun(const ModelConfig& config, int B, int T) const override;
    Status allocate(const ModelConfig& config, int B, int T) override;

    Status loadParameters(std::span<const float> parameters) override;
    Status storeParameters(std::span<float> parameters) const override;
    Status storeGradients(std::span<float> gradients) const override;
    Status loadOptimizerState(const OptimizerState& state) override;
    Expected<OptimizerState> storeOptimizerState() const override;

    Expected<float> forward(std::span<const int32_t> inputs, std::span<const int32_t> targets,
                            int b, int t) override;
    Status storeProbabilities(int row, int position, std::span<float> out) const override;
    Status backward() override;
    Expected<StepStats> adamwStep(const AdamWConfig& config, float lr) override;
    Expected<EncodeStats> encodePseudoGradient(std::span<const float> start,
                                               std::span<uint16_t> out) override;

    Ops& ops() { return *m_ops; }
    // The logits of the last forward, (b, t, V) as it was called; for tests and tools that
    // compare the model's outputs with another implementation.
    Status storeLogits(std::span<float> logits) const;

    // Offsets (in floats) of the activation tensors of a B x T plan: what the backward pass
    // reads is kept per layer; the attention scores (preatt), which it does not read, are one
    // layer's scratch that every layer's forward overwrites.
    struct ActivationPlan {
        struct Layer {
            int64_t ln1, ln1Mean, ln1Rstd, qkv, atty, att, attnProj, residual2, ln2, ln2Mean,
                ln2Rstd, fch, fchGelu, fcProj, residual3;
        };
        int64_t encoded = 0;
        std::vector<Layer> layers;
        int64_t preatt = 0;
        int64_t lnf = 0, lnfMean = 0, lnfRstd = 0, logits = 0, probs = 0, losses = 0;
        int64_t total = 0;
    };
    // Offsets of the activations' gradients. The backward pass works on one layer at a time, so
    // one layer's gradients serve every layer (zeroed before each); the residual stream's
    // gradient, which passes from a layer to the one below, is one buffer that every layer adds
    // into in place; the attention's scratch (dpreatt, datt) is overwritten, never zeroed.
    // At GPT-2 124M, B = 8 this is 3 GB instead of the 17 GB of a gradient per activation.
    struct GradientPlan {
        struct Layer {
            int64_t ln1, qkv, atty, ln2, fch, fchGelu;
        };
        int64_t residual = 0;
        int64_t preatt = 0, att = 0;
        Layer layer{};
        int64_t layerBegin = 0, layerEnd = 0;  // the span of `layer`, zeroed per layer
        int64_t lnf = 0, logits = 0, losses = 0;
        int64_t total = 0;
    };
    static ActivationPlan planActivations(const ModelConfig& config, int B, int T);
    static GradientPlan planGradients(const ModelConfig& config, int B, int T);

  private:
    void releaseAll();
    Status requireAllocated(const char* what) const;

    std::string m_name;
    std::unique_ptr<Ops> m_ops;
    std::function<int64_t()> m_availableBytes;

    std::optional<ParameterLayout> m_layout;
    ActivationPlan m_plan;
    GradientPlan m_gradPlan;
    int m_maxB = 0, m_maxT = 0;
    int m_b = 0, m_t = 0;  // shape of the last forward
    bool m_haveForward = false;
    int64_t m_step = 0;  // AdamW updates made with the current moments

    float* m_params = nullptr;
    float* m_grads = nullptr;
    float* m_m = nullptr;
    float* m_v = nullptr;
    float* m_acts = nullptr;
    float* m_gradActs = nullptr;
    int32_t* m_inputs = nullptr;
    int32_t* m_targets = nullptr;
    std::vector<float> m_hostLosses;  // (B,T) staging for the loss and dlosses
};

}  // namespace tandem
