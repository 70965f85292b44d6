#include "main_window.hpp"

#include "app_actions.hpp"
#include "eliding_label.hpp"
#include "engine_bridge.hpp"
#include "pages.hpp"
#include "settings_dialog.hpp"
#include "state_view.hpp"
#include "ui_prefs.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTimer>
#include <QWindow>

namespace tandem::ui {

MainWindow::MainWindow(const UiContext& context, AppActions* actions, QWidget* parent)
    : QMainWindow(parent), m_ctx(context), m_actions(actions) {
    setWindowTitle(tr("Tandem"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));
    setObjectName(QStringLiteral("mainWindow"));

    m_nav = new QListWidget(this);
    m_nav->setObjectName(QStringLiteral("navigation"));
    m_nav->setAccessibleName(tr("Pages"));
    m_nav->setFrameShape(QFrame::NoFrame);
    m_pages = new QStackedWidget(this);
    m_pages->addWidget(new OverviewPage(m_ctx, m_pages));
    m_pages->addWidget(new ContributionsPage(m_ctx, m_pages));
    m_pages->addWidget(new PerformancePage(m_ctx, m_pages));
    m_pages->addWidget(new RunPage(m_ctx, m_pages));
    m_pages->addWidget(new NetworkPage(m_ctx, m_pages));
    m_pages->addWidget(new LogPage(m_ctx, m_pages));
    const QString names[] = {tr("Overview"),     tr("Contributions"), tr("Performance"),
                             tr("Training run"), tr("Network"),       tr("Log")};
    for (int i = 0; i < PageCount; ++i) {
        auto* item = new QListWidgetItem(names[i], m_nav);
        item->setSizeHint(QSize(150, 36));
        m_pages->widget(i)->setAccessibleName(names[i]);
        m_pages->widget(i)->setObjectName(QStringLiteral("page%1").arg(i));
    }
    m_nav->setFixedWidth(m_nav->sizeHintForColumn(0) + 36);
    connect(m_nav, &QListWidget::currentRowChanged, this, [this](int row) {
        m_pages->setCurrentIndex(row);
        refresh();
    });

    auto* central = new QWidget(this);
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_nav);
    auto* line = new QFrame(central);
    line->setFrameShape(QFrame::VLine);
    line->setFrameShadow(QFrame::Sunken);
    layout->addWidget(line);
    layout->addWidget(m_pages, 1);
    setCentralWidget(central);

    m_stateIcon = new QLabel(this);
    m_stateText = new ElidingLabel(this);
    m_stateText->setObjectName(QStringLiteral("stateText"));
    statusBar()->addWidget(m_stateIcon);
    statusBar()->addWidget(m_stateText, 1);

    // Menus: the same actions as the tray menu, plus page switching and settings.
    QMenu* file = menuBar()->addMenu(tr("&Tandem"));
    file->addAction(actions->settings);
    file->addSeparator();
    auto* close = file->addAction(tr("&Close Window"));
    close->setShortcut(QKeySequence::Close);
    connect(close, &QAction::triggered, this, &QWidget::close);
    file->addAction(actions->quit);
    QMenu* work = menuBar()->addMenu(tr("&Work"));
    actions->fillMenu(work, false);
    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (int i = 0; i < PageCount; ++i) {
        auto* a = view->addAction(names[i]);
        a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
        connect(a, &QAction::triggered, this, [this, i] { showPage(i); });
    }
    view->addSeparator();
    auto* reload = view->addAction(tr("&Refresh"));
    reload->setShortcut(QKeySequence::Refresh);
    connect(reload, &QAction::triggered, this, [this] {
        if (currentPage() == TrainingRun)
            runPage()->reload();
        refresh();
    });
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    auto* about = help->addAction(tr("&About Tandem"));
    about->setMenuRole(QAction::AboutRole);
    connect(about, &QAction::triggered, this, &MainWindow::showAbout);
    connect(actions->settings, &QAction::triggered, this, [this] { openSettings(); });
    connect(overviewPage(), &OverviewPage::settingsRequested, this, &MainWindow::openSettings);

    // Engine signals come in bursts; refresh at most every 250 ms, and every 5 s regardless
    // (times and ETAs move on their own).
    connect(m_ctx.bridge, &EngineBridge::changed, this, [this] {
        if (m_refreshQueued)
            return;
        m_refreshQueued = true;
        QTimer::singleShot(250, this, [this] {
            m_refreshQueued = false;
            refresh();
        });
    });
    m_timer = new QTimer(this);
    m_timer->setInterval(5000);
    connect(m_timer, &QTimer::timeout, this, &MainWindow::refresh);
    m_timer->start();

