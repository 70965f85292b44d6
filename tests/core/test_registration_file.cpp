// registration.json (core/registration_file.hpp), the file the engine writes and the desktop app
// reads the bearer token from: a hand-written file is read field by field, what
// registrationJson() writes reads back the same, and a missing, damaged or incomplete file gives
// an error that names the file.
#include "registration_file.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tandem;
using namespace tandem::core;
namespace fs = std::filesystem;

namespace {
void writeRaw(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}
}  // namespace

class TestRegistrationFile : public QObject {
    Q_OBJECT

  private slots:
    void readsHandWrittenFile() {
        QTemporaryDir dir;
        const fs::path file = fs::path(dir.path().toStdString()) / "registration.json";
        // base64 of 32 bytes 0x00 .. 0x1f (RFC 4648, worked out by hand from the alphabet).
        writeRaw(file, R"({"coordinator_url":"https://c.example:8443","client_id":7,)"
                       R"("token":"799d801b","coordinator_public_key":)"
                       R"("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="})");
        auto r = readRegistrationFile(file);
        QVERIFY2(r.ok(), r ? "" : r.error().message.c_str());
        QCOMPARE(r->coordinatorUrl, std::string("https://c.example:8443"));
        QCOMPARE(r->clientId, int64_t(7));
        QCOMPARE(r->token, std::string("799d801b"));
        for (size_t i = 0; i < r->coordinatorKey.size(); ++i)
            QCOMPARE(int(r->coordinatorKey[i]), int(i));

        // Written and read back.
        Registration mine = *r;
        mine.clientId = 12;
        mine.token = "another";
        writeRaw(file, registrationJson(mine));
        auto back = readRegistrationFile(file);
        QVERIFY(back.ok());
        QCOMPARE(back->clientId, int64_t(12));
        QCOMPARE(back->token, std::string("another"));
        QVERIFY(back->coordinatorKey == mine.coordinatorKey);
    }

    void refusesBadFiles() {
        QTemporaryDir dir;
        const fs::path file = fs::path(dir.path().toStdString()) / "registration.json";
        auto expectError = [&](const std::string& text, const std::string& part) {
            writeRaw(file, text);
            auto r = readRegistrationFile(file);
            QVERIFY(!r.ok());
            QVERIFY2(r.error().message.find(file.string()) != std::string::npos,
                     r.error().message.c_str());
            QVERIFY2(r.error().message.find(part) != std::string::npos, r.error().message.c_str());
        };
        expectError("{\"coordinator_url\":", "not a JSON object");
        expectError(R"({"coordinator_url":"https://c","client_id":1,"coordinator_public_key":"x"})",
                    "token");
        expectError(R"({"coordinator_url":"https://c","client_id":"one","token":"t",)"
                    R"("coordinator_public_key":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="})",
                    "client_id");
        expectError(R"({"coordinator_url":"https://c","client_id":1,"token":"t",)"
                    R"("coordinator_public_key":"AAEC"})",
                    "coordinator_public_key");
        fs::remove(file);
        QVERIFY(!readRegistrationFile(file).ok());
    }
};

QTEST_GUILESS_MAIN(TestRegistrationFile)
#include "test_registration_file.moc"
