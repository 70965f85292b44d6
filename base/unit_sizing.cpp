#include "unit_sizing.hpp"

#include <algorithm>
#include <cmath>

namespace tandem {

int innerStepsFor(const UnitSizing& sizing, double tokensPerSecond) {
    if (tokensPerSecond <= 0 || sizing.tokensPerStep <= 0)
        return sizing.maxInnerSteps;
    const double steps =
        tokensPerSecond * sizing.targetSeconds / static_cast<double>(sizing.tokensPerStep);
    return static_cast<int>(
        std::clamp<double>(std::floor(steps), sizing.minInnerSteps, sizing.maxInnerSteps));
}

}  // namespace tandem
