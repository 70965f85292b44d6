#include "unit_sizing.hpp"

#include <algorithm>
#include <cmath>

namespace tandem {

int innerStepsFor(const UnitSizing& sizing, double tokensPerSecond, double uplinkBytesPerSecond) {
    if (tokensPerSecond <= 0 || sizing.tokensPerStep <= 0)
        return sizing.maxInnerSteps;
    double seconds = sizing.targetSeconds;
    if (uplinkBytesPerSecond > 0 && sizing.resultBytes > 0)
        seconds = std::max(seconds, kUploadMargin * static_cast<double>(sizing.resultBytes) /
                                        uplinkBytesPerSecond);
    const double steps = tokensPerSecond * seconds / static_cast<double>(sizing.tokensPerStep);
    return static_cast<int>(
        std::clamp<double>(std::floor(steps), sizing.minInnerSteps, sizing.maxInnerSteps));
}

}  // namespace tandem
