// tandem: the desktop app. Runs the worker engine in-process (core/engine.hpp) behind the
// EngineBridge, with the main window, the tray icon, the first-run wizard and the settings
// (ui/). One instance per user and data directory: a second launch shows the running window.
#include "app_actions.hpp"
#include "desktop_services.hpp"
#include "device_choice.hpp"
#include "engine_bridge.hpp"
#include "engine_wiring.hpp"
#include "idle_desktop.hpp"
#include "main_window.hpp"
#include "settings.hpp"
#include "single_instance.hpp"
#include "tandem_version.hpp"
#include "translations.hpp"
#include "tray.hpp"
#include "ui_prefs.hpp"
#include "wizard.hpp"

#include <malloc.h>
#include <unistd.h>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QMessageBox>
#include <QStandardPaths>
#include <QThreadPool>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

std::atomic<int> g_signal{0};

fs::path defaultDataDir() {
    QString base = qEnvironmentVariable("XDG_DATA_HOME");
    if (base.isEmpty())
        base = QDir::homePath() + QStringLiteral("/.local/share");
    return fs::path((base + QStringLiteral("/tandem")).toStdString());
}

// Memory (ui/README.md, "Memory"). OpenBLAS starts one idle server thread per core when the
// library loads, each with its own buffer and arena, before main() can say anything; the engine
// runs OpenBLAS single-threaded inside its own pool (kernels/cpu/cpu_ops.cpp), so those threads
// only cost memory. Without OPENBLAS_NUM_THREADS set, start again once with it set to 1.
void reexecWithOneBlasThread(char** argv) {
    if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr)
        return;
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
}

// Settings that only take effect with a new engine (the rest are applied in place).
bool needsRestart(const core::Settings& a, const core::Settings& b) {
    return a.device != b.device || a.coordinatorUrl != b.coordinatorUrl || a.caFile != b.caFile ||
           a.pinnedPublicKey != b.pinnedPublicKey || a.registerSecret != b.registerSecret ||
           a.proxy != b.proxy || a.dataDirectory != b.dataDirectory ||
           a.displayName != b.displayName || a.team != b.team ||
           a.uploadLimitBytesPerSecond != b.uploadLimitBytesPerSecond ||
           a.downloadLimitBytesPerSecond != b.downloadLimitBytesPerSecond;
}

// The engine and everything it needs, made from the settings; recreated when they change.
class EngineHost {
  public:
    EngineHost(ui::EngineBridge& bridge, const core::Clock& clock, const core::TimeZone& zone,
               core::IdleSource& idle, fs::path configDir)
        : m_bridge(bridge),
          m_clock(clock),
          m_zone(zone),
          m_idle(idle),
          m_configDir(std::move(configDir)) {}
    ~EngineHost() { stop(); }

    fs::path dataDir(const core::Settings& s) const {
        return s.dataDirectory.empty() ? m_configDir : fs::path(s.dataDirectory);
    }

    // Returns an error text, or empty when the engine runs.
    QString start(const core::Settings& s) {
        stop();
        if (s.coordinatorUrl.empty())
            return {};
        const int threads = app::defaultTrainingThreads();
        auto device = app::chooseDevice(s.device, threads, app::UnavailableDevice::FallBackToCpu);
        if (!device)  // (FallBackToCpu always chooses one)
            return QString::fromStdString(device.error().message);
        app::EngineWiring wiring;
        wiring.http = app::engineHttpConfig(app::httpConfigFor(s), s);
        wiring.registrationSecret = s.registerSecret;
        wiring.device = *device;
        wiring.cpuThreads = threads;
        wiring.clock = &m_clock;
        wiring.zone = &m_zone;
        wiring.idle = &m_idle;
        wiring.observer = m_bridge.observer();
        wiring.config.dataDir = dataDir(s);
        wiring.config.coordinatorUrl = s.coordinatorUrl;
        wiring.config.clientName = app::hostNameOr("tandem");
        wiring.config.displayName = s.displayName;  // "": anonymous
        wiring.config.team = s.team;
        wiring.config.rules = s.rules;
        auto wired = app::WiredEngine::create(wiring);
        if (!wired)
            return QString::fromStdString(wired.error().message);
        m_wired = std::move(*wired);
        core::Engine& engine = m_wired->engine();
        if (!device->cpuReason.empty())
            (void)engine.ledger().recordEvent(m_clock.nowMs(), core::EventLevel::Info,
                                              "training on the CPU: " + device->cpuReason);
        m_bridge.setEngine(&engine);
        engine.start();
        return {};
    }

