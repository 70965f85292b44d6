#include "settings_dialog.hpp"

#include "async.hpp"
#include "autostart.hpp"
#include "engine_bridge.hpp"
#include "state_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabWidget>
#include <QTimeEdit>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace tandem::ui {

namespace {
constexpr double kGb = 1e9;
constexpr double kMbit = 1e6 / 8;  // bytes per second in one Mbit/s

QDoubleSpinBox* amountBox(QWidget* parent, const QString& suffix, const QString& zeroText,
                          double max) {
    auto* b = new QDoubleSpinBox(parent);
    b->setRange(0, max);
    b->setDecimals(1);
    b->setSingleStep(0.5);
    b->setSuffix(suffix);
    b->setSpecialValueText(zeroText);
    return b;
}
}  // namespace

SettingsDialog::SettingsDialog(const UiContext& context, const core::Settings& current,
                               QWidget* parent)
    : QDialog(parent), m_ctx(context), m_original(current) {
    setWindowTitle(tr("Tandem Settings"));
    setObjectName(QStringLiteral("settingsDialog"));
    auto* layout = new QVBoxLayout(this);
    m_tabs = new QTabWidget(this);
    layout->addWidget(m_tabs);
    // Each page scrolls inside a dialog of one size: more time windows, the device note or the
    // list of problems never make it jump or grow past the screen.
    auto addPage = [this](QWidget* page, const QString& title) {
        auto* scroll = new QScrollArea(m_tabs);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        scroll->setWidget(page);
        m_tabs->addTab(scroll, title);
    };

    // --- General ---
    auto* general = new QWidget(m_tabs);
    auto* gForm = new QFormLayout(general);
    m_device = new QComboBox(general);
    m_device->setObjectName(QStringLiteral("device"));
    m_device->setAccessibleName(tr("Device"));
    m_deviceNote = new QLabel(general);
    m_deviceNote->setWordWrap(true);
    gForm->addRow(tr("&Device:"), m_device);
    gForm->addRow(QString(), m_deviceNote);
    auto* dirRow = new QHBoxLayout();
    m_dataDir = new QLineEdit(general);
    m_dataDir->setObjectName(QStringLiteral("dataDirectory"));
    m_dataDir->setPlaceholderText(
        tr("the default (%1)").arg(QStringLiteral("~/.local/share/tandem")));
    m_dataDir->setAccessibleName(tr("Data directory"));
    auto* browse = new QPushButton(tr("&Browse…"), general);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString d =
            QFileDialog::getExistingDirectory(this, tr("Data directory"), m_dataDir->text());
        if (!d.isEmpty())
            m_dataDir->setText(d);
    });
    dirRow->addWidget(m_dataDir, 1);
    dirRow->addWidget(browse);
    auto* dirLabel = new QLabel(tr("Data &directory:"), general);
    dirLabel->setBuddy(m_dataDir);  // a row of a layout gets no buddy: the "&" would show
    gForm->addRow(dirLabel, dirRow);
    m_autostart = new QCheckBox(tr("Start Tandem when I &log in"), general);
    m_autostart->setObjectName(QStringLiteral("startAtLogin"));
    gForm->addRow(QString(), m_autostart);
    if (!autostart::supported()) {
        m_autostart->setEnabled(false);
        m_autostart->setToolTip(autostart::unsupportedReason());
        gForm->addRow(QString(), new QLabel(autostart::unsupportedReason(), general));
    }
    // The donor's public face (docs/protocol.md, "Names, teams and the leaderboard"): checked
    // here as the coordinator checks it (core::validate); a name the coordinator refuses (taken)
    // is reported in the log.
    m_displayName = new QLineEdit(general);
    m_displayName->setObjectName(QStringLiteral("displayName"));
    m_displayName->setMaxLength(64);
    m_displayName->setPlaceholderText(tr("anonymous"));
    m_displayName->setAccessibleName(tr("Public display name"));
    m_displayName->setToolTip(
        tr("Shown on the run's public page and leaderboard; 1 to 32 "
           "characters, unique on the coordinator. Empty: anonymous."));
    gForm->addRow(tr("Public &name:"), m_displayName);
    m_team = new QLineEdit(general);
    m_team->setObjectName(QStringLiteral("team"));
    m_team->setMaxLength(64);
    m_team->setPlaceholderText(tr("no team"));
    m_team->setAccessibleName(tr("Team"));
    m_team->setToolTip(tr("Your work also counts for this team; 1 to 32 characters."));
    gForm->addRow(tr("&Team:"), m_team);
    addPage(general, tr("&General"));

    // --- When to work ---
    auto* rules = new QWidget(m_tabs);
    auto* rLayout = new QVBoxLayout(rules);
    auto* idleRow = new QHBoxLayout();
    m_idle = new QCheckBox(tr("Only when the computer is &idle for"), rules);
    m_idle->setObjectName(QStringLiteral("onlyWhenIdle"));
    m_idleMinutes = new QSpinBox(rules);
    m_idleMinutes->setRange(1, 1440);
    m_idleMinutes->setSuffix(tr(" min"));
    m_idleMinutes->setAccessibleName(tr("Idle minutes"));
    idleRow->addWidget(m_idle);
    idleRow->addWidget(m_idleMinutes);
    idleRow->addStretch(1);
    rLayout->addLayout(idleRow);
    // Without an idle time from the desktop the rule cannot hold: say so next to it.
    m_idleUnknown = new QLabel(rules);
    m_idleUnknown->setObjectName(QStringLiteral("idleUnknown"));
    m_idleUnknown->setWordWrap(true);
    const QString idleReason = m_ctx.idleUnknownReason ? m_ctx.idleUnknownReason() : QString();
    m_idleUnknown->setText(idleReason.isEmpty() ? QString() : idleUnknownNotice(idleReason));
    m_idleUnknown->hide();
    connect(m_idle, &QCheckBox::toggled, this,
            [this](bool on) { m_idleUnknown->setVisible(on && !m_idleUnknown->text().isEmpty()); });
    rLayout->addWidget(m_idleUnknown);
    m_battery = new QCheckBox(tr("Pause while on &battery"), rules);
    m_battery->setObjectName(QStringLiteral("pauseOnBattery"));
    rLayout->addWidget(m_battery);
    auto* tempRow = new QHBoxLayout();
    m_tempOn = new QCheckBox(tr("Pause when the device is hotter than"), rules);
    m_tempOn->setObjectName(QStringLiteral("temperatureLimit"));
    m_temp = new QSpinBox(rules);
    m_temp->setRange(1, 150);
    m_temp->setSuffix(tr(" °C"));
    m_temp->setAccessibleName(tr("Temperature limit"));
    tempRow->addWidget(m_tempOn);
    tempRow->addWidget(m_temp);
    tempRow->addStretch(1);
    rLayout->addLayout(tempRow);
    // A device without a temperature sensor cannot be held to the limit: say so next to it.
    m_tempUnknown = new QLabel(temperatureUnknownNotice(), rules);
    m_tempUnknown->setObjectName(QStringLiteral("temperatureUnknown"));
    m_tempUnknown->setWordWrap(true);
    m_tempUnknown->hide();
    const bool noSensor = m_ctx.bridge && m_ctx.bridge->snapshot().temperatureUnknown;
    connect(m_tempOn, &QCheckBox::toggled, this,
            [this, noSensor](bool on) { m_tempUnknown->setVisible(on && noSensor); });
    rLayout->addWidget(m_tempUnknown);
    m_useWindows = new QCheckBox(tr("Only at these &times:"), rules);
    m_useWindows->setObjectName(QStringLiteral("useTimeWindows"));
    rLayout->addWidget(m_useWindows);
    auto* grid = new QGridLayout();
    for (int d = 0; d < 7; ++d) {
        Day& day = m_days[d];
        day.on = new QCheckBox(dayName(d), rules);
        day.on->setObjectName(QStringLiteral("day%1").arg(d));
        day.box = new QWidget(rules);
        day.rowsLayout = new QVBoxLayout(day.box);
        day.rowsLayout->setContentsMargins(0, 0, 0, 0);
        day.add = new QToolButton(rules);
        day.add->setObjectName(QStringLiteral("addWindow%1").arg(d));
        day.add->setIcon(QIcon::fromTheme(QStringLiteral("list-add")));
        day.add->setText(tr("Add"));
        day.add->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
        day.add->setToolTip(tr("Add a time window on %1").arg(dayName(d)));
        day.add->setAccessibleName(day.add->toolTip());
        connect(day.add, &QToolButton::clicked, this, [this, d] {
            // A new window starts where the day's last one ends.
            const auto& rows = m_days[d].rows;
            const QTime from = rows.empty() ? QTime(18, 0) : rows.back().to->time();
            addWindow(d, from, from.addSecs(2 * 3600));
            m_days[d].on->setChecked(true);
        });
        connect(day.on, &QCheckBox::toggled, this, [this, d](bool on) {
            if (on && m_days[d].rows.empty())
                addWindow(d, QTime(18, 0), QTime(8, 0));
            enableDays();
        });
        grid->addWidget(day.on, d, 0, Qt::AlignTop);
        grid->addWidget(day.box, d, 1);
        grid->addWidget(day.add, d, 2, Qt::AlignTop);
    }
    grid->setColumnStretch(3, 1);
    rLayout->addLayout(grid);
    // The weekdays count only while "Only at these times" is on.
    connect(m_useWindows, &QCheckBox::toggled, this, [this] { enableDays(); });
    auto* windowsNote = new QLabel(tr("A day may have several windows. The same from and to means "
                                      "the whole day; a \"to\" before the \"from\" runs past "
                                      "midnight."),
                                   rules);
    windowsNote->setWordWrap(true);
    rLayout->addWidget(windowsNote);
    rLayout->addStretch(1);
    addPage(rules, tr("&When to work"));

    // --- Network ---
    auto* net = new QWidget(m_tabs);
    auto* nForm = new QFormLayout(net);
    m_upCap = amountBox(net, tr(" GB per day"), tr("no cap"), 10000);
    m_upCap->setObjectName(QStringLiteral("uploadCap"));
    m_downCap = amountBox(net, tr(" GB per day"), tr("no cap"), 10000);
    m_downCap->setObjectName(QStringLiteral("downloadCap"));
    m_upRate = amountBox(net, tr(" Mbit/s"), tr("unlimited"), 100000);
    m_upRate->setObjectName(QStringLiteral("uploadRate"));
    m_downRate = amountBox(net, tr(" Mbit/s"), tr("unlimited"), 100000);
    m_downRate->setObjectName(QStringLiteral("downloadRate"));
    nForm->addRow(tr("Daily &upload cap:"), m_upCap);
    nForm->addRow(tr("Daily do&wnload cap:"), m_downCap);
    nForm->addRow(tr("Upload &rate limit:"), m_upRate);
    nForm->addRow(tr("Download r&ate limit:"), m_downRate);
    m_proxyMode = new QComboBox(net);
    m_proxyMode->setObjectName(QStringLiteral("proxyMode"));
    m_proxyMode->addItems(
        {tr("From the system (https_proxy, all_proxy)"), tr("No proxy"), tr("This proxy:")});
    m_proxyUrl = new QLineEdit(net);
    m_proxyUrl->setObjectName(QStringLiteral("proxy"));
    m_proxyUrl->setPlaceholderText(QStringLiteral("socks5h://host:1080"));
    m_proxyUrl->setAccessibleName(tr("Proxy URL"));
    connect(m_proxyMode, &QComboBox::currentIndexChanged, this,
            [this](int i) { m_proxyUrl->setEnabled(i == 2); });
    nForm->addRow(tr("&Proxy:"), m_proxyMode);
    nForm->addRow(QString(), m_proxyUrl);
    addPage(net, tr("&Network"));

    // --- Coordinator ---
    auto* coord = new QWidget(m_tabs);
    auto* cForm = new QFormLayout(coord);
    m_coordinator = new QLineEdit(coord);
    m_coordinator->setObjectName(QStringLiteral("coordinatorUrl"));
    m_coordinator->setPlaceholderText(QStringLiteral("https://host:port"));
    m_pin = new QLineEdit(coord);
    m_pin->setObjectName(QStringLiteral("pinnedPublicKey"));
    m_pin->setPlaceholderText(QStringLiteral("sha256//…"));
    m_caFile = new QLineEdit(coord);
    m_caFile->setObjectName(QStringLiteral("caFile"));
    m_caFile->setPlaceholderText(tr("the system's certificate authorities"));
    cForm->addRow(tr("Coordinator &URL:"), m_coordinator);
    cForm->addRow(tr("Pinned &key:"), m_pin);
    cForm->addRow(tr("&CA file:"), m_caFile);
    auto* cNote = new QLabel(tr("A coordinator with a self-signed certificate is trusted by its "
                                "pinned key; one with a certificate from a CA needs neither, or a "
                                "CA file. Changes here register Tandem with the new coordinator."),
                             coord);
    cNote->setWordWrap(true);
    cForm->addRow(cNote);
    addPage(coord, tr("&Coordinator"));

    m_errors = new QLabel(this);
    m_errors->setObjectName(QStringLiteral("errors"));
    m_errors->setWordWrap(true);
    m_errors->setTextFormat(Qt::PlainText);
    QPalette pal = m_errors->palette();
    pal.setColor(QPalette::WindowText, QColor(0xc0, 0x1c, 0x28));
    m_errors->setPalette(pal);
    m_errors->hide();
    layout->addWidget(m_errors);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &SettingsDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);

    load(current);
    DeviceReport none;
    setDevices(none);
    // One size, from the largest page, within the screen.
    QSize wanted(0, 0);
    for (int i = 0; i < m_tabs->count(); ++i)
        wanted =
            wanted.expandedTo(static_cast<QScrollArea*>(m_tabs->widget(i))->widget()->sizeHint());
    wanted += QSize(48, 140);  // the tab bar, buttons and margins
    if (const QScreen* screen = this->screen())
        wanted = wanted.boundedTo(screen->availableGeometry().size() * 0.9);
    resize(wanted);
    if (m_ctx.services) {
        Services* services = m_ctx.services;
        runAsync<DeviceReport>(
            this, [services] { return services->detectDevices(); },
            [this](DeviceReport r) { setDevices(r); });
    }
}

