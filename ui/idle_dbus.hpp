// How long the person has been away from keyboard and mouse, asked of the desktop session over
// D-Bus: org.gnome.Mutter.IdleMonitor (GNOME), then org.freedesktop.ScreenSaver's
// GetSessionIdleTime (KDE and others). Both answer milliseconds. Without a session bus or either
// service the answer is nullopt ("unknown"), and the "only when idle" rule then does not hold.
#pragma once

#include "platform_probe.hpp"

#include <chrono>
#include <mutex>
#include <optional>

namespace tandem::ui {

class DBusIdleSource final : public core::IdleSource {
  public:
    // Safe to call from any thread (the engine asks from its own); answers are cached briefly.
    std::optional<int64_t> idleSeconds() override;

  private:
    std::optional<int64_t> query();
    std::mutex m_mutex;
    std::chrono::steady_clock::time_point m_askedAt{};
    std::optional<int64_t> m_last;
    bool m_asked = false;
    int m_failures = 0;
};

}  // namespace tandem::ui
