#include "cost_estimate.hpp"

#include "result_format.hpp"
#include "weight_delta_file.hpp"

#include <algorithm>
#include <bit>

namespace tandem::core {

namespace {

// Round trips per unit besides the transfers' own: the work request, the weights and the data
// downloads, the upload and its answer.
constexpr int kRoundTripsPerUnit = 4;

double transferSeconds(int64_t bytes, double mbitPerSecond) {
    return mbitPerSecond > 0 ? static_cast<double>(bytes) * 8 / (mbitPerSecond * 1e6) : 0.0;
}

}  // namespace

CostEstimate estimateCosts(const CostInputs& in) {
    CostEstimate c;
    const int64_t payload = net::resultPayloadBytes(in.resultEncoding, in.parameterCount);
    c.uploadBytesPerUnit = (payload > 0 ? payload : 2 * in.parameterCount) +
                           static_cast<int64_t>(net::kResultHeaderBytes);
    // Once the worker has uploaded a result the coordinator knows its uplink and makes a unit
    // last at least as long as its upload: the estimate is of that steady state.
    UnitSizing sizing = in.sizing;
    sizing.resultBytes = c.uploadBytesPerUnit;
    c.innerSteps = innerStepsFor(sizing, in.tokensPerSecond, in.upMbitPerSecond * 1e6 / 8);
    c.tokensPerUnit = int64_t{c.innerSteps} * in.sizing.tokensPerStep;
    // The worker downloads exactly its range: H batches of windows.
    const int64_t weightBytes = in.weightDeltas == WeightDeltaCodec::Off
                                    ? 4 * in.parameterCount
                                    : weightDeltaFileBytes(in.weightDeltas, in.parameterCount);
    c.downloadBytesPerUnit =
        weightBytes + c.tokensPerUnit * std::max(1, in.tokenBytes) + kManifestBytes;
    c.downloadSecondsPerUnit = transferSeconds(c.downloadBytesPerUnit, in.downMbitPerSecond);
    c.uploadSecondsPerUnit = transferSeconds(c.uploadBytesPerUnit, in.upMbitPerSecond);
    if (in.tokensPerSecond <= 0)
        return c;
    c.trainSecondsPerUnit = static_cast<double>(c.tokensPerUnit) / in.tokensPerSecond;
    const double inTurn = in.latencyMs / 1000 * kRoundTripsPerUnit + c.downloadSecondsPerUnit +
                          in.setupSeconds + c.trainSecondsPerUnit;
    c.secondsPerUnit = std::max(inTurn, c.uploadSecondsPerUnit);
    c.unitsPerDay = c.secondsPerUnit > 0 ? in.hoursPerDay * 3600 / c.secondsPerUnit : 0;
    // The engine stops for the day when a cap is reached (core/rules.hpp).
    for (auto [cap, perUnit] : {std::pair{in.dailyDownloadCapBytes, c.downloadBytesPerUnit},
                                std::pair{in.dailyUploadCapBytes, c.uploadBytesPerUnit}}) {
        const double byCap = static_cast<double>(cap) / static_cast<double>(perUnit);
        if (cap > 0 && byCap < c.unitsPerDay) {
            c.unitsPerDay = byCap;
            c.capped = true;
        }
    }
    c.downloadBytesPerDay = c.unitsPerDay * static_cast<double>(c.downloadBytesPerUnit);
    c.uploadBytesPerDay = c.unitsPerDay * static_cast<double>(c.uploadBytesPerUnit);
    c.trainingHoursPerDay = c.unitsPerDay * c.trainSecondsPerUnit / 3600;
    c.kwhPerDay = in.deviceWatts > 0 ? in.deviceWatts * c.trainingHoursPerDay / 1000 : 0;
    c.costPerDay = in.pricePerKwh > 0 ? c.kwhPerDay * in.pricePerKwh : 0;
    return c;
}

double scheduledHoursPerDay(const RulesConfig& rules) {
    if (!rules.useTimeWindows)
        return 24;
    double minutesPerWeek = 0;
    for (const TimeWindow& w : rules.timeWindows) {
        const int minutes = w.endMinute > w.startMinute ? w.endMinute - w.startMinute
                                                        : w.endMinute + 1440 - w.startMinute;
        minutesPerWeek += minutes * std::popcount(static_cast<unsigned>(w.weekdays & 0x7f));
    }
    return std::min(24.0, minutesPerWeek / 7 / 60);
}

}  // namespace tandem::core
