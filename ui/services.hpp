// What the wizard and the pages need from outside the engine: the devices of this machine, a
// bandwidth measurement against the coordinator, the run's status (GET /v1/status) and this
// donor's standing on its leaderboard. The UI
// never includes net/ or kernels/: app/ implements this interface on net/ (HTTPS client, bandwidth
// probe, coordinator client) and kernels/cuda/devices.hpp, and tests pass a fake. Calls block and
// are made off the GUI thread (ui/async.hpp).
#pragma once

#include "model_config.hpp"
#include "problem.hpp"
#include "settings.hpp"

#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

namespace tandem::ui {

struct DeviceInfo {
    QString id;       // "cpu", "cuda:0"
    QString name;     // "NVIDIA GeForce RTX 4070", "AMD Ryzen 7 5800X (16 threads)"
    QString details;  // "12.0 GB, compute 8.9, driver 550.54"
    int64_t memoryBytes = 0;
    bool usable = true;
    QString reason;  // why it cannot be used, when !usable
};

struct DeviceReport {
    std::vector<DeviceInfo> devices;  // the CPU last; always present
    QString gpuUnavailableReason;     // "no NVIDIA driver found", empty when a GPU is usable
};

struct BandwidthReport {
    bool ok = false;
    QString error;  // what went wrong, when !ok
    // When !ok: the kind of trouble (a wrong pin or an untrusted certificate must be fixed
    // before joining; an unreachable coordinator may be measured again later).
    core::Problem problem = core::Problem::None;
    double downMbitPerSecond = 0;
    double upMbitPerSecond = 0;
    double latencyMs = 0;
};

struct RoundInfo {
    int64_t round = 0;
    std::optional<double> valLoss;
    int contributors = 0;
    int64_t tokens = 0;
};

struct RunInfo {
    bool ok = false;
    QString error;
    int64_t runId = 0;
    int64_t round = 0;
    QString model;  // "L=12 NH=12 C=768 T=1024 V=256"
    int64_t parameterCount = 0;
    // The memory a work unit needs (kernels/memory_estimate.hpp): on a CPU, and on a GPU beside
    // the RAM the worker's copies take; 0 when the coordinator does not say the unit's B x T.
    int64_t unitMemoryCpuBytes = 0;
    int64_t unitMemoryGpuBytes = 0, unitMemoryHostBytes = 0;
    int activeWorkers = 0;
    int64_t totalTokens = 0;
    int workUnitSeconds = 0;  // what the coordinator sizes units to (0: not said)
    // How it sizes them (base/unit_sizing.hpp) and what a unit reads; 0: an older coordinator
    // that does not say.
    ModelConfig modelConfig;
    int batch = 0, seqLen = 0;
    int innerStepsMin = 0, innerStepsMax = 0;
    int tokenBytes = 0;
    std::string resultEncoding;      // "fp16", "int8"; empty: not said (fp16)
    std::string weightDeltas;        // "off", "fp16", "int8"; empty: not said (off)
    std::vector<RoundInfo> history;  // closed rounds, oldest first
    // What the model wrote after its newest sampled version (sampleVersion 0: nothing yet).
    int64_t sampleVersion = 0;
    QString samplePrompt, sampleText;
    // Where the operator last exported the model (tandem-coordinator export); empty: none.
    QString latestExportPath;
    QString latestExportFormat;  // "safetensors" or "llmc"
    int64_t latestExportVersion = 0;
};

// This donor's and team's place on the run's leaderboard (GET /v1/runs/{run}/leaderboard with
// the token the engine registered with).
struct StandingInfo {
    bool ok = false;
    QString error;            // why the coordinator could not be asked, when !ok
    bool registered = false;  // false: this machine has not registered with the coordinator yet
    int64_t rank = 0;         // 0: no accepted result yet
    int64_t donorCount = 0;   // donors with an accepted result
    bool anonymous = true;    // no public name: shown as "anonymous"
    QString team;             // empty: in no team
    int64_t teamRank = 0;     // 0: the team has no accepted result yet
    int64_t teamCount = 0;
};

// How fast the chosen device trains the run's model (core/speed_test.hpp), and what it draws.
struct SpeedReport {
    bool ok = false;
    QString error;   // why it could not be measured, when !ok
    QString device;  // what was measured: "cpu", "cuda:0"
    double tokensPerSecond = 0;
    double setupSeconds = 0;     // loading a unit's weights into the device
    double watts = 0;            // drawn while training; 0: unknown
    bool wattsMeasured = false;  // read from the GPU's sensor; false: the stated CPU estimate
    int cpuThreads = 0;          // the CPU's training threads (what the estimate counts)
};

class Services {
  public:
    virtual ~Services() = default;
    virtual DeviceReport detectDevices() = 0;
    // Against settings.coordinatorUrl with its trust and proxy settings.
    virtual BandwidthReport measureBandwidth(const core::Settings& settings) = 0;
    virtual RunInfo runStatus(const core::Settings& settings) = 0;
    // With the token the engine keeps in the data directory (registration.json).
    virtual StandingInfo standing(const core::Settings& settings) = 0;
    // A short timed run of `run`'s model at its B x T on settings.device (a few seconds on a
    // device that suits the run; minutes for a large model on a CPU).
    virtual SpeedReport measureSpeed(const core::Settings& settings, const RunInfo& run) = 0;
};

}  // namespace tandem::ui