void SettingsDialog::setDevices(const DeviceReport& report) {
    const QString chosen = m_device->currentData().toString().isEmpty()
                               ? QString::fromStdString(m_original.device)
                               : m_device->currentData().toString();
    m_device->clear();
    m_device->addItem(tr("Automatic (the best usable GPU, else the CPU)"), QStringLiteral("auto"));
    bool haveCpu = false;
    for (const auto& d : report.devices) {
        QString label =
            d.name.isEmpty() ? d.id : d.name + QStringLiteral(" (") + d.id + QLatin1Char(')');
        if (!d.usable)
            label += tr(": not usable, %1").arg(d.reason);
        m_device->addItem(label, d.id);
        haveCpu = haveCpu || d.id == QLatin1String("cpu");
    }
    if (!haveCpu)
        m_device->addItem(tr("CPU"), QStringLiteral("cpu"));
    int index = m_device->findData(chosen);
    if (index < 0) {
        m_device->addItem(chosen, chosen);
        index = m_device->count() - 1;
    }
    m_device->setCurrentIndex(index);
    m_deviceNote->setText(report.gpuUnavailableReason.isEmpty()
                              ? QString()
                              : tr("No GPU can be used: %1.").arg(report.gpuUnavailableReason));
    m_deviceNote->setVisible(!report.gpuUnavailableReason.isEmpty());
}

