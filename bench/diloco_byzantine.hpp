// Byzantine workers in tandem-bench-diloco: what an attacker uploads instead of its honest delta,
// and the coordinator's gate on every upload (coordinator/robust_gate.hpp, the same rules), or the
// gate before it (a norm bound against the upper median of results attackers contribute to).
//
// Dimensions: P parameters.
#pragma once

#include "random.hpp"
#include "robust_gate.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem::bench {

enum class Attack { None, Scaled, Noise, Flip, Zero, Nan, Replay, Ratchet };
enum class GateRule { None, Old, Robust };

// "scaled" ... "ratchet"; false for an unknown name.
bool parseAttack(const std::string& name, Attack* out);

// The coordinator's view of one run's uploads.
class ByzantineGate {
  public:
    ByzantineGate(GateRule rule, int64_t P);

    // The norm the gate compares an upload of round r with (0: none yet).
    double reference(int round) const;
    // Replaces an attacker's honest delta (P, theta_start - theta_end) with its attack.
    void attack(Attack a, std::span<float> delta, int round, Rng& rng);
    // The weight factor for an upload committed now: 0 when refused, 1 when accepted as it is.
    // theta: the weights it trained from.
    double judge(int round, std::span<const float> delta, std::span<const float> theta);
    // After the outer step: the step theta_before - theta_after is what the next round's
    // uploads are compared with.
    void endRound(std::span<const float> before, std::span<const float> after);

    int refused = 0, downWeighted = 0;

  private:
    GateRule m_rule;
    coord::GateConfig m_cfg;
    std::vector<std::pair<int, double>> m_accepted;  // (round, norm)
    std::vector<float> m_lastStep;                   // (P)
    std::vector<float> m_firstAttack;                // (P) what a replay sends again
    std::vector<size_t> m_acceptedHashes;
};

}  // namespace tandem::bench