    // Checkpoints the unit in training and joins the engine's threads.
    void stop() {
        if (!m_wired)
            return;
        m_bridge.setEngine(nullptr);
        m_wired->engine().quit();
        m_wired->engine().wait();
        m_wired.reset();
    }

    core::Engine* engine() const { return m_wired ? &m_wired->engine() : nullptr; }

  private:
    ui::EngineBridge& m_bridge;
    const core::Clock& m_clock;
    const core::TimeZone& m_zone;
    core::IdleSource& m_idle;
    fs::path m_configDir;
    std::unique_ptr<app::WiredEngine> m_wired;
};

// Names and version of the application, for QApplication and QCoreApplication alike.
void setIdentity() {
    QCoreApplication::setApplicationName(QStringLiteral("tandem"));
    QCoreApplication::setOrganizationName(QStringLiteral("Tandem"));
    QCoreApplication::setApplicationVersion(QStringLiteral(TANDEM_VERSION));
}

// The command line; translated, so made after the translations are installed.
struct CommandLine {
    QCommandLineParser parser;
    const QCommandLineOption coordinator{
        QStringLiteral("coordinator"),
        QCoreApplication::translate("main",
                                    "Pre-fill the coordinator URL (also $TANDEM_COORDINATOR)."),
        QStringLiteral("url")};
    const QCommandLineOption pin{
        QStringLiteral("pin"),
        QCoreApplication::translate(
            "main", "Pre-fill the coordinator's key pin, sha256//... (also $TANDEM_PIN)."),
        QStringLiteral("pin")};
    const QCommandLineOption ca{
        QStringLiteral("ca-file"),
        QCoreApplication::translate("main", "Trust the coordinator through this CA file."),
        QStringLiteral("file")};
    const QCommandLineOption data{
        QStringLiteral("data-dir"),
        QCoreApplication::translate("main",
                                    "Settings, identity, ledger and work (default "
                                    "~/.local/share/tandem; also $TANDEM_DATA_DIR)."),
        QStringLiteral("dir")};
    const QCommandLineOption background{
        QStringLiteral("background"),
        QCoreApplication::translate(
            "main", "Start in the tray without showing the window (used at login).")};
    const QCommandLineOption skipWizard{
        QStringLiteral("skip-wizard"),
        QCoreApplication::translate(
            "main", "With --coordinator: join without the first-run wizard, with default limits.")};

    CommandLine() {
        parser.setApplicationDescription(QCoreApplication::translate(
            "main",
            "Donate this computer's spare GPU time to the training of an open language model."));
        parser.addHelpOption();
        parser.addVersionOption();
        parser.addOptions({coordinator, pin, ca, data, background, skipWizard});
    }
};

