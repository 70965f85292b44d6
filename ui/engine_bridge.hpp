// EngineBridge: the only way the widgets reach the worker engine (DESIGN.md §2). The engine
// calls its observer from its own threads; the bridge turns those calls into queued Qt signals on
// the GUI thread (progress coalesced, so a fast engine cannot flood the event loop). Widgets pull
// EngineSnapshot values and send commands through the bridge's slots.
#pragma once

#include "engine.hpp"

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>

namespace tandem::ui {

class EngineBridge : public QObject {
    Q_OBJECT
  public:
    EngineBridge(const core::Clock& clock, const core::TimeZone& zone, QObject* parent = nullptr);
    ~EngineBridge() override;

    // Pass this to Engine::Dependencies::observer; it must outlive the engine's threads (the
    // bridge outlives the engine in app/).
    core::EngineObserver* observer();
    // The engine to command and to read; null detaches (before a coordinator is chosen).
    void setEngine(core::Engine* engine);
    core::Engine* engine() const { return m_engine; }
    bool attached() const { return m_engine != nullptr; }

    core::EngineSnapshot snapshot() const;
    // The ledger the pages read: the one set here, else the engine's; null when neither.
    core::Ledger* ledger() const;
    void setLedger(core::Ledger* ledger) { m_ledger = ledger; }
    const core::Clock& clock() const { return m_clock; }
    const core::TimeZone& zone() const { return m_zone; }

  public slots:
    void pause();
    void resume();
    void togglePause();  // Resume when paused or snoozed, else Pause
    void snooze(core::Snooze choice);
    void setFinishThenPause(bool on);
    void requestQuit();  // emits quitRequested: app/ checkpoints and ends the process

  signals:
    // Something in the snapshot may have changed (state, progress, totals): pull it again.
    void changed();
    void stateChanged(int state, const QString& reason);  // core::EngineState
    void logLine(int level, const QString& message);      // core::EventLevel
    void sampleRecorded();
    void workUnitSettled(const QString& workUnitId, int state);  // core::WorkUnitState
    void quitRequested();

  private:
    class Observer;
    void postChanged();

    const core::Clock& m_clock;
    const core::TimeZone& m_zone;
    core::Engine* m_engine = nullptr;
    core::Ledger* m_ledger = nullptr;
    std::unique_ptr<Observer> m_observer;
    std::atomic<bool> m_changedPending{false};
};

}  // namespace tandem::ui
