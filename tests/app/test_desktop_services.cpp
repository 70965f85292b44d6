// The desktop app's standing() (app/desktop_services.hpp) up to the network: which data
// directory's registration.json it reads, what it answers without a registration or with one for
// another coordinator (not registered, nothing asked), a damaged file (an error naming it), and
// a coordinator that cannot be reached (an error, not a crash). The leaderboard's JSON and the
// coordinator's answer are tested in tests/net and tests/coordinator.
#include "desktop_services.hpp"

#include "registration_file.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tandem;
namespace fs = std::filesystem;

namespace {
void writeRaw(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}
// Port 1 on the loopback: nothing listens there, the connection is refused at once.
constexpr const char* kUnreachable = "https://127.0.0.1:1";
}  // namespace

class TestDesktopServices : public QObject {
    Q_OBJECT

  private slots:
    void standingFromTheRegistrationFile() {
        QTemporaryDir defaultDir, chosenDir;
        const fs::path defaultPath = defaultDir.path().toStdString();
        const fs::path chosenPath = chosenDir.path().toStdString();
        app::DesktopServices services(defaultPath);
        core::Settings s;
        s.coordinatorUrl = kUnreachable;

        // No registration yet: answered without asking anyone.
        auto none = services.standing(s);
        QVERIFY(none.ok);
        QVERIFY(!none.registered);

        core::Registration r;
        r.coordinatorUrl = "https://elsewhere.example:8443";
        r.clientId = 3;
        r.token = "t0ken";
        writeRaw(defaultPath / "registration.json", core::registrationJson(r));
        // A registration with another coordinator: not registered with this one.
        auto elsewhere = services.standing(s);
        QVERIFY(elsewhere.ok);
        QVERIFY(!elsewhere.registered);

        // With this coordinator: asked, and it cannot be reached.
        r.coordinatorUrl = kUnreachable;
        writeRaw(defaultPath / "registration.json", core::registrationJson(r));
        auto down = services.standing(s);
        QVERIFY(!down.ok);
        QVERIFY(!down.error.isEmpty());

        // The settings' data directory wins over the default one: none there.
        s.dataDirectory = chosenPath.string();
        auto chosen = services.standing(s);
        QVERIFY(chosen.ok);
        QVERIFY(!chosen.registered);
        writeRaw(chosenPath / "registration.json", "{\"token\":");
        auto damaged = services.standing(s);
        QVERIFY(!damaged.ok);
        QVERIFY2(damaged.error.contains(QStringLiteral("registration.json")),
                 qPrintable(damaged.error));
    }
};

QTEST_GUILESS_MAIN(TestDesktopServices)
#include "test_desktop_services.moc"