void SettingsDialog::load(const core::Settings& s) {
    // The directory in use: the settings' own, else the one the app runs from.
    m_dataDir->setText(QString::fromStdString(s.dataDirectory.empty() ? m_ctx.dataDirectory.string()
                                                                      : s.dataDirectory));
    m_displayName->setText(QString::fromStdString(s.displayName));
    m_team->setText(QString::fromStdString(s.team));
    m_autostart->setChecked(autostart::supported() ? (s.startAtLogin || autostart::enabled())
                                                   : false);
    const auto& r = s.rules;
    m_idle->setChecked(r.onlyWhenIdle);
    m_idleMinutes->setValue(
        static_cast<int>(std::max<int64_t>(1, (r.idleThresholdSeconds + 59) / 60)));
    m_battery->setChecked(r.pauseOnBattery);
    m_tempOn->setChecked(r.maxTemperatureC.has_value());
    m_temp->setValue(static_cast<int>(r.maxTemperatureC.value_or(85)));
    m_useWindows->setChecked(r.useTimeWindows);
    const auto days = daysFromWindows(r.timeWindows);
    for (int d = 0; d < 7; ++d) {
        clearWindows(d);
        for (const DayWindow& w : days[d])
            addWindow(d, QTime(w.startMinute / 60, w.startMinute % 60),
                      QTime(w.endMinute / 60, w.endMinute % 60));
        const bool on = !days[d].empty();
        if (!on)  // an unused day offers the usual evening window once checked
            addWindow(d, QTime(18, 0), QTime(8, 0));
        m_days[d].on->setChecked(on);
    }
    enableDays();
    m_upCap->setValue(static_cast<double>(r.dailyUploadCapBytes) / kGb);
    m_downCap->setValue(static_cast<double>(r.dailyDownloadCapBytes) / kGb);
    m_upRate->setValue(static_cast<double>(s.uploadLimitBytesPerSecond) / kMbit);
    m_downRate->setValue(static_cast<double>(s.downloadLimitBytesPerSecond) / kMbit);
    if (s.proxy.empty())
        m_proxyMode->setCurrentIndex(0);
    else if (s.proxy == "direct")
        m_proxyMode->setCurrentIndex(1);
    else
        m_proxyMode->setCurrentIndex(2);
    m_proxyUrl->setText(s.proxy == "direct" ? QString() : QString::fromStdString(s.proxy));
    m_proxyUrl->setEnabled(m_proxyMode->currentIndex() == 2);
    m_coordinator->setText(QString::fromStdString(s.coordinatorUrl));
    m_pin->setText(QString::fromStdString(s.pinnedPublicKey));
    m_caFile->setText(QString::fromStdString(s.caFile));
}

