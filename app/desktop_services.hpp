// ui::Services for the desktop app on the project's libraries: GPU detection
// (kernels/cuda/devices.hpp), the CPU inventory (core/platform_probe.hpp), the bandwidth probe and
// the run status over the HTTPS client (net/). Kept in app/ so that ui/ never includes net/ or
// kernels/ (DESIGN.md §2).
#pragma once

#include "services.hpp"

namespace tandem::app {

class DesktopServices final : public ui::Services {
  public:
    ui::DeviceReport detectDevices() override;
    ui::BandwidthReport measureBandwidth(const core::Settings& settings) override;
    ui::RunInfo runStatus(const core::Settings& settings) override;
};

}  // namespace tandem::app
