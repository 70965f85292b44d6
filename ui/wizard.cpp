#include "wizard.hpp"

#include "async.hpp"
#include "cost_text.hpp"
#include "state_view.hpp"
#include "ui_prefs.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QVBoxLayout>
#include <QWizardPage>

namespace tandem::ui {

namespace {
constexpr double kGb = 1e9;

// A page whose completeness the wizard decides (busy while detecting or measuring).
class BusyPage final : public QWizardPage {
  public:
    BusyPage(std::function<bool()> complete, QWidget* parent)
        : QWizardPage(parent), m_complete(std::move(complete)) {}
    bool isComplete() const override { return m_complete(); }
    void changed() { emit completeChanged(); }

  private:
    std::function<bool()> m_complete;
};

QLabel* wrapped(const QString& text, QWidget* parent) {
    auto* l = new QLabel(text, parent);
    l->setWordWrap(true);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return l;
}

QDoubleSpinBox* gbBox(QWidget* parent, const QString& name) {
    auto* b = new QDoubleSpinBox(parent);
    b->setObjectName(name);
    b->setRange(0, 10000);
    b->setDecimals(1);
    b->setSingleStep(0.5);
    b->setSuffix(QCoreApplication::translate("tandem::ui::FirstRunWizard", " GB per day"));
    b->setSpecialValueText(QCoreApplication::translate("tandem::ui::FirstRunWizard", "no cap"));
    return b;
}
}  // namespace

FirstRunWizard::FirstRunWizard(const UiContext& context, const core::Settings& initial,
                               QWidget* parent)
    : QWizard(parent), m_ctx(context), m_initial(initial) {
    setWindowTitle(tr("Welcome to Tandem"));
    setObjectName(QStringLiteral("firstRunWizard"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));
    setWizardStyle(QWizard::ModernStyle);
    setPixmap(QWizard::LogoPixmap, QIcon(QStringLiteral(":/icons/tandem.svg")).pixmap(48, 48));
    setOption(QWizard::NoBackButtonOnStartPage);
    setMinimumSize(640, 500);

    // 1. Devices
    auto* devices = new BusyPage([this] { return !m_detecting; }, this);
    devices->setTitle(tr("Your devices"));
    devices->setSubTitle(
        tr("Tandem trains on a GPU when one can be used, otherwise on the CPU. "
           "It only uses what you allow."));
    auto* dLayout = new QVBoxLayout(devices);
    m_deviceList = wrapped(tr("Looking for devices…"), devices);
    m_deviceList->setObjectName(QStringLiteral("deviceList"));
    m_deviceList->setTextFormat(Qt::RichText);
    dLayout->addWidget(m_deviceList);
    auto* dForm = new QFormLayout();
    m_device = new QComboBox(devices);
    m_device->setObjectName(QStringLiteral("device"));
    m_device->setAccessibleName(tr("Device to train on"));
    dForm->addRow(tr("&Train on:"), m_device);
    dLayout->addLayout(dForm);
    dLayout->addStretch(1);
    setPage(DevicesPage, devices);

    // 2. Coordinator
    auto* coord = new QWizardPage(this);
    coord->setTitle(tr("The training run"));
    coord->setSubTitle(
        tr("A coordinator hands out the work of a training run and combines the "
           "results. Enter the address you were given."));
    auto* cForm = new QFormLayout(coord);
    m_url = new QLineEdit(coord);
    m_url->setObjectName(QStringLiteral("coordinatorUrl"));
    m_url->setPlaceholderText(QStringLiteral("https://host:port"));
    m_url->setText(QString::fromStdString(initial.coordinatorUrl));
    m_pin = new QLineEdit(coord);
    m_pin->setObjectName(QStringLiteral("pinnedPublicKey"));
    m_pin->setPlaceholderText(tr("sha256//… (only for a self-signed coordinator)"));
    m_pin->setText(QString::fromStdString(initial.pinnedPublicKey));
    m_urlError = wrapped(QString(), coord);
    m_urlError->setObjectName(QStringLiteral("urlError"));
    cForm->addRow(tr("Coordinator &URL:"), m_url);
    cForm->addRow(tr("Pinned &key:"), m_pin);
    // The donor's public face, optional; checked as the coordinator checks it (core::validate).
    m_displayName = new QLineEdit(coord);
    m_displayName->setObjectName(QStringLiteral("displayName"));
    m_displayName->setMaxLength(64);
    m_displayName->setPlaceholderText(tr("anonymous"));
    m_displayName->setAccessibleName(tr("Public display name"));
    m_displayName->setText(QString::fromStdString(initial.displayName));
    m_team = new QLineEdit(coord);
    m_team->setObjectName(QStringLiteral("team"));
    m_team->setMaxLength(64);
    m_team->setPlaceholderText(tr("no team"));
    m_team->setAccessibleName(tr("Team"));
    m_team->setText(QString::fromStdString(initial.team));
    cForm->addRow(tr("Public na&me:"), m_displayName);  // Alt+N is the Next button
    cForm->addRow(tr("&Team:"), m_team);
    cForm->addRow(wrapped(tr("Your name and team are shown on the run's public page and "
                             "leaderboard; leave them empty to stay anonymous."),
                          coord));
    cForm->addRow(m_urlError);
    setPage(CoordinatorPage, coord);

    // 3. Bandwidth
    // A wrong pin or an untrusted certificate: no going on until the coordinator page is right.
    auto* bw = new BusyPage(
        [this] { return !m_measuring && !core::needsAttention(m_bandwidth.problem); }, this);
    bw->setTitle(tr("Your connection"));
    bw->setSubTitle(
        tr("Tandem measures the link to the coordinator (about 12 MB, up to 20 "
           "seconds) and how fast your device trains the run's model (a few seconds), to work "
           "out what joining costs."));
    auto* bLayout = new QVBoxLayout(bw);
    m_bwLabel = wrapped(QString(), bw);
    m_bwLabel->setObjectName(QStringLiteral("bandwidth"));
    m_bwRetry = new QPushButton(tr("&Measure again"), bw);
    connect(m_bwRetry, &QPushButton::clicked, this, &FirstRunWizard::measure);
    bLayout->addWidget(m_bwLabel);
    bLayout->addWidget(m_bwRetry, 0, Qt::AlignLeft);
    bLayout->addStretch(1);
    setPage(BandwidthPage, bw);

    // 4. Costs and limits
    auto* costs = new QWizardPage(this);
    costs->setTitle(tr("What it costs, and your limits"));
    costs->setFinalPage(true);
    auto* kLayout = new QVBoxLayout(costs);
    m_costs = wrapped(QString(), costs);
    m_costs->setObjectName(QStringLiteral("costs"));
    m_costs->setTextFormat(Qt::RichText);
    kLayout->addWidget(m_costs);
    auto* kForm = new QFormLayout();
    m_hours = new QDoubleSpinBox(costs);
    m_hours->setObjectName(QStringLiteral("hoursPerDay"));
    m_hours->setRange(1, 24);
    m_hours->setDecimals(0);
    m_hours->setValue(8);
    m_hours->setSuffix(tr(" hours per day"));
    connect(m_hours, &QDoubleSpinBox::valueChanged, this, &FirstRunWizard::updateCosts);
    kForm->addRow(tr("Expected &working time:"), m_hours);
    m_upCap = gbBox(costs, QStringLiteral("uploadCap"));
    m_upCap->setValue(static_cast<double>(initial.rules.dailyUploadCapBytes) / kGb);
    m_downCap = gbBox(costs, QStringLiteral("downloadCap"));
    m_downCap->setValue(static_cast<double>(initial.rules.dailyDownloadCapBytes) / kGb);
    kForm->addRow(tr("Daily &upload cap:"), m_upCap);
    kForm->addRow(tr("Daily &download cap:"), m_downCap);
    m_price = new QDoubleSpinBox(costs);
    m_price->setObjectName(QStringLiteral("energyPrice"));
    m_price->setRange(0, 1000);
    m_price->setDecimals(2);
    m_price->setSingleStep(0.01);
    m_price->setSuffix(tr(" per kWh"));
    m_price->setSpecialValueText(tr("not given"));
    m_price->setValue(initial.energyPricePerKwh);
    connect(m_price, &QDoubleSpinBox::valueChanged, this, &FirstRunWizard::updateCosts);
    kForm->addRow(tr("&Electricity price:"), m_price);
    for (QDoubleSpinBox* cap : {m_upCap, m_downCap})
        connect(cap, &QDoubleSpinBox::valueChanged, this, &FirstRunWizard::updateCosts);
    m_idle = new QCheckBox(tr("Only when I am not using the computer (idle for 5 min)"), costs);
    m_idle->setObjectName(QStringLiteral("onlyWhenIdle"));
    m_idle->setChecked(initial.rules.onlyWhenIdle);
    m_battery = new QCheckBox(tr("Pause while on battery"), costs);
    m_battery->setChecked(initial.rules.pauseOnBattery);
    kForm->addRow(m_idle);
    kForm->addRow(m_battery);
    kLayout->addLayout(kForm);
    m_finishError = wrapped(QString(), costs);
    m_finishError->setObjectName(QStringLiteral("finishError"));
    kLayout->addWidget(m_finishError);
    kLayout->addStretch(1);
    setPage(CostsPage, costs);

    setButtonText(QWizard::FinishButton, tr("&Start contributing"));
}

void FirstRunWizard::initializePage(int id) {
    QWizard::initializePage(id);
    if (id == DevicesPage && m_devices.devices.empty() && !m_detecting)
        detect();
    if (id == BandwidthPage)
        measure();
    if (id == CostsPage)
        updateCosts();
}

void FirstRunWizard::detect() {
    if (!m_ctx.services) {
        m_devices.devices.push_back({QStringLiteral("cpu"), tr("CPU"), QString(), 0, true, {}});
        showDevices();
        return;
    }
    m_detecting = true;
    static_cast<BusyPage*>(page(DevicesPage))->changed();
    Services* services = m_ctx.services;
    runAsync<DeviceReport>(
        this, [services] { return services->detectDevices(); },
        [this](DeviceReport r) {
            m_devices = std::move(r);
            m_detecting = false;
            showDevices();
            static_cast<BusyPage*>(page(DevicesPage))->changed();
        });
}

void FirstRunWizard::showDevices() {
    QStringList rows;
    m_device->clear();
    QString best;
    for (const auto& d : m_devices.devices) {
        QString row = QStringLiteral("<b>%1</b>").arg(d.name.toHtmlEscaped());
        if (!d.details.isEmpty())
            row += QStringLiteral(" – ") + d.details.toHtmlEscaped();
        if (d.usable)
            row += QStringLiteral(" <span>✔ ") + tr("usable") + QStringLiteral("</span>");
        else
            row += QStringLiteral("<br>✘ ") + tr("not usable: %1").arg(d.reason.toHtmlEscaped());
        rows << row;
        if (d.usable) {
            m_device->addItem(d.name + QStringLiteral(" (") + d.id + QLatin1Char(')'), d.id);
            if (best.isEmpty())
                best = d.id;
        }
    }
    QString text = rows.join(QStringLiteral("<br><br>"));
    if (!m_devices.gpuUnavailableReason.isEmpty())
        text += QStringLiteral("<br><br>") +
                tr("No GPU can be used: %1. Tandem will train on the CPU, which is much slower "
                   "but still helps.")
                    .arg(m_devices.gpuUnavailableReason.toHtmlEscaped());
    m_deviceList->setText(text);
    const int want = m_device->findData(QString::fromStdString(m_initial.device));
    m_device->setCurrentIndex(want >= 0 ? want : std::max(0, m_device->findData(best)));
}

bool FirstRunWizard::validateCurrentPage() {
    if (currentId() == CoordinatorPage) {
        core::Settings probe;
        probe.coordinatorUrl = m_url->text().trimmed().toStdString();
        probe.pinnedPublicKey = m_pin->text().trimmed().toStdString();
        probe.displayName = m_displayName->text().trimmed().toStdString();
        probe.team = m_team->text().trimmed().toStdString();
        QStringList problems;
        if (probe.coordinatorUrl.empty())
            problems << tr("Enter the coordinator's address (https://host:port).");
        for (const auto& issue : core::validate(probe))
            problems << QString::fromStdString(issue.message);
        m_urlError->setText(problems.join(QLatin1Char('\n')));
        return problems.isEmpty();
    }
    // The Next button is off too; this also holds for keyboard and programmatic next().
    if (currentId() == BandwidthPage && core::needsAttention(m_bandwidth.problem))
        return false;
    if (currentId() == CostsPage) {
        m_issues.clear();
        for (const auto& issue : core::validate(settings()))
            m_issues << QString::fromStdString(issue.message);
        m_finishError->setText(m_issues.join(QLatin1Char('\n')));
        return m_issues.isEmpty();
    }
    return QWizard::validateCurrentPage();
}

void FirstRunWizard::measure() {
    if (m_measuring)
        return;
    if (!m_ctx.services) {
        m_bwLabel->setText(tr("The measurement is not available in this build."));
        return;
    }
    m_measuring = true;
    m_bwRetry->setEnabled(false);
    static_cast<BusyPage*>(page(BandwidthPage))->changed();
    m_bwLabel->setText(tr("Measuring the connection to %1…").arg(m_url->text().trimmed()));
    Services* services = m_ctx.services;
    const core::Settings s = settings();
    struct Measured {
        BandwidthReport bw;
        RunInfo run;
        SpeedReport speed;
    };
    runAsync<Measured>(
        this,
        [services, s] {
            Measured m{services->measureBandwidth(s), services->runStatus(s), {}};
            m.speed = services->measureSpeed(s, m.run);
            return m;
        },
        [this](Measured r) {
            m_measuring = false;
            m_bwRetry->setEnabled(true);
            m_bandwidth = r.bw;
            m_run = r.run;
            m_speed = r.speed;
            if (m_ctx.prefs)
                rememberCostFacts(*m_ctx.prefs, r.speed, m_hours->value());
            const QLocale loc;
            if (!r.bw.ok && r.bw.problem == core::Problem::WrongPin) {
                m_measured = false;
                m_bwLabel->setText(
                    tr("The coordinator's key does not match the pinned key you entered, so "
                       "Tandem cannot trust it. Go back and correct the pin (the coordinator "
                       "prints it at start), or leave it empty for a coordinator with a "
                       "certificate from a known authority.\n\n%1")
                        .arg(breakableText(r.bw.error)));
            } else if (!r.bw.ok && core::needsAttention(r.bw.problem)) {
                m_measured = false;
                m_bwLabel->setText(
                    tr("The coordinator's certificate is not trusted. Go back and enter its pinned "
                       "key (the coordinator prints it at start).\n\n%1")
                        .arg(breakableText(r.bw.error)));
            } else if (!r.bw.ok) {
                m_measured = false;
                m_bwLabel->setText(tr("The measurement failed: %1\n\nCheck the address on the "
                                      "previous page, or continue: Tandem can measure again "
                                      "later from its Network page.")
                                       .arg(breakableText(r.bw.error)));
            } else {
                m_measured = true;
                m_bwLabel->setText(tr("Download: %1 Mbit/s\nUpload: %2 Mbit/s\nLatency: %3 ms")
                                       .arg(loc.toString(r.bw.downMbitPerSecond, 'f', 1),
                                            loc.toString(r.bw.upMbitPerSecond, 'f', 1),
                                            loc.toString(r.bw.latencyMs, 'f', 0)));
                if (r.speed.ok)
                    m_bwLabel->setText(
                        m_bwLabel->text() + QStringLiteral("\n") +
                        tr("Training speed: %1 tokens/s on %2")
                            .arg(loc.toString(static_cast<qlonglong>(r.speed.tokensPerSecond)),
                                 r.speed.device));
                if (m_ctx.prefs) {
                    m_ctx.prefs->setNumber(QStringLiteral("bandwidth/downMbit"),
                                           r.bw.downMbitPerSecond);
                    m_ctx.prefs->setNumber(QStringLiteral("bandwidth/upMbit"),
                                           r.bw.upMbitPerSecond);
                    m_ctx.prefs->setNumber(QStringLiteral("bandwidth/latencyMs"), r.bw.latencyMs);
                    m_ctx.prefs->setNumber(
                        QStringLiteral("bandwidth/atMs"),
                        static_cast<double>(QDateTime::currentMSecsSinceEpoch()));
                }
            }
            static_cast<BusyPage*>(page(BandwidthPage))->changed();
        });
}

QString FirstRunWizard::costText() const {
    return m_costs->text();
}

void FirstRunWizard::updateCosts() {
    if (m_ctx.prefs)
        m_ctx.prefs->setNumber(QStringLiteral("costs/hoursPerDay"), m_hours->value());
    const core::Settings chosen = settings();
    CostFacts facts;
    facts.run = m_run;
    facts.speed = m_speed;
    facts.link = m_measured ? m_bandwidth : BandwidthReport{};
    facts.hoursPerDay = m_hours->value();
    facts.dailyDownloadCapBytes = chosen.rules.dailyDownloadCapBytes;
    facts.dailyUploadCapBytes = chosen.rules.dailyUploadCapBytes;
    facts.pricePerKwh = chosen.energyPricePerKwh;
    m_costs->setText(CostText::describe(facts));
}

core::Settings FirstRunWizard::settings() const {
    core::Settings s = m_initial;
    const QString device = m_device->currentData().toString();
    if (!device.isEmpty())
        s.device = device.toStdString();
    s.coordinatorUrl = m_url->text().trimmed().toStdString();
    s.pinnedPublicKey = m_pin->text().trimmed().toStdString();
    s.displayName = m_displayName->text().trimmed().toStdString();
    s.team = m_team->text().trimmed().toStdString();
    s.rules.dailyUploadCapBytes = static_cast<int64_t>(m_upCap->value() * kGb + 0.5);
    s.rules.dailyDownloadCapBytes = static_cast<int64_t>(m_downCap->value() * kGb + 0.5);
    s.rules.onlyWhenIdle = m_idle->isChecked();
    s.energyPricePerKwh = m_price->value();
    s.rules.pauseOnBattery = m_battery->isChecked();
    return s;
}

}  // namespace tandem::ui
