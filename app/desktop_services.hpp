// ui::Services for the desktop app on the project's libraries: GPU detection
// (kernels/cuda/devices.hpp), the CPU inventory (core/platform_probe.hpp), the bandwidth probe and
// the run status over the HTTPS client (net/). Kept in app/ so that ui/ never includes net/ or
// kernels/ (DESIGN.md §2).
#pragma once

#include "http_client.hpp"
#include "services.hpp"

#include <string>

namespace tandem::app {

class DesktopServices final : public ui::Services {
  public:
    ui::DeviceReport detectDevices() override;
    ui::BandwidthReport measureBandwidth(const core::Settings& settings) override;
    ui::RunInfo runStatus(const core::Settings& settings) override;
};

// settings.device ("auto", "cpu", "cuda:N") to what the engine runs on.
struct ResolvedDevice {
    std::string device;       // "cpu", "cuda:0"
    std::string description;  // "cuda:0 NVIDIA ...", "cpu AMD Ryzen ... (16 threads)"
    int64_t memoryBytes = 0;
    std::string hardwareSummary;
    std::string note;  // why the CPU is used instead of a GPU, or why cuda:N cannot be used
};
ResolvedDevice resolveDevice(const std::string& wanted, int cpuThreads);

// The HTTPS client settings that follow from the user's settings (coordinator, trust, proxy):
// the engine's client and the wizard's probes start from the same ones.
net::HttpClientConfig httpConfigFor(const core::Settings& settings);

}  // namespace tandem::app