    resize(980, 680);
    if (m_ctx.prefs) {
        const QByteArray geometry = m_ctx.prefs->bytes(QStringLiteral("window/geometry"));
        if (!geometry.isEmpty())
            restoreGeometry(geometry);
    }
    fitToScreen();
    m_nav->setCurrentRow(0);
    refresh();
}

void MainWindow::fitToScreen() {
    const QScreen* s = screen();
    if (!s)
        return;
    const QRect available = s->availableGeometry();
    // The window manager's frame (title bar, borders) comes on top; before it is known, room
    // for a usual one.
    QSize frame = frameGeometry().size() - geometry().size();
    if (frame.isEmpty())
        frame = QSize(16, 48);
    const QSize most = (available.size() - frame).expandedTo(minimumSizeHint());
    if (width() > most.width() || height() > most.height())
        resize(size().boundedTo(most));
    QRect wanted = frameGeometry();
    if (!available.contains(wanted)) {
        wanted.moveRight(std::min(wanted.right(), available.right()));
        wanted.moveBottom(std::min(wanted.bottom(), available.bottom()));
        wanted.moveLeft(std::max(wanted.left(), available.left()));
        wanted.moveTop(std::max(wanted.top(), available.top()));
        move(wanted.topLeft());
    }
}

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    fitToScreen();
    page(currentPage())->refresh();
}

void MainWindow::showPage(int index) {
    m_nav->setCurrentRow(std::clamp(index, 0, PageCount - 1));
}
int MainWindow::currentPage() const {
    return m_pages->currentIndex();
}
Page* MainWindow::page(int index) const {
    return static_cast<Page*>(m_pages->widget(index));
}
OverviewPage* MainWindow::overviewPage() const {
    return static_cast<OverviewPage*>(page(Overview));
}
ContributionsPage* MainWindow::contributionsPage() const {
    return static_cast<ContributionsPage*>(page(Contributions));
}
PerformancePage* MainWindow::performancePage() const {
    return static_cast<PerformancePage*>(page(Performance));
}
RunPage* MainWindow::runPage() const {
    return static_cast<RunPage*>(page(TrainingRun));
}
NetworkPage* MainWindow::networkPage() const {
    return static_cast<NetworkPage*>(page(Network));
}
LogPage* MainWindow::logPage() const {
    return static_cast<LogPage*>(page(Log));
}
QString MainWindow::statusText() const {
    return m_stateText->fullText();
}

void MainWindow::setNotice(const QString& text) {
    m_notice = text;
    showNotices();
}

void MainWindow::setStartError(const QString& text) {
    m_startError = text;
    showNotices();
}

void MainWindow::showNotices() {
    QStringList shown;
    for (const QString& text : {m_startError, m_notice})
        if (!text.isEmpty())
            shown << text;
    overviewPage()->setNotice(shown.join(QStringLiteral("\n\n")));
}

void MainWindow::refresh() {
    const auto v = describeState(m_ctx.bridge->snapshot(), m_ctx.bridge->attached(),
                                 m_ctx.bridge->clock().nowMs(), m_ctx.bridge->zone());
    m_stateIcon->setPixmap(stateIcon(v.kind).pixmap(16, 16));
    m_stateText->setFullText(v.detail.isEmpty() ? v.headline
                                                : v.headline + QStringLiteral(" · ") + v.detail);
    // The name last: Qt appends the application's display name to a title that does not end
    // with it ("Tandem – Working — Tandem").
    setWindowTitle(tr("%1 – Tandem").arg(elideChars(v.headline, kTooltipChars)));
    // The overview is cheap and carries the state; the others only when visible.
    overviewPage()->refresh();
    if (currentPage() != Overview && isVisible())
        page(currentPage())->refresh();
}

void MainWindow::bringToFront() {
    if (isMinimized())
        showNormal();
    show();
    raise();
    activateWindow();
    refresh();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (m_ctx.prefs)
        m_ctx.prefs->setBytes(QStringLiteral("window/geometry"), saveGeometry());
    event->ignore();
    if (m_closeToTray) {
        hide();
        emit closedToTray();
    } else {
        showMinimized();
    }
}

void MainWindow::openSettings(int tab) {
    if (!m_ctx.settings)
        return;
    SettingsDialog dialog(m_ctx, *m_ctx.settings, this);
    if (tab >= 0)
        dialog.showTab(tab);
    if (dialog.exec() == QDialog::Accepted) {
        *m_ctx.settings = dialog.settings();
        emit settingsSaved();
        refresh();
    }
}

void MainWindow::showAbout() {
    QMessageBox::about(
        this, tr("About Tandem"),
        tr("<h3>Tandem %1</h3><p>Donates the spare time of this computer's GPU (or CPU) to the "
           "training of an open language model. It trains DiLoCo work units handed out by a "
           "coordinator and sends back compact results.</p>")
            .arg(QApplication::applicationVersion()));
}

}  // namespace tandem::ui
