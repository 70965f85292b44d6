#include "async.hpp"
#include "cost_text.hpp"
#include "eliding_label.hpp"
#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "model_text.hpp"
#include "pages.hpp"
#include "state_view.hpp"

#include <QCheckBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QStackedWidget>
#include <QVBoxLayout>

namespace tandem::ui {

namespace {
QLabel* valueLabel(QWidget* parent, const QString& objectName) {
    auto* l = new QLabel(parent);
    l->setObjectName(objectName);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->setWordWrap(true);
    return l;
}
}  // namespace

OverviewPage::OverviewPage(const UiContext& context, QWidget* parent) : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);

    auto* head = new QHBoxLayout();
    m_icon = new QLabel(content);
    m_icon->setFixedSize(48, 48);
    m_icon->setAccessibleName(tr("State icon"));
    head->addWidget(m_icon, 0, Qt::AlignTop);
    auto* headText = new QVBoxLayout();
    // One line each, elided: no status text can widen the window (the full text is the
    // tooltip, the details below and the log).
    m_headline = new ElidingLabel(content);
    m_headline->setObjectName(QStringLiteral("headline"));
    QFont hf = m_headline->font();
    hf.setPointSizeF(hf.pointSizeF() * 1.5);
    hf.setBold(true);
    m_headline->setFont(hf);
    m_detail = new ElidingLabel(content);
    m_detail->setObjectName(QStringLiteral("detail"));
    headText->addWidget(m_headline);
    headText->addWidget(m_detail);
    // A problem: its own words (wrapped anywhere), and for one the donor must fix, the
    // settings page that fixes it.
    m_problem = valueLabel(content, QStringLiteral("problemDetails"));
    m_problem->setTextFormat(Qt::PlainText);
    m_problem->hide();
    headText->addWidget(m_problem);
    m_fix = new QPushButton(tr("Open Settings…"), content);
    m_fix->setObjectName(QStringLiteral("fixButton"));
    m_fix->hide();
    connect(m_fix, &QPushButton::clicked, this,
            [this] { emit settingsRequested(static_cast<int>(m_fixIn)); });
    headText->addWidget(m_fix, 0, Qt::AlignLeft);
    head->addLayout(headText, 1);
    auto* buttons = new QVBoxLayout();
    m_pause = new QPushButton(content);
    m_pause->setObjectName(QStringLiteral("pauseButton"));
    m_pause->setMinimumSize(160, 48);
    QFont bf = m_pause->font();
    bf.setPointSizeF(bf.pointSizeF() * 1.2);
    bf.setBold(true);
    m_pause->setFont(bf);
    // With a unit in training, the button offers the choice (a menu): stop now, or after it.
    connect(m_pause, &QPushButton::clicked, this, [this] {
        if (!m_pause->menu())
            m_ctx.bridge->togglePause();
    });
    m_pauseMenu = new QMenu(m_pause);
    m_pauseNow = m_pauseMenu->addAction(tr("Pause now"));
    m_pauseNow->setObjectName(QStringLiteral("pauseNowAction"));
    connect(m_pauseNow, &QAction::triggered, m_ctx.bridge, &EngineBridge::pause);
    m_finishFirst = m_pauseMenu->addAction(tr("Finish this unit first"));
    m_finishFirst->setObjectName(QStringLiteral("finishFirstAction"));
    connect(m_finishFirst, &QAction::triggered, m_ctx.bridge,
            [bridge = m_ctx.bridge] { bridge->setFinishThenPause(true); });
    m_finish = new QCheckBox(tr("Finish current unit, then pause"), content);
    m_finish->setObjectName(QStringLiteral("finishThenPause"));
    connect(m_finish, &QCheckBox::toggled, m_ctx.bridge, &EngineBridge::setFinishThenPause);
    buttons->addWidget(m_pause);
    buttons->addWidget(m_finish);
    head->addLayout(buttons);
    layout->addLayout(head);

    m_notice = valueLabel(content, QStringLiteral("notice"));
    m_notice->setFrameShape(QFrame::StyledPanel);
    m_notice->setMargin(8);
    m_notice->hide();
    layout->addWidget(m_notice);
    m_idleNote = valueLabel(content, QStringLiteral("idleUnknown"));
    m_idleNote->setFrameShape(QFrame::StyledPanel);
    m_idleNote->setMargin(8);
    m_idleNote->hide();
    layout->addWidget(m_idleNote);
    m_tempNote = valueLabel(content, QStringLiteral("temperatureUnknown"));
    m_tempNote->setFrameShape(QFrame::StyledPanel);
    m_tempNote->setMargin(8);
    m_tempNote->setText(temperatureUnknownNotice());
    m_tempNote->hide();
    layout->addWidget(m_tempNote);

    auto* unitBox = new QGroupBox(tr("Current work unit"), content);
    auto* unitForm = new QFormLayout(unitBox);
    m_unit = valueLabel(unitBox, QStringLiteral("unit"));
    m_progress = new QProgressBar(unitBox);
    m_progress->setObjectName(QStringLiteral("unitProgress"));
    m_progress->setAccessibleName(tr("Progress of the current work unit"));
    m_eta = valueLabel(unitBox, QStringLiteral("eta"));
    m_speed = valueLabel(unitBox, QStringLiteral("speed"));
    m_loss = valueLabel(unitBox, QStringLiteral("loss"));
    unitForm->addRow(tr("Work unit:"), m_unit);
    unitForm->addRow(tr("Progress:"), m_progress);
    unitForm->addRow(tr("Time left:"), m_eta);
    unitForm->addRow(tr("Speed:"), m_speed);
    unitForm->addRow(tr("Step loss:"), m_loss);
    layout->addWidget(unitBox);

    auto* machineBox = new QGroupBox(tr("This computer"), content);
    auto* machineForm = new QFormLayout(machineBox);
    m_device = valueLabel(machineBox, QStringLiteral("device"));
    m_lastUpload = valueLabel(machineBox, QStringLiteral("lastUpload"));
    m_next = valueLabel(machineBox, QStringLiteral("nextAction"));
    m_totals = valueLabel(machineBox, QStringLiteral("totals"));
    machineForm->addRow(tr("Device:"), m_device);
    machineForm->addRow(tr("Last upload:"), m_lastUpload);
    machineForm->addRow(tr("Next:"), m_next);
    machineForm->addRow(tr("So far:"), m_totals);
    m_costs = valueLabel(machineBox, QStringLiteral("costsPerDay"));
    machineForm->addRow(tr("A day costs:"), m_costs);
    layout->addWidget(machineBox);
    layout->addStretch(1);

    auto* scroll = new QScrollArea(this);
    scroll->setWidget(content);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    setContent(scroll);
}

