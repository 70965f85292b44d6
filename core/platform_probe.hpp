// What the machine says about itself on Linux: power source, hardware inventory, free disk
// space, and how long the user has been idle at a terminal. Every file is read below an
// injectable root ("/" in production, a fake tree in tests), so nothing here needs privileges.
//
// Idle time: a process without a display connection cannot see keyboard or mouse activity on
// Linux (/dev/input needs privileges, X11's screensaver extension needs the X connection that
// core/ must not have, logind's IdleHint needs sd-bus and is only set by some desktops). So the
// engine takes an IdleSource: the desktop app injects one that asks the desktop session (Qt D-Bus:
// org.freedesktop.ScreenSaver.GetSessionIdleTime, org.gnome.Mutter.IdleMonitor.GetIdletime), and
// the headless worker uses TtyIdleSource, which reads the last input time of terminal sessions
// from the access times of /dev/pts/* and /dev/tty* (what `w` shows as IDLE). No source at all
// (nullopt) means unknown, and the "only when idle" rule then does not hold.
#pragma once

#include "clock.hpp"
#include "expected.hpp"
#include "rules.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace tandem::core {

struct PowerStatus {
    PowerSource source = PowerSource::Unknown;
    std::optional<int> batteryPercent;  // of the first system battery, where reported
};

struct HardwareInventory {
    std::string cpuModel;   // "AMD Ryzen 7 5800X 8-Core Processor"; "unknown CPU" if not found
    int logicalCores = 0;   // hardware threads
    int physicalCores = 0;  // 0 when /proc/cpuinfo does not say
    int64_t memoryTotalBytes = 0;
    int64_t memoryAvailableBytes = 0;
    std::string osName;         // PRETTY_NAME of os-release, e.g. "Debian GNU/Linux 12 (bookworm)"
    std::string kernelRelease;  // e.g. "6.1.0-26-amd64"
    std::string architecture;   // uname machine, e.g. "x86_64"
};

struct DiskSpace {
    std::filesystem::path measuredAt;  // the directory, or its nearest existing parent
    int64_t freeBytes = 0;             // available to this (unprivileged) user
    int64_t totalBytes = 0;
};

class PlatformProbe {
  public:
    explicit PlatformProbe(std::filesystem::path root = "/") : m_root(std::move(root)) {}

    // Mains when a mains/USB supply is online or no system battery exists; Battery when a
    // system battery discharges with no supply online; Unknown without /sys/class/power_supply.
    // Batteries of peripherals (scope "Device": mice, headsets) are ignored.
    PowerStatus powerStatus() const;
    // Fields that cannot be read stay empty/zero; it fails only when /proc/cpuinfo and
    // /proc/meminfo are both unreadable.
    Expected<HardwareInventory> inventory() const;
    // statvfs of a real path (not below the root): a data directory that does not exist yet is
    // measured at its nearest existing parent.
    static Expected<DiskSpace> diskSpace(const std::filesystem::path& directory);

  private:
    std::filesystem::path under(const char* absolute) const;
    std::filesystem::path m_root;
};

class IdleSource {
  public:
    virtual ~IdleSource() = default;
    // Seconds since the user's last input; nullopt when unknown.
    virtual std::optional<int64_t> idleSeconds() = 0;
};

// Wraps a function, e.g. the desktop app's D-Bus query.
class FunctionIdleSource final : public IdleSource {
  public:
    explicit FunctionIdleSource(std::function<std::optional<int64_t>()> query)
        : m_query(std::move(query)) {}
    std::optional<int64_t> idleSeconds() override { return m_query ? m_query() : std::nullopt; }

  private:
    std::function<std::optional<int64_t>()> m_query;
};

// Terminal sessions: seconds since the most recent access time of root/dev/pts/* and
// root/dev/tty[0-9]*; nullopt when there is no terminal device.
class TtyIdleSource final : public IdleSource {
  public:
    TtyIdleSource(const Clock& clock, std::filesystem::path root = "/")
        : m_clock(clock), m_root(std::move(root)) {}
    std::optional<int64_t> idleSeconds() override;

  private:
    const Clock& m_clock;
    std::filesystem::path m_root;
};

}  // namespace tandem::core
