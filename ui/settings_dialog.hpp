// Settings: device; rules (only when idle, not on battery, time windows per weekday, temperature
// limit); daily caps and rate limits; proxy; coordinator and trust; data directory; start at
// login. OK validates with core/settings (every problem listed with what was found and what was
// expected) and saves settings.json; invalid settings are never saved.
#pragma once

#include "schedule_windows.hpp"
#include "services.hpp"
#include "ui_context.hpp"

#include <QDialog>

#include <QTime>

#include <array>
#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTabWidget;
class QTimeEdit;
class QToolButton;
class QVBoxLayout;

namespace tandem::ui {

class SettingsDialog final : public QDialog {
    Q_OBJECT
  public:
    SettingsDialog(const UiContext& context, const core::Settings& current, QWidget* parent);

    // What the fields say now (unknown keys of the original kept).
    core::Settings settings() const;
    // The problems found by the last OK (empty when it saved).
    QStringList issues() const { return m_issues; }
    void setDevices(const DeviceReport& report);
    // Shows one page first (a SettingsTab: 0 General ... 3 Coordinator).
    void showTab(int tab);
    int currentTab() const;

    // Field access for tests and the wizard.
    QComboBox* deviceBox() const { return m_device; }
    QLineEdit* coordinatorEdit() const { return m_coordinator; }
    QLineEdit* proxyEdit() const { return m_proxyUrl; }
    QComboBox* proxyMode() const { return m_proxyMode; }
    QDoubleSpinBox* uploadCapGb() const { return m_upCap; }
    QDoubleSpinBox* downloadCapGb() const { return m_downCap; }
    QCheckBox* onlyWhenIdle() const { return m_idle; }
    QLabel* idleUnknownNote() const { return m_idleUnknown; }  // shown when idle is unknown
    // Shown while the limit is on and the device in use reports no temperature.
    QLabel* temperatureUnknownNote() const { return m_tempUnknown; }
    QCheckBox* useTimeWindows() const { return m_useWindows; }
    // Weekday 0 = Monday ... 6 = Sunday; each day lists any number of windows.
    QCheckBox* dayEnabled(int weekday) const { return m_days[weekday].on; }
    int windowCount(int weekday) const { return static_cast<int>(m_days[weekday].rows.size()); }
    QTimeEdit* windowFrom(int weekday, int i) const { return m_days[weekday].rows[i].from; }
    QTimeEdit* windowTo(int weekday, int i) const { return m_days[weekday].rows[i].to; }
    QToolButton* addWindowButton(int weekday) const { return m_days[weekday].add; }
    QToolButton* removeWindowButton(int weekday, int i) const {
        return m_days[weekday].rows[i].remove;
    }
    QCheckBox* temperatureLimit() const { return m_tempOn; }
    QSpinBox* temperatureC() const { return m_temp; }
    QLineEdit* dataDirEdit() const { return m_dataDir; }
    QLineEdit* pinEdit() const { return m_pin; }
    QCheckBox* startAtLogin() const { return m_autostart; }
    QLineEdit* displayNameEdit() const { return m_displayName; }
    QLineEdit* teamEdit() const { return m_team; }

  public slots:
    void accept() override;

  private:
    void load(const core::Settings& s);
    struct WindowRow {
        QWidget* row = nullptr;
        QTimeEdit* from = nullptr;
        QTimeEdit* to = nullptr;
        QToolButton* remove = nullptr;
    };
    struct Day {
        QCheckBox* on = nullptr;
        QWidget* box = nullptr;  // holds the rows
        QVBoxLayout* rowsLayout = nullptr;
        QToolButton* add = nullptr;
        std::vector<WindowRow> rows;
    };
    void enableDays();  // the weekday rows usable only while time windows are on
    void addWindow(int weekday, QTime from, QTime to);
    void removeWindow(int weekday, QWidget* row);
    void clearWindows(int weekday);
    std::array<std::vector<DayWindow>, 7> dayWindows() const;
    UiContext m_ctx;
    core::Settings m_original;
    QTabWidget* m_tabs;
    QComboBox* m_device;
    QLabel* m_deviceNote;
    QLineEdit* m_dataDir;
    QCheckBox* m_autostart;
    QLineEdit* m_displayName;  // public, on the run's page and leaderboard
    QLineEdit* m_team;
    QCheckBox* m_idle;
    QSpinBox* m_idleMinutes;
    QLabel* m_idleUnknown;
    QLabel* m_tempUnknown;
    QCheckBox* m_battery;
    QCheckBox* m_useWindows;
    std::array<Day, 7> m_days;
    QCheckBox* m_tempOn;
    QSpinBox* m_temp;
    QDoubleSpinBox* m_upCap;
    QDoubleSpinBox* m_downCap;
    QDoubleSpinBox* m_upRate;
    QDoubleSpinBox* m_downRate;
    QComboBox* m_proxyMode;
    QLineEdit* m_proxyUrl;
    QLineEdit* m_coordinator;
    QLineEdit* m_pin;
    QLineEdit* m_caFile;
    QLabel* m_errors;
    QStringList m_issues;
};

}  // namespace tandem::ui
