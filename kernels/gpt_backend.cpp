#include "gpt_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace tandem {

namespace {

std::string formatBytes(int64_t bytes) {
    char text[64];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

}  // namespace

GptBackend::GptBackend(std::string name, std::unique_ptr<Ops> ops,
                       std::function<int64_t()> availableBytes)
    : m_name(std::move(name)), m_ops(std::move(ops)), m_availableBytes(std::move(availableBytes)) {}

GptBackend::~GptBackend() {
    releaseAll();
}

namespace {

// Hands out 64-byte aligned offsets (in floats) one after another.
class Offsets {
  public:
    int64_t take(int64_t count) {
        const int64_t offset = m_next;
        m_next += (count + 15) / 16 * 16;
        return offset;
    }
    int64_t next() const { return m_next; }

  private:
    int64_t m_next = 0;
};

}  // namespace

GptBackend::ActivationPlan GptBackend::planActivations(const ModelConfig& config, int B, int T) {
    const int64_t BT = int64_t{B} * T, C = config.channels, NH = config.heads;
    const int64_t Vp = config.paddedVocab();  // logits and probs rows are padded like wte
    ActivationPlan plan;
    Offsets o;
    plan.encoded = o.take(BT * C);
    for (int l = 0; l < config.layers; ++l) {
        ActivationPlan::Layer a{};
        a.ln1 = o.take(BT * C);
        a.ln1Mean = o.take(BT);
        a.ln1Rstd = o.take(BT);
        a.qkv = o.take(BT * 3 * C);
        a.atty = o.take(BT * C);
        a.att = o.take(B * NH * T * T);
        a.attnProj = o.take(BT * C);
        a.residual2 = o.take(BT * C);
        a.ln2 = o.take(BT * C);
        a.ln2Mean = o.take(BT);
        a.ln2Rstd = o.take(BT);
        a.fch = o.take(BT * 4 * C);
        a.fchGelu = o.take(BT * 4 * C);
        a.fcProj = o.take(BT * C);
        a.residual3 = o.take(BT * C);
        plan.layers.push_back(a);
    }
    plan.preatt = o.take(B * NH * T * T);
    plan.lnf = o.take(BT * C);
    plan.lnfMean = o.take(BT);
    plan.lnfRstd = o.take(BT);
    plan.logits = o.take(BT * Vp);
    plan.probs = o.take(BT * Vp);
    plan.losses = o.take(BT);
    plan.total = o.next();
    return plan;
}

GptBackend::GradientPlan GptBackend::planGradients(const ModelConfig& config, int B, int T) {
    const int64_t BT = int64_t{B} * T, C = config.channels, NH = config.heads;
    GradientPlan plan;
    Offsets o;
    plan.residual = o.take(BT * C);
    // Every attentionBackward overwrites its scratch, so it sits outside the zeroed span.
    plan.preatt = o.take(B * NH * T * T);
    plan.att = o.take(B * NH * T * T);
    plan.layerBegin = o.next();
    GradientPlan::Layer& g = plan.layer;
    g.ln1 = o.take(BT * C);
    g.qkv = o.take(BT * 3 * C);
    g.atty = o.take(BT * C);
    g.ln2 = o.take(BT * C);
    g.fch = o.take(BT * 4 * C);
    g.fchGelu = o.take(BT * 4 * C);
    plan.layerEnd = o.next();
    plan.lnf = o.take(BT * C);
    plan.logits = o.take(BT * config.paddedVocab());
    plan.losses = o.take(BT);
    plan.total = o.next();
    return plan;
}

MemoryEstimate GptBackend::estimateMemory(const ModelConfig& config, int B, int T) const {
    const int64_t P = config.parameterCount();
    MemoryEstimate e;
    e.parameterBytes = 2 * P * int64_t{sizeof(float)};
    e.optimizerBytes = 2 * P * int64_t{sizeof(float)};
    e.activationBytes = (planActivations(config, B, T).total + planGradients(config, B, T).total) *
                            int64_t{sizeof(float)} +
                        2 * int64_t{B} * T * int64_t{sizeof(int32_t)};
    return e;
}

Status GptBackend::canRun(const ModelConfig& config, int B, int T) const {
    if (auto s = config.validate(); !s)
        return s;
    if (B < 1 || T < 1 || T > config.maxSeqLen) {
        return makeError("batch " + std::to_string(B) + " x sequence " + std::to_string(T) +
                         " does not fit the model (sequence length 1 to " +
                         std::to_string(config.maxSeqLen) + ")");
    }
    const int64_t need = estimateMemory(config, B, T).total();
    const int64_t available = m_availableBytes ? m_availableBytes() : need;
    if (need > available) {
        return makeError(m_name + ": the work unit needs " + formatBytes(need) + " but only " +
                         formatBytes(available) + " is available");
    }
    return {};
}

void GptBackend::releaseAll() {
    for (void* p :
         {static_cast<void*>(m_params), static_cast<void*>(m_grads), static_cast<void*>(m_m),
          static_cast<void*>(m_v), static_cast<void*>(m_acts), static_cast<void*>(m_gradActs),
          static_cast<void*>(m_inputs), static_cast<void*>(m_targets)}) {
        if (p)
            m_ops->release(p);
    }
    m_params = m_grads = m_m = m_v = m_acts = m_gradActs = nullptr;
    m_inputs = m_targets = nullptr;
    m_layout.reset();
    m_haveForward = false;
}

Status GptBackend::allocate(const ModelConfig& config, int B, int T) {
    if (auto s = canRun(config, B, T); !s)
        return s;
    releaseAll();
    const int64_t P = config.parameterCount();
    m_plan = planActivations(config, B, T);
    m_gradPlan = planGradients(config, B, T);
    m_params = m_ops->allocateFloats(P);
    m_grads = m_ops->allocateFloats(P);
    m_m = m_ops->allocateFloats(P);
    m_v = m_ops->allocateFloats(P);
    m_acts = m_ops->allocateFloats(m_plan.total);
    m_gradActs = m_ops->allocateFloats(m_gradPlan.total);
    m_inputs = m_ops->allocateInts(int64_t{B} * T);
    m_targets = m_ops->allocateInts(int64_t{B} * T);
    if (!m_params || !m_grads || !m_m || !m_v || !m_acts || !m_gradActs || !m_inputs ||
        !m_targets) {
        releaseAll();
        return makeError(m_name + ": could not allocate " +
                         formatBytes(estimateMemory(config, B, T).total()) + " for " +
                         config.describe() + " at batch " + std::to_string(B) + " x " +
                         std::to_string(T));
    }
    if (auto s = m_ops->error(); !s) {
        releaseAll();
        return s;
    }
    m_layout.emplace(config);
    m_maxB = B;
    m_maxT = T;
    m_step = 0;
    m_hostLosses.assign(static_cast<size_t>(B) * T, 0.0f);
    return {};
}

Status GptBackend::requireAllocated(const char* what) const {
    if (!m_layout)
        return makeError(m_name + ": " + what + " before allocate()");
    return {};
}

static Status checkSize(const char* what, size_t found, int64_t expected) {
    if (static_cast<int64_t>(found) != expected) {
        return makeError(std::string(what) + ": expected " + std::to_string(expected) +
                         " values, found " + std::to_string(found));
    }
    return {};
}

Status GptBackend::loadParameters(std::span<const float> parameters) {
    if (auto s = requireAllocated("loadParameters"); !s)
        return s;
    if (auto s = checkSize("parameters", parameters.size(), m_layout->parameterCount()); !s)
        return s;
    m_ops->copyIn(m_params, parameters.data(), parameters.size());
    m_haveForward = false;  // the activations belong to the old weights
    return m_ops->error();
}

Status GptBackend::storeParameters(std::span<float> parameters) const {
    if (auto s = requireAllocated("storeParameters"); !s)
        return s;
    if (auto s = checkSize("parameters", parameters.size(), m_layout->parameterCount()); !s)
        return s;
    m_ops->copyOut(parameters.data(), m_params, parameters.size());
    return m_ops->error();
}

Status GptBackend::storeLogits(std::span<float> logits) const {
    if (!m_haveForward)
        return makeError("storeLogits: no forward has run");
    const int64_t V = m_layout->config().vocabSize, Vp = m_layout->config().paddedVocab();
    const int64_t rows = int64_t{m_b} * m_t;
    if (auto s = checkSize("logits", logits.size(), rows * V); !s)
        return s;
    for (int64_t i = 0; i < rows; ++i)  // the padded columns stay behind
        m_ops->copyOut(logits.data() + i * V, m_acts + m_plan.logits + i * Vp,
                       static_cast<size_t>(V));
    return m_ops->error();
}

Status GptBackend::storeGradients(std::span<float> gradients) const {
    if (auto s = requireAllocated("storeGradients"); !s)
        return s;
    if (auto s = checkSize("gradients", gradients.size(), m_layout->parameterCount()); !s)
        return s;
    m_ops->copyOut(gradients.data(), m_grads, gradients.size());
    return m_ops->error();
}

Status GptBackend::loadOptimizerState(const OptimizerState& state) {
    if (auto s = requireAllocated("loadOptimizerState"); !s)
        return s;
    const int64_t P = m_layout->parameterCount();
    if (auto s = checkSize("AdamW first moments", state.m.size(), P); !s)
        return s;
    if (auto s = checkSize("AdamW second moments", state.v.size(), P); !s)
        return s;
    if (state.step < 0)
        return makeError("AdamW step count is negative");
    m_ops->copyIn(m_m, state.m.data(), state.m.size());
    m_ops->copyIn(m_v, state.v.data(), state.v.size());
    m_step = state.step;
    return m_ops->error();
}

Expected<OptimizerState> GptBackend::storeOptimizerState() const {
    if (auto s = requireAllocated("storeOptimizerState"); !s)
        return s.error();
    const int64_t P = m_layout->parameterCount();
    OptimizerState state;
    state.m.resize(P);
    state.v.resize(P);
    m_ops->copyOut(state.m.data(), m_m, P);
    m_ops->copyOut(state.v.data(), m_v, P);
    if (auto s = m_ops->error(); !s)
        return s.error();
    state.step = m_step;
    return state;
}

Expected<float> GptBackend::forward(std::span<const int32_t> inputs,
                                    std::span<const int32_t> targets, int b, int t) {
    if (auto s = requireAllocated("forward"); !s)
        return s.error();
    if (b < 1 || t < 1 || b > m_maxB || t > m_maxT) {
        return makeError("forward: batch " + std::to_string(b) + " x " + std::to_string(t) +
                         " exceeds the allocated " + std::to_string(m_maxB) + " x " +
                         std::to_string(m_maxT));
    }
    const int64_t n = int64_t{b} * t;
    if (auto s = checkSize("inputs", inputs.size(), n); !s)
        return s.error();
    if (auto s = checkSize("targets", targets.size(), n); !s)
        return s.error();
    const ModelConfig& cfg = m_layout->config();
    for (int64_t i = 0; i < n; ++i) {
        if (inputs[i] < 0 || inputs[i] >= cfg.vocabSize || targets[i] < 0 ||
            targets[i] >= cfg.vocabSize) {
            return makeError("forward: token at position " + std::to_string(i) +
                             " is outside the vocabulary of " + std::to_string(cfg.vocabSize));
        }
    }
    m_ops->copyInInts(m_inputs, inputs.data(), n);
    m_ops->copyInInts(m_targets, targets.data(), n);

    const int C = cfg.channels, NH = cfg.heads, V = cfg.vocabSize, Vp = cfg.paddedVocab();
    const int64_t btc = n * C;
    const ParameterLayout& lay = *m_layout;
    const BlockOffsets& o = lay.block();
    Ops& ops = *m_ops;
    float* a = m_acts;
    const float* w = m_params;

    ops.encoderForward(a + m_plan.encoded, m_inputs, w + lay.wte(), w + lay.wpe(), b, t, C);
    const float* residual = a + m_plan.encoded;
    for (int l = 0; l < cfg.layers; ++l) {
        const auto& L = m_plan.layers[l];
        const float* p = w + lay.blockStart(l);
        ops.layernormForward(a + L.ln1, a + L.ln1Mean, a + L.ln1Rstd, residual, p + o.ln1Weight,
                             p + o.ln1Bias, b, t, C);
        ops.matmulForward(a + L.qkv, a + L.ln1, p + o.qkvWeight, p + o.qkvBias, b, t, C, 3 * C);
        ops.attentionForward(a + L.atty, a + m_plan.preatt, a + L.att, a + L.qkv, b, t, C, NH);
        ops.matmulForward(a + L.attnProj, a + L.atty, p + o.attnProjWeight, p + o.attnProjBias, b,
                          t, C, C);
        ops.residualForward(a + L.residual2, residual, a + L.attnProj, btc);
        ops.layernormForward(a + L.ln2, a + L.ln2Mean, a + L.ln2Rstd, a + L.residual2,
                             p + o.ln2Weight, p + o.ln2Bias, b, t, C);
        ops.matmulForward(a + L.fch, a + L.ln2, p + o.fcWeight, p + o.fcBias, b, t, C, 4 * C);
        ops.geluForward(a + L.fchGelu, a + L.fch, 4 * btc);
        ops.matmulForward(a + L.fcProj, a + L.fchGelu, p + o.fcProjWeight, p + o.fcProjBias, b, t,
                          4 * C, C);
        ops.residualForward(a + L.residual3, a + L.residual2, a + L.fcProj, btc);
        residual = a + L.residual3;
    }
    ops.layernormForward(a + m_plan.lnf, a + m_plan.lnfMean, a + m_plan.lnfRstd, residual,
                         w + lay.lnfWeight(), w + lay.lnfBias(), b, t, C);
    // Logits for all Vp rows of wte (aligned products); the softmax ignores the padded ones.
    ops.matmulForward(a + m_plan.logits, a + m_plan.lnf, w + lay.wte(), nullptr, b, t, C, Vp);
    ops.softmaxCrossEntropyForward(a + m_plan.losses, a + m_plan.probs, a + m_plan.logits,
                                   m_targets, b, t, V, Vp);

    ops.copyOut(m_hostLosses.data(), a + m_plan.losses, n);
    if (auto s = ops.error(); !s)
        return s.error();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
        sum += m_hostLosses[i];
    m_b = b;
    m_t = t;
    m_haveForward = true;
    return static_cast<float>(sum / static_cast<double>(n));
}

Status GptBackend::storeProbabilities(int row, int position, std::span<float> out) const {
    if (auto s = requireAllocated("storeProbabilities"); !s)
        return s;
    if (!m_haveForward)
        return makeError("storeProbabilities: no forward pass yet");
    if (row < 0 || row >= m_b || position < 0 || position >= m_t)
        return makeError("storeProbabilities: row " + std::to_string(row) + ", position " +
                         std::to_string(position) + " is outside the last forward's " +
                         std::to_string(m_b) + " x " + std::to_string(m_t));
    const int64_t V = m_layout->config().vocabSize;
    if (auto s = checkSize("probabilities", out.size(), V); !s)
        return s;
    const int64_t at =
        m_plan.probs + (int64_t{row} * m_t + position) * m_layout->config().paddedVocab();
    m_ops->copyOut(out.data(), m_acts + at, V);
    return m_ops->error();
}

Status GptBackend::backward() {
    if (auto s = requireAllocated("backward"); !s)
        return s;
    if (!m_haveForward)
        return makeError("backward: no forward pass to differentiate");
    const ModelConfig& cfg = m_layout->config();
    const int b = m_b, t = m_t, C = cfg.channels, NH = cfg.heads, V = cfg.vocabSize,
              Vp = cfg.paddedVocab();
    const int64_t n = int64_t{b} * t, btc = n * C;
    const ParameterLayout& lay = *m_layout;
    const BlockOffsets& o = lay.block();
    Ops& ops = *m_ops;
    const float* a = m_acts;
    float* g = m_gradActs;
    const float* w = m_params;
    float* dw = m_grads;

    const GradientPlan& gp = m_gradPlan;
    ops.fillZero(m_grads, lay.parameterCount());
    // All but the attention's scratch, which attentionBackward overwrites.
    ops.fillZero(m_gradActs, gp.preatt);
    ops.fillZero(m_gradActs + gp.layerBegin, gp.total - gp.layerBegin);
    std::fill(m_hostLosses.begin(), m_hostLosses.begin() + n, 1.0f / static_cast<float>(n));
    ops.copyIn(g + gp.losses, m_hostLosses.data(), n);

    // The padded logits get no gradient, so the padded rows of dwte stay exactly zero.
    ops.crossEntropySoftmaxBackward(g + gp.logits, g + gp.losses, a + m_plan.probs, m_targets, b, t,
                                    V, Vp);
    ops.matmulBackward(g + gp.lnf, dw + lay.wte(), nullptr, g + gp.logits, a + m_plan.lnf,
                       w + lay.wte(), b, t, C, Vp);
    // The residual stream's gradient stays in one buffer, gp.residual: a residual add passes its
    // output's gradient unchanged to both inputs, so each branch's products read it as their
    // output gradient and each block's layernorm adds its input's gradient into it in place.
    float* dresidual = g + gp.residual;
    const int last = cfg.layers - 1;
    ops.layernormBackward(dresidual, dw + lay.lnfWeight(), dw + lay.lnfBias(), g + gp.lnf,
                          a + m_plan.layers[last].residual3, w + lay.lnfWeight(),
                          a + m_plan.lnfMean, a + m_plan.lnfRstd, b, t, C);
    const GradientPlan::Layer& G = gp.layer;
    for (int l = last; l >= 0; --l) {
        const auto& L = m_plan.layers[l];
        const int64_t in = l == 0 ? m_plan.encoded : m_plan.layers[l - 1].residual3;
        if (l != last)  // the layer above left its gradients in the scratch
            ops.fillZero(g + gp.layerBegin, gp.layerEnd - gp.layerBegin);
        const float* p = w + lay.blockStart(l);
        float* dp = dw + lay.blockStart(l);
        // residual3 = residual2 + fcProj: dresidual is the gradient of both.
        ops.matmulBackward(g + G.fchGelu, dp + o.fcProjWeight, dp + o.fcProjBias, dresidual,
                           a + L.fchGelu, p + o.fcProjWeight, b, t, 4 * C, C);
        ops.geluBackward(g + G.fch, a + L.fch, g + G.fchGelu, 4 * btc);
        ops.matmulBackward(g + G.ln2, dp + o.fcWeight, dp + o.fcBias, g + G.fch, a + L.ln2,
                           p + o.fcWeight, b, t, C, 4 * C);
        ops.layernormBackward(dresidual, dp + o.ln2Weight, dp + o.ln2Bias, g + G.ln2,
                              a + L.residual2, p + o.ln2Weight, a + L.ln2Mean, a + L.ln2Rstd, b, t,
                              C);
        // residual2 = in + attnProj: dresidual is now the gradient of both.
        ops.matmulBackward(g + G.atty, dp + o.attnProjWeight, dp + o.attnProjBias, dresidual,
                           a + L.atty, p + o.attnProjWeight, b, t, C, C);
        ops.attentionBackward(g + G.qkv, g + gp.preatt, g + gp.att, g + G.atty, a + L.qkv,
                              a + L.att, b, t, C, NH);
        ops.matmulBackward(g + G.ln1, dp + o.qkvWeight, dp + o.qkvBias, g + G.qkv, a + L.ln1,
                           p + o.qkvWeight, b, t, C, 3 * C);
        ops.layernormBackward(dresidual, dp + o.ln1Weight, dp + o.ln1Bias, g + G.ln1, a + in,
                              p + o.ln1Weight, a + L.ln1Mean, a + L.ln1Rstd, b, t, C);
    }
    ops.encoderBackward(dw + lay.wte(), dw + lay.wpe(), dresidual, m_inputs, b, t, C);
    return ops.error();
}

Expected<StepStats> GptBackend::adamwStep(const AdamWConfig& config, float lr) {
    if (auto s = requireAllocated("adamwStep"); !s)
        return s.error();
    const double norm = std::sqrt(m_ops->sumSquares(m_grads, m_layout->parameterCount()));
    if (auto s = m_ops->error(); !s)
        return s.error();
    if (!std::isfinite(norm)) {
        return makeError("the gradient is not finite (NaN or Inf); the update was not applied");
    }
    const float scale = config.clipNorm > 0 && norm > config.clipNorm
                            ? static_cast<float>(config.clipNorm / norm)
                            : 1.0f;
    ++m_step;
    for (const auto& t : m_layout->tensors()) {
        m_ops->adamwUpdate(m_params + t.offset, m_grads + t.offset, m_m + t.offset, m_v + t.offset,
                           t.size, lr, config.beta1, config.beta2, config.eps,
                           t.decays ? config.weightDecay : 0.0f, scale, m_step);
    }
    if (auto s = m_ops->error(); !s)
        return s.error();
    return StepStats{static_cast<float>(norm), lr};
}

Expected<EncodeStats> GptBackend::encodePseudoGradient(std::span<const float> start,
                                                       std::span<uint16_t> out) {
    if (auto s = requireAllocated("encodePseudoGradient"); !s)
        return s.error();
    const int64_t P = m_layout->parameterCount();
    if (auto s = checkSize("start parameters", start.size(), P); !s)
        return s.error();
    if (auto s = checkSize("pseudo-gradient", out.size(), P); !s)
        return s.error();
    // The gradient buffer is free between steps: it holds the start weights on the device.
    m_ops->copyIn(m_grads, start.data(), P);
    m_haveForward = false;
    const EncodeStats stats = m_ops->encodeDeltaFp16(out.data(), m_grads, m_params, P);
    // Leave no start weights behind for storeGradients or adamwStep to take for gradients.
    m_ops->fillZero(m_grads, P);
    if (auto s = m_ops->error(); !s)
        return s.error();
    if (stats.nonFinite > 0) {
        return makeError("the pseudo-gradient has " + std::to_string(stats.nonFinite) +
                         " values that are NaN or Inf; the result must not be sent");
    }
    return stats;
}

}  // namespace tandem
