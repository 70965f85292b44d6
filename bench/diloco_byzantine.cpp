#include "diloco_byzantine.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>

namespace tandem::bench {

bool parseAttack(const std::string& name, Attack* out) {
    static const std::pair<const char*, Attack> kNames[] = {
        {"scaled", Attack::Scaled},  {"noise", Attack::Noise}, {"flip", Attack::Flip},
        {"zero", Attack::Zero},      {"nan", Attack::Nan},     {"replay", Attack::Replay},
        {"ratchet", Attack::Ratchet}};
    for (const auto& [n, a] : kNames)
        if (name == n) {
            *out = a;
            return true;
        }
    return false;
}

ByzantineGate::ByzantineGate(GateRule rule, int64_t P) : m_rule(rule) {
    m_lastStep.reserve(static_cast<size_t>(P));
}

double ByzantineGate::reference(int round) const {
    std::vector<double> norms;
    if (m_rule == GateRule::Robust) {
        for (const auto& [r, n] : m_accepted)
            if (r > round - m_cfg.referenceRounds)
                norms.push_back(n);
        return coord::robustReference(norms).value_or(0);
    }
    // The old rule: the upper median of this round's results, or else the last round's.
    for (int r : {round, round - 1}) {
        for (const auto& [rr, n] : m_accepted)
            if (rr == r)
                norms.push_back(n);
        if (!norms.empty()) {
            std::sort(norms.begin(), norms.end());
            return norms[norms.size() / 2];
        }
    }
    return 0;
}

void ByzantineGate::attack(Attack a, std::span<float> delta, int round, Rng& rng) {
    const double honest = coord::l2Norm(delta);
    switch (a) {
        case Attack::None:
            return;
        case Attack::Scaled:  // far beyond any bound but the old, relative one
            for (float& x : delta)
                x *= 100.0f;
            return;
        case Attack::Noise: {  // a random direction at 9.9 x the honest norm
            for (float& x : delta)
                x = rng.normal();
            const double n = coord::l2Norm(delta);
            for (float& x : delta)
                x = static_cast<float>(x * 9.9 * honest / n);
            return;
        }
        case Attack::Flip:
            for (float& x : delta)
                x = -x;
            return;
        case Attack::Zero:
            std::fill(delta.begin(), delta.end(), 0.0f);
            return;
        case Attack::Nan:
            for (size_t i = 0; i < delta.size(); i += 97)
                delta[i] = std::numeric_limits<float>::quiet_NaN();
            return;
        case Attack::Replay:  // its first result, again and again
            if (m_firstAttack.empty())
                m_firstAttack.assign(delta.begin(), delta.end());
            else
                std::copy(m_firstAttack.begin(), m_firstAttack.end(), delta.begin());
            return;
        case Attack::Ratchet: {  // the honest direction at 9.9 x the reference it will meet
            const double ref = reference(round);
            const double target = 9.9 * (ref > 0 ? ref : honest);
            for (float& x : delta)
                x = static_cast<float>(x * target / honest);
            return;
        }
    }
}

double ByzantineGate::judge(int round, std::span<const float> delta, std::span<const float> theta) {
    const double norm = coord::l2Norm(delta);
    double factor = 1;
    if (!std::isfinite(norm)) {
        factor = 0;  // the upload stream's non_finite, before any gate
    } else if (m_rule == GateRule::Old) {
        const double ref = reference(round);
        if (ref > 0 && norm > m_cfg.maxNormRatio * ref)
            factor = 0;
    } else if (m_rule == GateRule::Robust) {
        const size_t hash = std::hash<std::string_view>{}(std::string_view(
            reinterpret_cast<const char*>(delta.data()), delta.size() * sizeof(float)));
        if (std::find(m_acceptedHashes.begin(), m_acceptedHashes.end(), hash) !=
            m_acceptedHashes.end()) {
            factor = 0;  // the coordinator's replayed_result
        } else {
            coord::GateInput in;
            in.norm = norm;
            in.weightsNorm = coord::l2Norm(theta);
            if (const double ref = reference(round); ref > 0)
                in.reference = ref;
            if (!m_lastStep.empty())  // as the coordinator: the last outer step
                in.cosine = coord::cosineSimilarity(delta, m_lastStep);
            const auto verdict = coord::judgeResult(in, m_cfg);
            factor = verdict.accepted() ? verdict.weightFactor : 0;
            if (factor > 0)
                m_acceptedHashes.push_back(hash);
        }
    }
    if (factor == 0) {
        ++refused;
        return 0;
    }
    if (factor < 1)
        ++downWeighted;
    m_accepted.emplace_back(round, norm);
    return factor;
}

void ByzantineGate::endRound(std::span<const float> before, std::span<const float> after) {
    m_lastStep.resize(before.size());
    for (size_t i = 0; i < before.size(); ++i)
        m_lastStep[i] = before[i] - after[i];
}

}  // namespace tandem::bench