// --help and --version are answered without a display (a terminal over SSH, a package check).
bool asksForHelpOrVersion(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--")
            return false;
        if (a == "-h" || a == "-?" || a == "--help" || a == "--help-all" || a == "-v" ||
            a == "--version")
            return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (asksForHelpOrVersion(argc, argv)) {
        QCoreApplication core(argc, argv);
        setIdentity();
        ui::installTranslations(QLocale::system());
        CommandLine commandLine;
        commandLine.parser.process(core);  // prints and exits
        return 0;
    }
    reexecWithOneBlasThread(argv);
    // Few malloc arenas: the GUI, D-Bus, thread-pool and engine threads would otherwise each
    // keep an arena of freed memory (about 10 MB measured).
    mallopt(M_ARENA_MAX, 2);
    QApplication app(argc, argv);
    setIdentity();
    QApplication::setApplicationDisplayName(QStringLiteral("Tandem"));
    QApplication::setDesktopFileName(QStringLiteral("tandem"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));
    QApplication::setQuitOnLastWindowClosed(false);
    ui::installTranslations(QLocale::system());  // German when the system speaks it

    CommandLine commandLine;
    QCommandLineParser& parser = commandLine.parser;
    parser.process(app);

    auto optionOrEnv = [&](const QCommandLineOption& o, const char* env) {
        return parser.isSet(o) ? parser.value(o) : qEnvironmentVariable(env);
    };
    const QString dataArg = optionOrEnv(commandLine.data, "TANDEM_DATA_DIR");
    const fs::path configDir =
        dataArg.isEmpty() ? defaultDataDir() : fs::path(dataArg.toStdString());
    std::error_code ec;
    fs::create_directories(configDir, ec);

    ui::SingleInstance instance(QString::fromStdString(configDir.string()));
    if (!instance.claim(true)) {
        std::fprintf(stderr, "tandem: already running for %s; showed its window\n",
                     configDir.string().c_str());
        return 0;
    }

    const fs::path settingsFile = configDir / core::kSettingsFileName;
    const bool firstRun = !fs::exists(settingsFile);
    core::Settings settings;
    if (auto loaded = core::loadSettings(settingsFile)) {
        settings = loaded->settings;
        for (const auto& w : loaded->warnings)
            std::fprintf(stderr, "tandem: settings: %s\n", w.c_str());
    } else {
        QMessageBox::warning(nullptr, QObject::tr("Tandem"),
                             QObject::tr("The settings in %1 cannot be used: %2\nTandem starts "
                                         "with the defaults; fix or delete the file.")
                                 .arg(QString::fromStdString(settingsFile.string()),
                                      QString::fromStdString(loaded.error().message)));
    }
    const QString coordinatorArg = optionOrEnv(commandLine.coordinator, "TANDEM_COORDINATOR");
    const QString pinArg = optionOrEnv(commandLine.pin, "TANDEM_PIN");
    core::Settings initial = settings;
    if (!coordinatorArg.isEmpty())
        initial.coordinatorUrl = coordinatorArg.toStdString();
    if (!pinArg.isEmpty()) {
        initial.pinnedPublicKey = pinArg.toStdString();
        initial.caFile.clear();
    }
    if (parser.isSet(commandLine.ca)) {
        initial.caFile = parser.value(commandLine.ca).toStdString();
        initial.pinnedPublicKey.clear();
    }

    core::SystemClock clock;
    core::SystemTimeZone zone;
    ui::EngineBridge bridge(clock, zone);
    app::DesktopServices services(configDir);
    // Queries run on the global thread pool (ui/async.hpp); let them end before services goes.
    struct DrainQueries {
        ~DrainQueries() { QThreadPool::globalInstance()->waitForDone(); }
    } drainQueries;
    ui::UiPrefs prefs(QString::fromStdString((configDir / "ui.ini").string()));
    ui::UiContext context;
    context.bridge = &bridge;
    context.services = &services;
    context.settings = &settings;
    context.settingsFile = settingsFile;
    context.prefs = &prefs;
    context.dataDirectory = configDir;
    // Start at login as now: the same data directory (also when it came from the environment,
    // which a login session lacks) and trust options.
    if (!dataArg.isEmpty())
        context.launchArguments << QStringLiteral("--data-dir")
                                << QString::fromStdString(fs::absolute(configDir).string());
    for (const QCommandLineOption* o :
         {&commandLine.coordinator, &commandLine.pin, &commandLine.ca})
        if (parser.isSet(*o))
            context.launchArguments << QStringLiteral("--") + o->names().front()
                                    << parser.value(*o);
    // Asked by the engine's thread (D-Bus, else X11); its reason is shown where "only when idle"
    // is on.
    ui::DesktopIdleSource idle;
    context.idleUnknownReason = [&idle] { return idle.unknownReason(); };

    if (firstRun || settings.coordinatorUrl.empty()) {
        if (parser.isSet(commandLine.skipWizard) && !initial.coordinatorUrl.empty()) {
            settings = initial;
            (void)core::saveSettings(settingsFile, settings);
        } else {
            ui::FirstRunWizard wizard(context, initial);
            if (wizard.exec() == QDialog::Accepted) {
                settings = wizard.settings();
                if (auto st = core::saveSettings(settingsFile, settings); !st)
                    QMessageBox::warning(nullptr, QObject::tr("Tandem"),
                                         QString::fromStdString(st.error().message));
            }
        }
    } else if (!coordinatorArg.isEmpty() && settings.coordinatorUrl != initial.coordinatorUrl) {
        std::fprintf(stderr, "tandem: using the coordinator of %s (%s), not %s\n",
                     settingsFile.string().c_str(), settings.coordinatorUrl.c_str(),
                     coordinatorArg.toUtf8().constData());
    }

    ui::AppActions actions(&bridge, nullptr);
    ui::MainWindow window(context, &actions);
    ui::TrayController tray(context, &actions, &window);
    EngineHost host(bridge, clock, zone, idle, configDir);
    auto startEngine = [&] {
        const QString error = host.start(settings);
        window.setStartError(error.isEmpty() ? QString()
                                             : QObject::tr("Tandem cannot start: %1").arg(error));
        window.refresh();
        tray.update();
    };
    startEngine();

    // Freed heap goes back to the system (glibc keeps it otherwise): a moment after the engine
    // stops training (paused, waiting), after each settled work unit (training goes on across
    // units while results upload) and once after start (the wizard's bandwidth measurement).
    QTimer trimTimer;
    trimTimer.setSingleShot(true);
    trimTimer.setInterval(2000);
    QObject::connect(&trimTimer, &QTimer::timeout, [] { malloc_trim(0); });
    QObject::connect(&bridge, &ui::EngineBridge::stateChanged, &trimTimer, [&](int state) {
        if (static_cast<core::EngineState>(state) != core::EngineState::Training)
            trimTimer.start();
    });
    QObject::connect(&bridge, &ui::EngineBridge::workUnitSettled, &trimTimer,
                     [&] { trimTimer.start(); });
    trimTimer.start();

    QObject::connect(&instance, &ui::SingleInstance::raiseRequested, &window,
                     &ui::MainWindow::bringToFront);
    core::Settings applied = settings;
    QObject::connect(&window, &ui::MainWindow::settingsSaved, &window, [&] {
        if (needsRestart(applied, settings))
            startEngine();  // checkpoints, then starts again with the new settings
        else if (host.engine())
            host.engine()->setRules(settings.rules);
        applied = settings;
    });
    QObject::connect(&bridge, &ui::EngineBridge::quitRequested, &app, [&] {
        window.hide();
        tray.icon()->hide();
        host.stop();  // checkpoint and join
        QApplication::quit();
    });

    // SIGINT/SIGTERM (a session ending, scripts/demo stopping): quit like the menu's Quit, with a
    // checkpoint. The handler only sets a flag; a timer on the GUI thread acts on it.
    struct sigaction action {};
    action.sa_handler = [](int sig) { g_signal = sig; };
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    QTimer signalTimer;
    QObject::connect(&signalTimer, &QTimer::timeout, &bridge, [&] {
        if (g_signal.load() != 0) {
            signalTimer.stop();
            bridge.requestQuit();
        }
    });
    signalTimer.start(200);

    if (!parser.isSet(commandLine.background) || !tray.available())
        window.bringToFront();
    const int rc = QApplication::exec();
    host.stop();
    return rc;
}
