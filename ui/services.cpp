#include "services.hpp"

#include <algorithm>

namespace tandem::ui {

CostEstimate estimateCosts(int64_t parameterCount, int64_t dataBytesPerUnit,
                           double downMbitPerSecond, double upMbitPerSecond,
                           double trainSecondsPerUnit, double hoursPerDay) {
    CostEstimate c;
    constexpr int64_t kResultHeaderBytes = 128;
    c.downloadBytesPerUnit = 4 * parameterCount + dataBytesPerUnit;
    c.uploadBytesPerUnit = 2 * parameterCount + kResultHeaderBytes;
    auto seconds = [](int64_t bytes, double mbit) {
        return mbit > 0 ? static_cast<double>(bytes) * 8 / (mbit * 1e6) : 0.0;
    };
    c.downloadSecondsPerUnit = seconds(c.downloadBytesPerUnit, downMbitPerSecond);
    c.uploadSecondsPerUnit = seconds(c.uploadBytesPerUnit, upMbitPerSecond);
    c.trainSecondsPerUnit = trainSecondsPerUnit;
    // The download sits between units; the upload overlaps the next unit's training, so a slow
    // uplink only limits the pace when it takes longer than training.
    const double perUnit =
        c.downloadSecondsPerUnit + std::max(c.trainSecondsPerUnit, c.uploadSecondsPerUnit);
    c.unitsPerDay = perUnit > 0 ? hoursPerDay * 3600 / perUnit : 0;
    c.downloadBytesPerDay = c.unitsPerDay * static_cast<double>(c.downloadBytesPerUnit);
    c.uploadBytesPerDay = c.unitsPerDay * static_cast<double>(c.uploadBytesPerUnit);
    return c;
}

}  // namespace tandem::ui
