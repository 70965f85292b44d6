#include "engine_bridge.hpp"

#include <QMetaObject>
#include <QPointer>

namespace tandem::ui {

// Runs on the engine's threads: only queues calls to the bridge's thread.
class EngineBridge::Observer final : public core::EngineObserver {
  public:
    explicit Observer(EngineBridge* bridge) : m_bridge(bridge) {}
    void stateChanged(core::EngineState state, const std::string& reason) override {
        const int s = static_cast<int>(state);
        const QString r = QString::fromStdString(reason);
        QMetaObject::invokeMethod(
            m_bridge,
            [b = m_bridge, s, r] {
                emit b->stateChanged(s, r);
                emit b->changed();
            },
            Qt::QueuedConnection);
    }
    void progress(const std::string&, int64_t, int64_t, float) override { m_bridge->postChanged(); }
    void sample(const core::DeviceSample&) override {
        QMetaObject::invokeMethod(
            m_bridge, [b = m_bridge] { emit b->sampleRecorded(); }, Qt::QueuedConnection);
    }
    void logLine(core::EventLevel level, const std::string& message) override {
        const int l = static_cast<int>(level);
        const QString m = QString::fromStdString(message);
        QMetaObject::invokeMethod(
            m_bridge, [b = m_bridge, l, m] { emit b->logLine(l, m); }, Qt::QueuedConnection);
    }
    void workUnitSettled(const std::string& id, core::WorkUnitState state) override {
        const QString i = QString::fromStdString(id);
        const int s = static_cast<int>(state);
        QMetaObject::invokeMethod(
            m_bridge,
            [b = m_bridge, i, s] {
                emit b->workUnitSettled(i, s);
                emit b->changed();
            },
            Qt::QueuedConnection);
    }

  private:
    EngineBridge* m_bridge;
};

EngineBridge::EngineBridge(const core::Clock& clock, const core::TimeZone& zone, QObject* parent)
    : QObject(parent), m_clock(clock), m_zone(zone), m_observer(std::make_unique<Observer>(this)) {}

EngineBridge::~EngineBridge() = default;

core::EngineObserver* EngineBridge::observer() {
    return m_observer.get();
}

void EngineBridge::setEngine(core::Engine* engine) {
    m_engine = engine;
    emit changed();
}

void EngineBridge::postChanged() {
    // One queued "changed" at a time, however many steps the engine makes meanwhile.
    if (m_changedPending.exchange(true))
        return;
    QMetaObject::invokeMethod(
        this,
        [this] {
            m_changedPending = false;
            emit changed();
        },
        Qt::QueuedConnection);
}

core::EngineSnapshot EngineBridge::snapshot() const {
    return m_engine ? m_engine->snapshot() : core::EngineSnapshot{};
}

core::Ledger* EngineBridge::ledger() const {
    if (m_ledger)
        return m_ledger;
    return m_engine ? &m_engine->ledger() : nullptr;
}

void EngineBridge::pause() {
    if (m_engine)
        m_engine->pause();
    emit changed();
}

void EngineBridge::resume() {
    if (m_engine)
        m_engine->resume();
    emit changed();
}

void EngineBridge::togglePause() {
    const auto s = snapshot();
    const bool held = s.state == core::EngineState::Paused ||
                      s.state == core::EngineState::Snoozed || s.snoozedUntilMs.has_value();
    if (held)
        resume();
    else
        pause();
}

void EngineBridge::snooze(core::Snooze choice) {
    if (m_engine)
        m_engine->snooze(core::snoozeUntilMs(choice, m_clock.nowMs(), m_zone));
    emit changed();
}

void EngineBridge::setFinishThenPause(bool on) {
    if (m_engine)
        m_engine->setFinishThenPause(on);
    emit changed();
}

void EngineBridge::requestQuit() {
    emit quitRequested();
}

}  // namespace tandem::ui
