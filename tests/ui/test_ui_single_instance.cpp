// Single instance: the first claim listens; a second one (from another thread, as another
// process would) finds it, asks it to show itself and is told to exit; a socket file left by a
// crashed instance does not block the next start.
#include "single_instance.hpp"

#include <QLocalServer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <thread>

using namespace tandem;

class TestUiSingleInstance : public QObject {
    Q_OBJECT

  private slots:
    void secondLaunchRaisesTheFirst() {
        QTemporaryDir dir;
        ui::SingleInstance first(dir.path());
        QVERIFY(first.claim());
        QSignalSpy raised(&first, &ui::SingleInstance::raiseRequested);
        std::atomic<int> second{-1};
        std::thread other([&] {
            ui::SingleInstance s(dir.path());
            second = s.claim(true) ? 1 : 0;
        });
        QTRY_COMPARE(raised.count(), 1);
        other.join();
        QCOMPARE(second.load(), 0);
        // Another data directory is another instance.
        QTemporaryDir otherDir;
        ui::SingleInstance third(otherDir.path());
        QVERIFY(third.serverName() != first.serverName());
        QVERIFY(third.claim());
    }

    void staleSocketIsReplaced() {
        QTemporaryDir dir;
        const QString name = ui::SingleInstance::serverNameFor(dir.path());
        {
            // A server that goes away without cleaning up behaves like a crash for the name.
            QLocalServer crashed;
            crashed.setSocketOptions(QLocalServer::UserAccessOption);
            QVERIFY(crashed.listen(name));
        }
        ui::SingleInstance next(dir.path());
        QVERIFY(next.claim());
        QSignalSpy raised(&next, &ui::SingleInstance::raiseRequested);
        std::atomic<int> later{-1};
        std::thread other([&] { later = ui::SingleInstance(dir.path()).claim(true) ? 1 : 0; });
        QTRY_COMPARE(raised.count(), 1);
        other.join();
        QCOMPARE(later.load(), 0);
    }
};

QTEST_MAIN(TestUiSingleInstance)
#include "test_ui_single_instance.moc"
