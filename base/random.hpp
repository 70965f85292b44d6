// A small deterministic random generator: the same seed gives the same numbers on every
// platform and compiler (the standard distributions do not promise that).
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem {

class Rng {
  public:
    explicit Rng(uint64_t seed) : m_state(seed) {}

    // splitmix64
    uint64_t next() {
        uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1) with 24 bits.
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
    // Uniform integer in [0, bound).
    uint64_t below(uint64_t bound) { return bound == 0 ? 0 : next() % bound; }
    // Standard normal (Box-Muller).
    float normal() {
        double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
        double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                  std::cos(6.283185307179586 * u2));
    }

    uint64_t state() const { return m_state; }
    void setState(uint64_t state) { m_state = state; }

  private:
    uint64_t m_state;
};

}  // namespace tandem
