// The CPU model the benchmark programs print and record, from core's hardware inventory.
#pragma once

#include "platform_probe.hpp"

#include <string>

namespace tandem::bench {

inline std::string cpuModel() {
    auto inventory = core::PlatformProbe().inventory();
    return inventory ? inventory->cpuModel : std::string("unknown CPU");
}

}  // namespace tandem::bench
