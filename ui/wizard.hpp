// The first-run wizard: finds the devices (and says why a GPU cannot be used), asks for the
// coordinator (pre-filled by the demo) and an optional public name and team, measures the bandwidth
// to it and the device's training speed, shows what joining costs (ui/cost_text.hpp: time per
// work unit, GB per day up and down, energy and its price) and sets the limits. finished settings()
// are validated by core/settings and saved by app/.
#pragma once

#include "services.hpp"
#include "ui_context.hpp"

#include <QWizard>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace tandem::ui {

class FirstRunWizard final : public QWizard {
    Q_OBJECT
  public:
    enum PageId { DevicesPage, CoordinatorPage, BandwidthPage, CostsPage };
    FirstRunWizard(const UiContext& context, const core::Settings& initial,
                   QWidget* parent = nullptr);

    core::Settings settings() const;
    QStringList issues() const { return m_issues; }
    const DeviceReport& devices() const { return m_devices; }
    const BandwidthReport& bandwidth() const { return m_bandwidth; }
    const RunInfo& run() const { return m_run; }
    const SpeedReport& speed() const { return m_speed; }
    QString costText() const;

    // Field access for tests.
    QComboBox* deviceBox() const { return m_device; }
    QLabel* deviceList() const { return m_deviceList; }
    QLineEdit* coordinatorEdit() const { return m_url; }
    QLineEdit* pinEdit() const { return m_pin; }
    QLineEdit* displayNameEdit() const { return m_displayName; }
    QLineEdit* teamEdit() const { return m_team; }
    QLabel* bandwidthLabel() const { return m_bwLabel; }
    QDoubleSpinBox* uploadCapGb() const { return m_upCap; }
    QDoubleSpinBox* downloadCapGb() const { return m_downCap; }
    QDoubleSpinBox* hoursPerDay() const { return m_hours; }
    QDoubleSpinBox* energyPrice() const { return m_price; }
    QCheckBox* onlyWhenIdle() const { return m_idle; }
    bool measuring() const { return m_measuring; }
    bool detecting() const { return m_detecting; }

    bool validateCurrentPage() override;
    void initializePage(int id) override;

  private:
    void detect();
    void measure();
    void updateCosts();
    void showDevices();

    UiContext m_ctx;
    core::Settings m_initial;
    DeviceReport m_devices;
    BandwidthReport m_bandwidth;
    RunInfo m_run;
    SpeedReport m_speed;
    bool m_detecting = false;
    bool m_measuring = false;
    bool m_measured = false;
    QStringList m_issues;

    QLabel* m_deviceList;
    QComboBox* m_device;
    QLineEdit* m_url;
    QLineEdit* m_pin;
    QLineEdit* m_displayName;  // public, on the run's page and leaderboard; "" anonymous
    QLineEdit* m_team;
    QLabel* m_urlError;
    QLabel* m_bwLabel;
    QPushButton* m_bwRetry;
    QLabel* m_costs;
    QDoubleSpinBox* m_hours;
    QDoubleSpinBox* m_upCap;
    QDoubleSpinBox* m_downCap;
    QDoubleSpinBox* m_price;
    QCheckBox* m_idle;
    QCheckBox* m_battery;
    QLabel* m_finishError;
};

}  // namespace tandem::ui