void SettingsDialog::showTab(int tab) {
    if (tab >= 0 && tab < m_tabs->count())
        m_tabs->setCurrentIndex(tab);
}

int SettingsDialog::currentTab() const {
    return m_tabs->currentIndex();
}

core::Settings SettingsDialog::settings() const {
    core::Settings s = m_original;
    const QString device = m_device->currentData().toString();
    s.device = device.isEmpty() ? m_original.device : device.toStdString();
    s.dataDirectory = m_dataDir->text().trimmed().toStdString();
    // Unchanged from the directory the app runs from: still "that one", not a setting of its own.
    if (m_original.dataDirectory.empty() && s.dataDirectory == m_ctx.dataDirectory.string())
        s.dataDirectory.clear();
    s.startAtLogin = m_autostart->isChecked();
    s.displayName = m_displayName->text().trimmed().toStdString();
    s.team = m_team->text().trimmed().toStdString();
    auto& r = s.rules;
    r.onlyWhenIdle = m_idle->isChecked();
    r.idleThresholdSeconds = static_cast<int64_t>(m_idleMinutes->value()) * 60;
    r.pauseOnBattery = m_battery->isChecked();
    if (m_tempOn->isChecked())
        r.maxTemperatureC = m_temp->value();
    else
        r.maxTemperatureC.reset();
    r.useTimeWindows = m_useWindows->isChecked();
    r.timeWindows = windowsFromDays(dayWindows());
    r.dailyUploadCapBytes = static_cast<int64_t>(m_upCap->value() * kGb + 0.5);
    r.dailyDownloadCapBytes = static_cast<int64_t>(m_downCap->value() * kGb + 0.5);
    s.uploadLimitBytesPerSecond = static_cast<int64_t>(m_upRate->value() * kMbit + 0.5);
    s.downloadLimitBytesPerSecond = static_cast<int64_t>(m_downRate->value() * kMbit + 0.5);
    switch (m_proxyMode->currentIndex()) {
        case 0:
            s.proxy.clear();
            break;
        case 1:
            s.proxy = "direct";
            break;
        default:
            s.proxy = m_proxyUrl->text().trimmed().toStdString();
            break;
    }
    s.coordinatorUrl = m_coordinator->text().trimmed().toStdString();
    s.pinnedPublicKey = m_pin->text().trimmed().toStdString();
    s.caFile = m_caFile->text().trimmed().toStdString();
    return s;
}