void OverviewPage::setNotice(const QString& text) {
    m_notice->setText(text);
    m_notice->setVisible(!text.isEmpty());
}

void OverviewPage::refresh() {
    const auto s = m_ctx.bridge->snapshot();
    const bool attached = m_ctx.bridge->attached();
    const int64_t now = nowMs();
    const StateView v = describeState(s, attached, now, zone());
    m_icon->setPixmap(stateIcon(v.kind).pixmap(48, 48));
    m_icon->setToolTip(v.headline);
    m_headline->setFullText(v.headline);
    m_detail->setFullText(v.detail);
    m_detail->setVisible(!v.detail.isEmpty());
    m_problem->setText(breakableText(v.problemDetail));
    m_problem->setVisible(!v.problemDetail.isEmpty());
    m_fixIn = v.fixIn;
    m_fix->setVisible(v.fixIn != SettingsTab::None);
    const QString idleReason =
        attached && m_ctx.settings && m_ctx.settings->rules.onlyWhenIdle && m_ctx.idleUnknownReason
            ? m_ctx.idleUnknownReason()
            : QString();
    m_idleNote->setText(idleReason.isEmpty() ? QString() : idleUnknownNotice(idleReason));
    m_idleNote->setVisible(!idleReason.isEmpty());
    m_tempNote->setVisible(attached && m_ctx.settings &&
                           m_ctx.settings->rules.maxTemperatureC.has_value() &&
                           s.temperatureUnknown);

    const bool held = s.state == core::EngineState::Paused ||
                      s.state == core::EngineState::Snoozed || s.snoozedUntilMs.has_value();
    m_pause->setText(held ? tr("&Resume") : tr("&Pause"));
    m_pause->setAccessibleName(held ? tr("Resume contributing") : tr("Pause contributing"));
    m_pause->setEnabled(attached && s.state != core::EngineState::Stopped);
    {
        const QSignalBlocker block(m_finish);
        m_finish->setChecked(s.finishThenPause);
    }
    m_finish->setEnabled(attached && !held);
    // Pausing mid-unit: now (the unit's steps so far are sent as a partial result once the
    // coordinator's minimum is reached, else kept to resume), or when the unit is done.
    const bool choice = attached && !held && !s.finishThenPause &&
                        s.state == core::EngineState::Training && s.current;
    m_pause->setMenu(choice ? m_pauseMenu : nullptr);
    if (choice) {
        const auto& c = *s.current;
        m_finishFirst->setText(
            c.etaMs ? tr("Finish this unit first (about %1)").arg(formatDuration(*c.etaMs))
                    : tr("Finish this unit first"));
        m_pauseNow->setToolTip(
            c.minSteps && c.step >= *c.minSteps
                ? tr("Stops at the current step and sends the %1 steps done so far.").arg(c.step)
                : tr("Stops at the current step and keeps the unit's progress to continue it "
                     "later."));
    }

    m_device->setText(s.device.empty() ? tr("not chosen yet") : QString::fromStdString(s.device));
    if (s.current) {
        const auto& c = *s.current;
        m_unit->setText(tr("%1 (run %2, from version %3; %4)")
                            .arg(QString::fromStdString(c.id))
                            .arg(c.runId)
                            .arg(c.baseVersion)
                            .arg(modelInWords(QString::fromStdString(c.model))));
        if (s.state == core::EngineState::Downloading && c.downloadBytesTotal > 0) {
            m_progress->setRange(0, 1000);
            m_progress->setValue(
                static_cast<int>(1000 * c.downloadBytesDone / c.downloadBytesTotal));
            m_progress->setFormat(
                tr("downloading %1 of %2")
                    .arg(formatBytes(c.downloadBytesDone), formatBytes(c.downloadBytesTotal)));
        } else {
            m_progress->setRange(0, static_cast<int>(std::max<int64_t>(1, c.innerSteps)));
            m_progress->setValue(static_cast<int>(c.step));
            m_progress->setFormat(tr("step %v of %m"));
        }
        // Held (paused, snoozed, waiting): no time left or speed from before the hold.
        const bool running = s.state == core::EngineState::Training;
        m_eta->setText(!running          ? QStringLiteral("–")
                       : !c.etaMs        ? tr("measuring…")
                       : *c.etaMs < 1000 ? tr("under a second")
                                         : tr("about %1").arg(formatDuration(*c.etaMs)));
    } else {
        m_unit->setText(tr("none right now"));
        m_progress->setRange(0, 1);
        m_progress->setValue(0);
        m_progress->setFormat(QString());
        m_eta->setText(QStringLiteral("–"));
    }
    m_speed->setText(s.tokensPerSecond > 0 && s.state == core::EngineState::Training
                         ? tr("%1 tokens/s").arg(QLocale().toString(s.tokensPerSecond, 'f', 0))
                         : QStringLiteral("–"));
    // The engine keeps its last step's loss through holds and after the unit: shown only while
    // a unit trains, like the speed.
    m_loss->setText(s.stepLoss && s.current && s.state == core::EngineState::Training
                        ? QLocale().toString(*s.stepLoss, 'f', 3)
                        : QStringLiteral("–"));
    if (s.lastUpload) {
        const auto& u = *s.lastUpload;
        const QString when = formatAt(u.atMs, now, zone());
        if (u.state == core::WorkUnitState::Accepted)
            m_lastUpload->setText(tr("work unit %1 accepted %2 (round %3, credit %4)")
                                      .arg(QString::fromStdString(u.id), when)
                                      .arg(u.round)
                                      .arg(QLocale().toString(u.credit, 'f', 1)));
        else
            m_lastUpload->setText(
                tr("work unit %1 not counted %2: %3")
                    .arg(QString::fromStdString(u.id), when, unitEndText(u.detail)));
    } else {
        m_lastUpload->setText(tr("none yet"));
    }
    QString next = nextActionText(s.next, now, zone());
    if (s.pendingUploads > 0)
        next += (next.isEmpty() ? QString() : QStringLiteral("; ")) +
                (s.pendingUploads == 1 ? tr("1 result waiting to upload")
                                       : tr("%1 results waiting to upload").arg(s.pendingUploads));
    m_next->setText(next.isEmpty() ? QStringLiteral("–") : next);
    const auto& t = s.totals;
    m_totals->setToolTip(
        tr("Credit: one for each token your accepted work units trained. The "
           "leaderboard ranks donors by it; it is not money."));
    m_totals->setText(tr("work units: %1, tokens: %2, credit: %3")
                          .arg(t.workUnitsTrained)
                          .arg(formatTokens(t.tokens), QLocale().toString(t.credit, 'f', 1)));
    refreshCosts(s.tokensPerSecond);
}

