// Translations: with the German locale the app's visible texts are German (the settings dialog,
// the main window's pages and state, strings of the free functions whose context must match
// lupdate's), and every .ts in ui/translations is complete: no unfinished or empty entry, and each
// translation keeps the placeholders (%1, %2, ...) of its source.
#include "app_actions.hpp"
#include "autostart.hpp"
#include "eliding_label.hpp"
#include "engine_bridge.hpp"
#include "engine_words.hpp"
#include "held_engine.hpp"
#include "idle_dbus.hpp"
#include "main_window.hpp"
#include "pages.hpp"
#include "settings_dialog.hpp"
#include "translations.hpp"
#include "ui_fixture.hpp"

#include <QAction>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QLabel>
#include <QListWidget>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QTabWidget>
#include <QTranslator>
#include <QXmlStreamReader>

using namespace tandem;
using namespace tandem::uitest;

class TestUiTranslations : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::ManualClock m_clock{kNowMs};
    core::FixedOffsetTimeZone m_zone{0};
    QList<QTranslator*> m_installed;

    static QSet<QString> placeholders(const QString& text) {
        QSet<QString> out;
        static const QRegularExpression re(QStringLiteral("%(\\d+|[vm])"));
        for (auto it = re.globalMatch(text); it.hasNext();)
            out << it.next().captured(0);
        return out;
    }

  private slots:
    void initTestCase() {
        qputenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/tandem-test-bus");
        m_installed = ui::installTranslations(QLocale(QLocale::German, QLocale::Germany));
        QVERIFY(!m_installed.isEmpty());  // at least Tandem's own
        QVERIFY(!m_installed.front()->isEmpty());
        QCOMPARE(m_installed.front()->language(), QStringLiteral("de"));
    }

    void englishHasNoTranslator() {
        const auto none = ui::installTranslations(QLocale(QLocale::English, QLocale::UnitedStates));
        QVERIFY(none.isEmpty() || none.front()->filePath().contains(QStringLiteral("qtbase")));
        for (QTranslator* t : none)
            QCoreApplication::removeTranslator(t);
    }

    void settingsDialogIsGerman() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        ui::SettingsDialog dialog(ctx, core::Settings{}, nullptr);
        QCOMPARE(dialog.windowTitle(), QStringLiteral("Tandem-Einstellungen"));
        auto* tabs = dialog.findChild<QTabWidget*>();
        QCOMPARE(tabs->tabText(0), QStringLiteral("&Allgemein"));
        QCOMPARE(tabs->tabText(1), QStringLiteral("&Wann arbeiten"));
        QCOMPARE(dialog.dayEnabled(0)->text(), QStringLiteral("Montag"));
        QCOMPARE(dialog.dayEnabled(6)->text(), QStringLiteral("Sonntag"));
        QCOMPARE(dialog.onlyWhenIdle()->text(),
                 QStringLiteral("Nur, wenn der Computer im &Leerlauf ist seit"));
        if (m_installed.size() > 1) {  // Qt's own, where the system has qtbase_de.qm
            auto* buttons = dialog.findChild<QDialogButtonBox*>();
            QCOMPARE(buttons->button(QDialogButtonBox::Cancel)->text(),
                     QStringLiteral("Abbrechen"));
        }
    }

    void mainWindowIsGerman() {
        ui::EngineBridge bridge(m_clock, m_zone);
        FakeServices services;
        core::Settings settings;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        ctx.settings = &settings;
        ui::AppActions actions(&bridge, nullptr);
        ui::MainWindow window(ctx, &actions);
        QCOMPARE(actions.quit->text(), QStringLiteral("B&eenden"));
        auto* nav = window.findChild<QListWidget*>(QStringLiteral("navigation"));
        QCOMPARE(nav->item(0)->text(), QStringLiteral("Übersicht"));
        QCOMPARE(nav->item(4)->text(), QStringLiteral("Netzwerk"));
        window.refresh();
        // The state comes from state_view.cpp's free functions (context "tandem::ui").
        auto* headline = window.overviewPage()->findChild<QLabel*>(QStringLiteral("headline"));
        QCOMPARE(headline->text(), QStringLiteral("Nicht verbunden"));
    }

    // Dates and times in the locale's formats: the Contributions chart's days, the Performance
    // chart's time axis, the clock in "at 18:05".
    void datesInTheLocalesFormat() {
        const QLocale before;
        const core::LocalDate day{2026, 11, 22};
        QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
        QCOMPARE(ui::formatDayMonth(day), QStringLiteral("22.11"));
        QCOMPARE(ui::formatClock(18 * 60 + 5), QStringLiteral("18:05"));
        QCOMPARE(ui::axisTimeFormat(true), QStringLiteral("ddd HH:mm"));
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        QCOMPARE(ui::formatDayMonth(day), QStringLiteral("11/22"));
        const QString clock = ui::formatClock(18 * 60 + 5);  // "6:05 PM" (CLDR's space varies)
        QVERIFY2(clock.startsWith(QStringLiteral("6:05")) && clock.endsWith(QStringLiteral("PM")),
                 qPrintable(clock));
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedKingdom));
        QCOMPARE(ui::formatDayMonth(day), QStringLiteral("22/11"));
        QLocale::setDefault(QLocale::c());
        QCOMPARE(ui::formatClock(18 * 60 + 5), QStringLiteral("18:05"));  // not "18:05:00"
        QCOMPARE(ui::axisTimeFormat(false), QStringLiteral("HH:mm"));
        QLocale::setDefault(before);
    }

    // Free functions translate under the context lupdate gives them.
    void freeFunctionsAreGerman() {
        ui::DBusIdleSource idle;
        QVERIFY(!idle.idleSeconds());
        QCOMPARE(idle.unknownReason(),
                 QStringLiteral("es gibt keinen D-Bus-Sitzungsbus, über den die Arbeitsumgebung "
                                "gefragt werden kann"));
        // Autostart below a "config directory" that is a file: the error is German.
        const QString file = m_dir.path() + QStringLiteral("/not-a-directory");
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.close();
        qputenv("XDG_CONFIG_HOME", file.toUtf8());
        QString error;
        QVERIFY(!ui::autostart::setEnabled(true, QStringLiteral("/usr/bin/tandem"), {}, &error));
        QVERIFY2(error.contains(QStringLiteral("kann nicht")), qPrintable(error));
    }

    // Every message of a .ts file: no unfinished or empty translation, the same placeholders.
    static QStringList tsProblems(const QString& path, int* messageCount) {
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly))
            return {path + QStringLiteral(": cannot be read")};
        QXmlStreamReader xml(&f);
        QString context, source;
        int messages = 0;
        QStringList problems;
        while (!xml.atEnd()) {
            xml.readNext();
            if (!xml.isStartElement())
                continue;
            if (xml.name() == QLatin1String("name")) {
                context = xml.readElementText();
            } else if (xml.name() == QLatin1String("source")) {
                source = xml.readElementText();
            } else if (xml.name() == QLatin1String("translation")) {
                ++messages;
                const QString type = xml.attributes().value(QStringLiteral("type")).toString();
                const QString text = xml.readElementText();
                if (type == QLatin1String("vanished") || type == QLatin1String("obsolete"))
                    continue;
                if (type == QLatin1String("unfinished") || text.isEmpty())
                    problems << QStringLiteral("%1: untranslated: \"%2\"").arg(context, source);
                else if (placeholders(text) != placeholders(source))
                    problems << QStringLiteral("%1: placeholders differ: \"%2\" -> \"%3\"")
                                    .arg(context, source, text);
            }
        }
        if (xml.hasError())
            problems << path + QStringLiteral(": ") + xml.errorString();
        *messageCount = messages;
        return problems;
    }

    void translationFilesAreComplete() {
        const QDir dir(QStringLiteral(TANDEM_TRANSLATIONS_DIR));
        const QStringList files = dir.entryList({QStringLiteral("*.ts")}, QDir::Files);
        QVERIFY(files.contains(QStringLiteral("tandem_de.ts")));
        for (const QString& name : files) {
            int messages = 0;
            const QStringList problems = tsProblems(dir.filePath(name), &messages);
            QVERIFY2(messages > 300, qPrintable(name));
            QVERIFY2(problems.isEmpty(),
                     qPrintable(name + QStringLiteral(":\n") + problems.join(QLatin1Char('\n'))));
        }
    }

    // The .ts files hold every string of the sources: lupdate, run over ui/ and app/'s desktop
    // files into a copy, finds nothing new (a tr() added without its translation fails here).
    void sourcesHaveNoStringMissingFromTheTranslations() {
        const QString lupdate = QStringLiteral(TANDEM_LUPDATE);
        if (!QFileInfo::exists(lupdate))
            QSKIP("lupdate is not installed (Debian: qt6-l10n-tools)");
        const QDir dir(QStringLiteral(TANDEM_TRANSLATIONS_DIR));
        const QString root = QStringLiteral(TANDEM_SOURCE_DIR);
        for (const QString& name : dir.entryList({QStringLiteral("*.ts")}, QDir::Files)) {
            const QString copy = m_dir.filePath(name);
            QFile::remove(copy);
            QVERIFY(QFile::copy(dir.filePath(name), copy));
            QFile::setPermissions(copy, QFileDevice::ReadOwner | QFileDevice::WriteOwner);
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(lupdate,
                    {root + QStringLiteral("/ui"), root + QStringLiteral("/app/tandem_main.cpp"),
                     root + QStringLiteral("/app/desktop_services.cpp"),
                     QStringLiteral("-no-obsolete"), QStringLiteral("-locations"),
                     QStringLiteral("none"), QStringLiteral("-ts"), copy});
            QVERIFY(p.waitForFinished(120000));
            QVERIFY2(p.exitCode() == 0, p.readAll().constData());
            int messages = 0;
            const QStringList problems = tsProblems(copy, &messages);
            QVERIFY2(problems.isEmpty(),
                     qPrintable(name +
                                QStringLiteral(" lacks what the sources say (run lupdate, "
                                               "then translate):\n") +
                                problems.join(QLatin1Char('\n'))));
        }
    }

    // What reaches the window from the engine as codes (core/rules.hpp, core/next_action.hpp)
    // is German: every rule and every next step, worded with and without the translators,
    // differs; and the engine's English (reason, nextAction) never reaches a label.
    void engineCodesAreGerman() {
        const int64_t now = kNowMs;
        QList<core::Hold> holds;
        for (auto r : {core::Rule::OnBattery, core::Rule::OutsideTimeWindow, core::Rule::UserActive,
                       core::Rule::IdleUnknown, core::Rule::TooHot, core::Rule::UploadCap,
                       core::Rule::DownloadCap}) {
            core::Hold h;
            h.rule = r;
            h.mayChangeAtMs = now + 20 * 3600'000;  // tomorrow at 08:00
            h.idleThresholdSeconds = 300;
            h.temperatureC = 86;
            h.limitC = 85;
            h.usedBytes = 1'000'000'000;
            h.capBytes = 1'000'000'000;
            h.capReached = true;
            holds << h;
        }
        holds << holds[1];
        holds.back().noTimeWindow = true;
        holds << holds[4];
        holds.back().coolingDown = true;
        holds << holds[5];
        holds.back().capReached = false;
        QList<core::NextAction> nexts;
        for (int step = static_cast<int>(core::NextStep::Register);
             step <= static_cast<int>(core::NextStep::RetryUploadAt); ++step) {
            core::NextAction n(static_cast<core::NextStep>(step), now + 3600'000, "17", 40);
            n.hold = holds[0];
            nexts << n;
        }
        QStringList german, english;
        auto word = [&](QStringList& out) {
            for (const auto& h : holds)
                out << ui::holdText(h, now, m_zone);
            for (const auto& n : nexts)
                out << ui::nextActionText(n, now, m_zone);
            out << ui::formatAt(now + 12 * 3600'000, now, m_zone)      // midnight
                << ui::formatAt(now - 3600'000 * 14, now, m_zone)      // yesterday
                << ui::formatAt(now + 3 * 86400'000, now, m_zone)      // a weekday
                << ui::formatUntil(now + 12 * 3600'000, now, m_zone);  // midnight
        };
        word(german);
        for (QTranslator* t : m_installed)
            QCoreApplication::removeTranslator(t);
        word(english);
        for (QTranslator* t : m_installed)
            QCoreApplication::installTranslator(t);
        QCOMPARE(german.size(), english.size());
        for (int i = 0; i < german.size(); ++i) {
            QVERIFY2(!german[i].isEmpty(), qPrintable(english[i]));
            QVERIFY2(german[i] != english[i],
                     qPrintable(QStringLiteral("not German: ") + german[i]));
        }
        QCOMPARE(ui::formatAt(now + 12 * 3600'000, now, m_zone), QStringLiteral("um Mitternacht"));
        QCOMPARE(ui::formatAt(now + 20 * 3600'000, now, m_zone), QStringLiteral("morgen um 08:00"));
        QCOMPARE(ui::holdText(holds[0], now, m_zone), QStringLiteral("Wartet: läuft auf Akku"));

        // A real engine held by "only when idle" without an idle time: the headline, detail
        // and "Next" come from its codes, and its English for the log reaches no label.
        ui::EngineBridge bridge(m_clock, m_zone);
        core::RulesConfig rules;
        rules.onlyWhenIdle = true;
        HeldEngine held(bridge, m_clock, m_zone, rules);
        QVERIFY2(held.engine, held.error.c_str());
        FakeServices services;
        core::Settings settings;
        settings.rules = rules;
        ui::UiContext ctx;
        ctx.bridge = &bridge;
        ctx.services = &services;
        ctx.settings = &settings;
        ui::AppActions actions(&bridge, nullptr);
        ui::MainWindow window(ctx, &actions);
        held.start();
        QTRY_VERIFY(bridge.snapshot().hold.has_value());
        const auto snap = bridge.snapshot();
        QCOMPARE(snap.hold->rule, core::Rule::IdleUnknown);
        window.refresh();
        for (QLabel* l : window.findChildren<QLabel*>()) {
            for (const std::string& coreText : {snap.reason, snap.stateText, snap.nextAction})
                QVERIFY2(!l->text().contains(QString::fromStdString(coreText)),
                         qPrintable(l->objectName() + QStringLiteral(": ") + l->text()));
        }
        auto* headline =
            window.overviewPage()->findChild<ui::ElidingLabel*>(QStringLiteral("headline"));
        QCOMPARE(headline->fullText(),
                 QStringLiteral("Wartet: Tandem kann nicht feststellen, ob der Computer benutzt "
                                "wird"));
        auto* next = window.overviewPage()->findChild<QLabel*>(QStringLiteral("nextAction"));
        QCOMPARE(next->text(), QStringLiteral("prüft erneut, sobald sich das ändert"));
    }

    void cleanupTestCase() {
        for (QTranslator* t : m_installed)
            QCoreApplication::removeTranslator(t);
    }
};

QTEST_MAIN(TestUiTranslations)
#include "test_ui_translations.moc"
