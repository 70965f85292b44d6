#include "optimizer.hpp"

#include <cmath>

namespace tandem {

float LrSchedule::at(int64_t step) const {
    if (step < warmupSteps) {
        return peakLr * static_cast<float>(step + 1) / static_cast<float>(warmupSteps);
    }
    const int64_t decaySteps = totalSteps - warmupSteps;
    if (decaySteps <= 0 || step >= totalSteps)
        return minLr;
    const double progress =
        static_cast<double>(step - warmupSteps) / static_cast<double>(decaySteps);
    const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
    return static_cast<float>(minLr + (peakLr - minLr) * cosine);
}

}  // namespace tandem