QString OverviewPage::costsText() const {
    return m_costs->text();
}

// The wizard's estimate, kept true: the speed of the engine's real steps once it trains, the
// run's current sizing, the last measured link, the settings' caps and price.
void OverviewPage::refreshCosts(double tokensPerSecond) {
    constexpr int64_t kStatusEveryMs = 10 * 60 * 1000;
    const int64_t now = nowMs();
    if (m_ctx.services && m_ctx.settings && !m_costRunAsked &&
        (m_costRunAtMs == 0 || now - m_costRunAtMs >= kStatusEveryMs)) {
        m_costRunAsked = true;
        Services* services = m_ctx.services;
        const core::Settings settings = *m_ctx.settings;
        runAsync<RunInfo>(
            this, [services, settings] { return services->runStatus(settings); },
            [this](RunInfo run) {
                m_costRunAsked = false;
                m_costRunAtMs = nowMs();
                if (run.ok || !m_costRun.ok)
                    m_costRun = std::move(run);
                refresh();
            });
    }
    if (!m_ctx.prefs || !m_ctx.settings) {
        m_costs->setText(QStringLiteral("–"));
        return;
    }
    CostFacts facts = rememberedCostFacts(*m_ctx.prefs);
    facts.run = m_costRun;
    if (tokensPerSecond > 0) {
        facts.speed.ok = true;
        facts.speed.tokensPerSecond = tokensPerSecond;
    }
    if (m_ctx.settings->rules.useTimeWindows)
        facts.hoursPerDay = core::scheduledHoursPerDay(m_ctx.settings->rules);
    facts.dailyDownloadCapBytes = m_ctx.settings->rules.dailyDownloadCapBytes;
    facts.dailyUploadCapBytes = m_ctx.settings->rules.dailyUploadCapBytes;
    facts.pricePerKwh = m_ctx.settings->energyPricePerKwh;
    m_costs->setText(CostText::perDay(facts));
}

}  // namespace tandem::ui
