// ui::Services for the desktop app on the project's libraries: GPU detection
// (kernels/cuda/devices.hpp), the CPU inventory (core/platform_probe.hpp), the training speed
// test (core/speed_test.hpp), and the bandwidth probe, the run status and this donor's standing
// over the HTTPS client (net/). Kept in app/ so that ui/ never includes net/ or kernels/
// (DESIGN.md §2).
#pragma once

#include "services.hpp"

#include <filesystem>

namespace tandem::app {

class DesktopServices final : public ui::Services {
  public:
    // `defaultDataDir`: the engine's data directory when the settings name none.
    explicit DesktopServices(std::filesystem::path defaultDataDir)
        : m_defaultDataDir(std::move(defaultDataDir)) {}
    ui::DeviceReport detectDevices() override;
    ui::BandwidthReport measureBandwidth(const core::Settings& settings) override;
    ui::RunInfo runStatus(const core::Settings& settings) override;
    ui::StandingInfo standing(const core::Settings& settings) override;
    ui::SpeedReport measureSpeed(const core::Settings& settings, const ui::RunInfo& run) override;

  private:
    std::filesystem::path m_defaultDataDir;
};

}  // namespace tandem::app