void SettingsDialog::enableDays() {
    const bool useWindows = m_useWindows->isChecked();
    for (Day& day : m_days) {
        day.on->setEnabled(useWindows);
        day.add->setEnabled(useWindows);
        day.box->setEnabled(useWindows && day.on->isChecked());
    }
}

void SettingsDialog::addWindow(int weekday, QTime from, QTime to) {
    Day& day = m_days[weekday];
    WindowRow w;
    w.row = new QWidget(day.box);
    auto* h = new QHBoxLayout(w.row);
    h->setContentsMargins(0, 0, 0, 0);
    const int n = static_cast<int>(day.rows.size()) + 1;
    w.from = new QTimeEdit(from, w.row);
    w.to = new QTimeEdit(to, w.row);
    w.from->setDisplayFormat(QStringLiteral("HH:mm"));
    w.to->setDisplayFormat(QStringLiteral("HH:mm"));
    w.from->setAccessibleName(tr("%1, window %2, from").arg(dayName(weekday)).arg(n));
    w.to->setAccessibleName(tr("%1, window %2, to").arg(dayName(weekday)).arg(n));
    w.remove = new QToolButton(w.row);
    w.remove->setIcon(QIcon::fromTheme(QStringLiteral("list-remove")));
    w.remove->setText(tr("Remove"));
    w.remove->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    w.remove->setAccessibleName(tr("Remove window %1 of %2").arg(n).arg(dayName(weekday)));
    QWidget* row = w.row;
    connect(w.remove, &QToolButton::clicked, this,
            [this, weekday, row] { removeWindow(weekday, row); });
    h->addWidget(new QLabel(tr("from"), w.row));
    h->addWidget(w.from);
    h->addWidget(new QLabel(tr("to"), w.row));
    h->addWidget(w.to);
    h->addWidget(w.remove);
    h->addStretch(1);
    day.rowsLayout->addWidget(w.row);
    day.rows.push_back(w);
}

