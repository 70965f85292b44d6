#include "robust_gate.hpp"

#include "messages.hpp"  // fmt

#include <algorithm>
#include <cmath>

namespace tandem::coord {

namespace {

GateVerdict refusal(std::string code, std::string message) {
    GateVerdict v;
    v.code = std::move(code);
    v.message = std::move(message);
    v.weightFactor = 0;
    return v;
}

}  // namespace

GateVerdict judgeResult(const GateInput& in, const GateConfig& cfg) {
    if (!std::isfinite(in.norm))
        return refusal("non_finite", "the delta's norm is not finite");
    if (in.norm == 0)
        return refusal("zero_delta", "the delta is all zeros: the result carries no training");
    if (cfg.maxAbsoluteNorm > 0 && in.norm > cfg.maxAbsoluteNorm)
        return refusal("norm_above_bound", "the delta's norm " + fmt(in.norm) +
                                               " is above the run's bound " +
                                               fmt(cfg.maxAbsoluteNorm));
    if (cfg.maxRelativeNorm > 0 && in.weightsNorm > 0 &&
        in.norm > cfg.maxRelativeNorm * in.weightsNorm)
        return refusal("norm_above_bound", "the delta's norm " + fmt(in.norm) + " is more than " +
                                               fmt(cfg.maxRelativeNorm) + " times the norm " +
                                               fmt(in.weightsNorm) +
                                               " of the weights it trained from");
    GateVerdict v;
    if (in.reference && *in.reference > 0) {
        const double ref = *in.reference;
        if (in.norm > cfg.maxNormRatio * ref)
            return refusal("outlier_norm",
                           "the delta's norm " + fmt(in.norm) + " is more than " +
                               fmt(cfg.maxNormRatio) + " times the reference " + fmt(ref) +
                               " (lower median of recent accepted results); the result is "
                               "refused as an outlier");
        if (in.norm < cfg.minNormRatio * ref)
            return refusal("zero_delta", "the delta's norm " + fmt(in.norm) + " is less than " +
                                             fmt(cfg.minNormRatio) + " times the reference " +
                                             fmt(ref) + ": the result carries almost no training");
        if (cfg.clipRatio > 0 && in.norm > cfg.clipRatio * ref) {
            v.weightFactor = cfg.clipRatio * ref / in.norm;
            v.message = "weight x " + fmt(v.weightFactor) + ": the norm " + fmt(in.norm) +
                        " is above " + fmt(cfg.clipRatio) + " times the reference " + fmt(ref);
        }
    }
    if (in.cosine && *in.cosine < cfg.minCosine)
        return refusal("wrong_direction",
                       "the delta's cosine similarity to the last outer step is " +
                           fmt(*in.cosine) + ", below " + fmt(cfg.minCosine) +
                           " (a sign-flipped or unrelated update)");
    return v;
}

std::optional<double> robustReference(std::vector<double> norms) {
    if (norms.empty())
        return std::nullopt;
    const auto mid = norms.begin() + static_cast<std::ptrdiff_t>((norms.size() - 1) / 2);
    std::nth_element(norms.begin(), mid, norms.end());
    return *mid;
}

void CosineAccumulator::add(std::span<const float> a, std::span<const float> b) {
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        m_ab += double(a[i]) * double(b[i]);
        m_aa += double(a[i]) * double(a[i]);
        m_bb += double(b[i]) * double(b[i]);
    }
}

std::optional<double> CosineAccumulator::value() const {
    if (m_aa == 0 || m_bb == 0)
        return std::nullopt;
    return m_ab / std::sqrt(m_aa * m_bb);
}

std::optional<double> cosineSimilarity(std::span<const float> a, std::span<const float> b) {
    CosineAccumulator c;
    c.add(a, b);
    return c.value();
}

double l2Norm(std::span<const float> v) {
    double s = 0;
    for (float x : v)
        s += double(x) * double(x);
    return std::sqrt(s);
}

}  // namespace tandem::coord
