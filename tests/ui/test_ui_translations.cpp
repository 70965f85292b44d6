// Translations: with the German locale the app's visible texts are German (the settings dialog,
// the main window's pages and state, strings of the free functions whose context must match
// lupdate's), and every .ts in ui/translations is complete: no unfinished or empty entry, and each
// translation keeps the placeholders (%1, %2, ...) of its source.
#include "app_actions.hpp"
#include "autostart.hpp"
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

    void translationFilesAreComplete() {
        const QDir dir(QStringLiteral(TANDEM_TRANSLATIONS_DIR));
        const QStringList files = dir.entryList({QStringLiteral("*.ts")}, QDir::Files);
        QVERIFY(files.contains(QStringLiteral("tandem_de.ts")));
        for (const QString& name : files) {
            QFile f(dir.filePath(name));
            QVERIFY(f.open(QIODevice::ReadOnly));
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
            QVERIFY2(!xml.hasError(), qPrintable(name + QStringLiteral(": ") + xml.errorString()));
            QVERIFY2(messages > 300, qPrintable(name));
            QVERIFY2(problems.isEmpty(),
                     qPrintable(name + QStringLiteral(":\n") + problems.join(QLatin1Char('\n'))));
        }
    }

    void cleanupTestCase() {
        for (QTranslator* t : m_installed)
            QCoreApplication::removeTranslator(t);
    }
};

QTEST_MAIN(TestUiTranslations)
#include "test_ui_translations.moc"