void SettingsDialog::removeWindow(int weekday, QWidget* row) {
    auto& rows = m_days[weekday].rows;
    auto it =
        std::find_if(rows.begin(), rows.end(), [row](const WindowRow& w) { return w.row == row; });
    if (it == rows.end())
        return;
    rows.erase(it);
    row->hide();
    row->deleteLater();  // its button is the sender of this call
}

void SettingsDialog::clearWindows(int weekday) {
    for (auto& w : m_days[weekday].rows)
        delete w.row;
    m_days[weekday].rows.clear();
}

std::array<std::vector<DayWindow>, 7> SettingsDialog::dayWindows() const {
    std::array<std::vector<DayWindow>, 7> days;
    for (int d = 0; d < 7; ++d) {
        if (!m_days[d].on->isChecked())
            continue;
        for (const WindowRow& w : m_days[d].rows) {
            const QTime f = w.from->time(), t = w.to->time();
            days[d].push_back({f.hour() * 60 + f.minute(), t.hour() * 60 + t.minute()});
        }
    }
    return days;
}

void SettingsDialog::accept() {
    const core::Settings s = settings();
    m_issues.clear();
    for (const auto& issue : core::validate(s))
        m_issues << QString::fromStdString(issue.message);
    if (m_useWindows->isChecked()) {
        for (int d = 0; d < 7; ++d)
            if (m_days[d].on->isChecked() && m_days[d].rows.empty())
                m_issues << tr("%1 is chosen but has no time window; expected at least one "
                               "(press Add), or leave the day unchecked")
                                .arg(dayName(d));
        m_issues << windowOverlaps(dayWindows());
    }
    if (s.proxy.empty() && m_proxyMode->currentIndex() == 2)
        m_issues << tr(
            "no proxy URL given; expected one, or choose \"From the system\" or "
            "\"No proxy\"");
    if (m_issues.isEmpty() && !m_ctx.settingsFile.empty()) {
        if (auto st = core::saveSettings(m_ctx.settingsFile, s); !st)
            m_issues << tr("The settings could not be saved: %1")
                            .arg(QString::fromStdString(st.error().message));
    }
    // Written whenever on, so the entry starts the app with the options it runs with now.
    if (m_issues.isEmpty() && autostart::supported() && (s.startAtLogin || autostart::enabled())) {
        QString error;
        if (!autostart::setEnabled(s.startAtLogin, QCoreApplication::applicationFilePath(),
                                   m_ctx.launchArguments, &error))
            m_issues << error;
    }
    if (!m_issues.isEmpty()) {
        m_errors->setText(tr("Please correct:") + QStringLiteral("\n• ") +
                          m_issues.join(QStringLiteral("\n• ")));
        m_errors->setAccessibleName(m_errors->text());
        m_errors->show();
        return;
    }
    m_errors->hide();
    QDialog::accept();
}

}  // namespace tandem::ui
