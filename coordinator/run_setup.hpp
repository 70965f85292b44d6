// Run set-up: what a run fixes when it is created (the model and the shape of its work units,
// stored as runs.config_json), checked from the coordinator's configuration and read back at
// every start. Creating and restoring the run itself are Coordinator::Impl::createRun and
// restore (run_setup.cpp).
#pragma once

#include "coordinator.hpp"
#include "optimizer.hpp"
#include "result_format.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::coord {

struct RunSettings {
    ModelConfig model;
    int innerSteps = 0;     // H for a worker of unknown or ample throughput (the maximum)
    int minInnerSteps = 1;  // H for the slowest worker
    int batch = 0;
    int seqLen = 0;
    float peakLr = 0, minLr = 0;
    int64_t lrWarmupSteps = 0, lrDecaySteps = 0;
    uint64_t seed = 0;               // 53 bits, so that JSON keeps it exact
    std::string dataKind = "bytes";  // run_data.hpp: bytes, sentencepiece or llmc
    // What the run's results carry (net/result_format.hpp): fixed when the run is created, so
    // that a restart decodes its stored payloads as they were sent.
    uint32_t resultEncoding = net::kEncodingFp16;
    WeightDeltaCodec weightDeltas = WeightDeltaCodec::Off;  // runs from before it: off
    // Aggregation shards K (docs/protocol.md, "Sharded runs"): 1, one process takes whole
    // results; K > 1, K processes each take a range's pieces (net::pieceRanges).
    int shards = 1;

    // The inner lr over the run's steps: warmup, then constant at the peak, or with
    // lrDecaySteps > 0 a cosine to minLr at that step.
    LrSchedule lrSchedule() const;
};

// The settings of a new run from the configuration; refuses a model or shape that cannot work.
// vocabSize: V when the corpus fixes it (a tokenizer's), instead of the model's.
Expected<RunSettings> settingsForNewRun(const CoordinatorConfig& config,
                                        std::optional<int> vocabSize = {});
std::string toJson(const RunSettings& settings);
Expected<RunSettings> runSettingsFromJson(std::string_view json);

}  // namespace tandem::coord
