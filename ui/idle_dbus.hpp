// How long the person has been away from keyboard and mouse, asked of the desktop session over
// D-Bus. First org.gnome.Mutter.IdleMonitor's GetIdletime (GNOME; milliseconds, documented), then
// org.freedesktop.ScreenSaver's GetSessionIdleTime, which the freedesktop idle-inhibit draft does
// not specify and whose implementations disagree on the unit: KDE's screen locker answers
// KIdleTime's milliseconds (and, on Wayland, an error), gnome-screensaver and its forks answer
// seconds. KDE is recognised by its own name on the bus, org.kde.screensaver. Without a session
// bus or either service the answer is nullopt ("unknown"): core's "only when idle" rule then
// does not hold, so unknownReason() says why, for the window and the settings dialog.
#pragma once

#include "platform_probe.hpp"

#include <QString>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

namespace tandem::ui {

// GetSessionIdleTime's answer in seconds: KDE's in milliseconds, everyone else's in seconds.
int64_t screenSaverIdleSeconds(uint32_t answer, bool kdeScreenLocker);

class DBusIdleSource final : public core::IdleSource {
  public:
    // Safe to call from any thread (the engine asks from its own); answers are cached briefly.
    std::optional<int64_t> idleSeconds() override;
    // Why the last question got no answer ("there is no D-Bus session bus", ...); empty while
    // the idle time is known or before the first question. Any thread; never blocks on D-Bus.
    QString unknownReason() const;

  private:
    std::optional<int64_t> query(QString* whyUnknown);
    mutable std::mutex m_mutex;
    std::chrono::steady_clock::time_point m_askedAt{};
    std::optional<int64_t> m_last;
    QString m_unknownReason;
    bool m_asked = false;
    int m_failures = 0;
};

}  // namespace tandem::ui
