// What joining costs, in words: the first-run wizard's costs page and the Overview both say it
// from the same facts (the run's status, the device's measured speed, the measured link, the
// donor's hours and electricity price) through core/cost_estimate.hpp (docs/costs.md).
#pragma once

#include "cost_estimate.hpp"
#include "services.hpp"

#include <QCoreApplication>
#include <QString>

namespace tandem::ui {

class UiPrefs;

struct CostFacts {
    RunInfo run;
    SpeedReport speed;
    BandwidthReport link;  // link.ok false: not measured (transfer times left out)
    double hoursPerDay = 24;
    int64_t dailyDownloadCapBytes = 0, dailyUploadCapBytes = 0;  // 0: no cap
    double pricePerKwh = 0;                                      // 0: not given
};

// The estimate's inputs from what the app knows.
core::CostInputs costInputs(const CostFacts& facts);

class CostText {
    Q_DECLARE_TR_FUNCTIONS(tandem::ui::CostText)
  public:
    // Rich text: the model and what a unit needs, a unit's steps, time and bytes, the data per
    // day, the energy and its price; says plainly what could not be worked out and why.
    static QString describe(const CostFacts& facts);
    // One line for the Overview: "about 223 work units: 922 MB down, 447 MB up, 0.76 kWh"; says
    // what is missing when it cannot be worked out.
    static QString perDay(const CostFacts& facts);
};

// What the wizard measured (speed, power, hours), kept in ui.ini for the Overview's line, and
// read back; the link is read from the wizard's and the Network page's last measurement.
void rememberCostFacts(UiPrefs& prefs, const SpeedReport& speed, double hoursPerDay);
CostFacts rememberedCostFacts(const UiPrefs& prefs);

}  // namespace tandem::ui
