// What taking part costs a donor: time and data per work unit and per day, and the energy, from
// the device's measured training speed (speed_test.hpp), the run's model size and unit sizing
// (GET /v1/status: the coordinator's target seconds and its limits on the inner steps, applied
// by the same rule the coordinator uses, base/unit_sizing.hpp), the measured link and the
// donor's hours. Plain numbers; the wizard and the Overview format them (docs/costs.md).
#pragma once

#include "result_format.hpp"
#include "rules.hpp"
#include "unit_sizing.hpp"
#include "weight_delta.hpp"

#include <cstdint>

namespace tandem::core {

// A CPU has no power sensor Tandem can read, so its draw is stated, not measured: about this
// much per training thread above idle (desktop CPUs draw 10-20 W per busy core).
inline constexpr double kCpuWattsPerThread = 12;

// The signed manifest of a unit (JSON, about 1-2 kB), counted with its download.
inline constexpr int64_t kManifestBytes = 1536;

struct CostInputs {
    int64_t parameterCount = 0;  // P, as the coordinator counts it (padded)
    UnitSizing sizing;           // the run's B x T, target seconds and limits on H
    int tokenBytes = 1;          // of the unit's data range
    uint32_t resultEncoding = net::kEncodingFp16;  // the run's (GET /v1/status)
    // The run's weight deltas: a worker that holds the last unit's weights downloads only the
    // delta to the next version (core/weight_rebuild.hpp), one a unit in the steady state.
    WeightDeltaCodec weightDeltas = WeightDeltaCodec::Off;
    double tokensPerSecond = 0;  // the device's measured speed; 0: not measured
    double setupSeconds = 0;     // per unit: loading the weights into the device
    double downMbitPerSecond = 0, upMbitPerSecond = 0;  // 0: not measured
    double latencyMs = 0;
    double hoursPerDay = 24;  // how long the device may work each day
    int64_t dailyDownloadCapBytes = 0, dailyUploadCapBytes = 0;  // 0: no cap
    double deviceWatts = 0;                                      // drawn while training; 0: unknown
    double pricePerKwh = 0;                                      // 0: not given
};

struct CostEstimate {
    int innerSteps = 0;  // H the coordinator will give this device
    int64_t tokensPerUnit = 0;
    int64_t downloadBytesPerUnit = 0;  // fp32 weights or their delta, the data range, the manifest
    int64_t uploadBytesPerUnit = 0;    // the encoded pseudo-gradient and its header
    double downloadSecondsPerUnit = 0;
    double uploadSecondsPerUnit = 0;
    double trainSecondsPerUnit = 0;
    double secondsPerUnit = 0;  // one unit after another; 0 when the speed is not known
    double unitsPerDay = 0;
    bool capped = false;  // a daily cap, not the hours, limits the units per day
    double downloadBytesPerDay = 0, uploadBytesPerDay = 0;
    double trainingHoursPerDay = 0;
    double kwhPerDay = 0;   // 0 when the device's draw is unknown
    double costPerDay = 0;  // 0 when no price was given
};

// Units run back to back: fetching and downloading a unit, loading it and training it happen in
// turn, while the previous result uploads, so a slow uplink only sets the pace when an upload
// takes longer than all of that.
CostEstimate estimateCosts(const CostInputs& in);

// The hours a day the schedule rule allows, averaged over the week (a window that ends at or
// before its start runs past midnight; an overlap of windows counts once per window): 24 when
// the rule is off.
double scheduledHoursPerDay(const RulesConfig& rules);

}  // namespace tandem::core
