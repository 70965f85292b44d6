// Settings: defaults, JSON round trip through real files, unknown keys kept, each validation
// error with its message, type errors, atomic save refusing invalid settings.
#include "settings.hpp"

#include <QtTest>

#include <cmath>

#include <fstream>

using namespace tandem;
using namespace tandem::core;

namespace {

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

void write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

Settings everythingSet() {
    Settings s;
    s.device = "cuda:1";
    s.rules.onlyWhenIdle = true;
    s.rules.idleThresholdSeconds = 600;
    s.rules.pauseOnBattery = false;
    s.rules.useTimeWindows = true;
    s.rules.timeWindows = {{TimeWindow::kWeekdays, 18 * 60, 8 * 60}, {0x60, 0, 0}};
    s.rules.maxTemperatureC = 83.5;
    s.rules.temperatureHysteresisC = 4;
    s.rules.dailyUploadCapBytes = 2'000'000'000;
    s.rules.dailyDownloadCapBytes = 10'000'000'000;
    s.uploadLimitBytesPerSecond = 500'000;
    s.downloadLimitBytesPerSecond = 2'000'000;
    s.proxy = "socks5h://user:secret@proxy.example:1080";
    s.dataDirectory = "/home/ada/.local/share/Tandem";
    s.coordinatorUrl = "https://coordinator.example:8443/tandem";
    s.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    s.startAtLogin = true;
    s.displayName = "Ada <Lovelace>";
    s.team = "Analytical Engines";
    s.energyPricePerKwh = 0.32;
    return s;
}

std::vector<SettingsIssue> issuesOf(const std::function<void(Settings&)>& change) {
    Settings s;
    change(s);
    return validate(s);
}

}  // namespace

class TestSettings : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::filesystem::path file(const char* name) {
        return std::filesystem::path(m_dir.path().toStdString()) / name;
    }

  private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void defaultsAreValid() {
        const Settings s;
        QVERIFY(validate(s).empty());
        QCOMPARE(s.device, std::string("auto"));
        QVERIFY(s.rules.pauseOnBattery);
        QVERIFY(!s.rules.onlyWhenIdle);
        QVERIFY(!s.startAtLogin);
    }

    void missingFileGivesDefaults() {
        auto loaded = loadSettings(file("absent.json"));
        QVERIFY(loaded.ok());
        QVERIFY(loaded->settings == Settings{});
        QVERIFY(loaded->warnings.empty());
    }

    void roundTripThroughFile() {
        const Settings s = everythingSet();
        QVERIFY(validate(s).empty());
        const auto path = file("settings.json");
        Status saved = saveSettings(path, s);
        QVERIFY2(saved.ok(), saved.ok() ? "" : saved.error().message.c_str());
        QVERIFY(!std::filesystem::exists(path.string() + ".tmp"));
        QCOMPARE(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
        auto loaded = loadSettings(path);
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
        QVERIFY(loaded->settings == s);
        QVERIFY(loaded->warnings.empty());
        // The file is readable by a person.
        const std::string text = serializeSettings(s);
        QVERIFY(has(text, "\"days\": [\n          \"mon\""));
        QVERIFY(has(text, "\"start\": \"18:00\""));
        QVERIFY(has(text, "\"end\": \"08:00\""));
        QVERIFY(has(text, "\"maxTemperatureC\": 83.5"));
        Settings none = s;
        none.rules.maxTemperatureC.reset();
        QVERIFY(has(serializeSettings(none), "\"maxTemperatureC\": null"));
        QVERIFY(parseSettings(serializeSettings(none))->settings == none);
    }

    void missingKeysTakeDefaults() {
        auto loaded = parseSettings(R"({"device": "cpu", "rules": {"onlyWhenIdle": true}})");
        QVERIFY(loaded.ok());
        QCOMPARE(loaded->settings.device, std::string("cpu"));
        QVERIFY(loaded->settings.rules.onlyWhenIdle);
        QCOMPARE(loaded->settings.rules.idleThresholdSeconds, int64_t{300});
        QVERIFY(loaded->settings.rules.pauseOnBattery);
    }

    void unknownKeysAreKeptAndReported() {
        // Not a raw string: moc takes a double slash in a raw string for a comment ("\\/" is "/").
        const char* text =
            "{\"version\": 3, \"device\": \"cpu\", \"telemetry\": {\"level\": 2},"
            " \"rules\": {\"onlyWhenIdle\": true, \"gpuShare\": 0.5},"
            " \"coordinator\": {\"url\": \"https:/\\/a.example\", \"region\": \"eu\"}}";
        auto loaded = parseSettings(text);
        QVERIFY(loaded.ok());
        const auto& w = loaded->warnings;
        QCOMPARE(w.size(), size_t{4});
        QVERIFY(has(w[0], "newer Tandem (version 3"));
        bool sawRules = false, sawTop = false, sawCoordinator = false;
        for (const auto& x : w) {
            sawRules = sawRules || has(x, "'rules.gpuShare'");
            sawTop = sawTop || has(x, "'telemetry'");
            sawCoordinator = sawCoordinator || has(x, "'coordinator.region'");
        }
        QVERIFY(sawRules && sawTop && sawCoordinator);
        // Written back where they were.
        const std::string out = serializeSettings(loaded->settings);
        auto again = parseSettings(out);
        QVERIFY(again.ok());
        QCOMPARE(again->settings.unknownKeys, loaded->settings.unknownKeys);
        QVERIFY(has(out, "\"gpuShare\": 0.5"));
        QVERIFY(has(out, "\"region\": \"eu\""));
        QVERIFY(has(out, "\"level\": 2"));
    }

    void typeAndShapeErrors_data() {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("expected");
        QTest::newRow("not json") << "{\"device\": "
                                  << "not valid JSON";
        QTest::newRow("not an object") << "[1, 2]"
                                       << "must hold a JSON object, found a list";
        QTest::newRow("device a number") << R"({"device": 3})"
                                         << "device must be text, found a number";
        QTest::newRow("flag as text") << R"({"startAtLogin": "yes"})"
                                      << "startAtLogin must be true or false, found text";
        QTest::newRow("fraction for bytes") << R"({"rules": {"dailyUploadCapBytes": 1.5}})"
                                            << "rules.dailyUploadCapBytes must be a whole number";
        QTest::newRow("rules not object") << R"({"rules": 5})"
                                          << "rules must be an object";
        QTest::newRow("temperature text") << R"({"rules": {"maxTemperatureC": "hot"}})"
                                          << "rules.maxTemperatureC must be a number or null";
        QTest::newRow("windows not list") << R"({"rules": {"timeWindows": {}}})"
                                          << "rules.timeWindows must be a list";
        QTest::newRow("bad weekday")
            << R"({"rules": {"timeWindows": [{"days": ["mon", "funday"], "start": "18:00", "end": "08:00"}]}})"
            << "rules.timeWindows[0].days holds 'funday'; expected mon, tue";
        QTest::newRow("bad time")
            << R"({"rules": {"timeWindows": [{"days": ["mon"], "start": "25:00", "end": "08:00"}]}})"
            << "rules.timeWindows[0].start: time is '25:00'; expected 00:00 to 23:59";
        QTest::newRow("time not HH:MM")
            << R"({"rules": {"timeWindows": [{"days": ["mon"], "start": "6pm", "end": "08:00"}]}})"
            << "time is '6pm'; expected HH:MM";
        QTest::newRow("window extra key")
            << R"({"rules": {"timeWindows": [{"days": ["mon"], "from": "18:00"}]}})"
            << "has an unknown key 'from'";
        QTest::newRow("huge number") << R"({"uploadLimitBytesPerSecond": 18446744073709551615})"
                                     << "uploadLimitBytesPerSecond is too large";
        QTest::newRow("price as text") << R"({"energyPricePerKwh": "0.30"})"
                                       << "energyPricePerKwh must be a number";
    }
    void typeAndShapeErrors() {
        QFETCH(QString, json);
        QFETCH(QString, expected);
        auto r = parseSettings(json.toStdString());
        QVERIFY(!r.ok());
        QVERIFY2(QString::fromStdString(r.error().message).contains(expected),
                 r.error().message.c_str());
    }

    void validationErrors_data() {
        QTest::addColumn<int>("which");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("expected");
        int i = 0;
        QTest::newRow("device") << i++ << "device"
                                << "device is 'gpu'; expected auto, cpu or cuda:N";
        QTest::newRow("cuda no index") << i++ << "device"
                                       << "device is 'cuda:'";
        QTest::newRow("idle too short") << i++ << "rules.idleThresholdSeconds"
                                        << "idle threshold is 5 s; expected 10 s to 86400 s";
        QTest::newRow("windows on, none set") << i++ << "rules.timeWindows"
                                              << "time windows are switched on but none is set";
        QTest::newRow("window without days") << i++ << "rules.timeWindows"
                                             << "time window 1 has no weekday chosen";
        QTest::newRow("window minutes") << i++ << "rules.timeWindows"
                                        << "time window 1 runs from minute 1440 to 0";
        QTest::newRow("temperature") << i++ << "rules.maxTemperatureC"
                                     << "temperature limit is 150 °C; expected 40 °C to 110 °C";
        QTest::newRow("hysteresis") << i++ << "rules.temperatureHysteresisC"
                                    << "expected 0 °C to 30 °C";
        QTest::newRow("upload cap")
            << i++ << "rules.dailyUploadCapBytes"
            << "daily upload cap is 5000 bytes; expected 0 (no cap) or at least 1 MB";
        QTest::newRow("download cap") << i++ << "rules.dailyDownloadCapBytes"
                                      << "daily download cap is -1 bytes";
        QTest::newRow("rate")
            << i++ << "uploadLimitBytesPerSecond"
            << "upload rate limit is 10 bytes/s; expected 0 (unlimited) or at least 1000";
        QTest::newRow("down rate") << i++ << "downloadLimitBytesPerSecond"
                                   << "download rate limit is -5 bytes/s";
        QTest::newRow("proxy scheme") << i++ << "proxy"
                                      << "proxy is 'ftp://p:21'; expected empty";
        QTest::newRow("proxy port")
            << i++ << "proxy"
            << "proxy 'http://p.example:99999' has port '99999' (expected 1 to 65535)";
        QTest::newRow("proxy no host") << i++ << "proxy"
                                       << "proxy 'socks5://:1080' has no host name";
        QTest::newRow("data dir") << i++ << "dataDirectory"
                                  << "data directory 'data' is relative; expected an absolute path";
        QTest::newRow("plain http") << i++ << "coordinator.url"
                                    << "uses plain http; TLS is always on";
        QTest::newRow("no scheme")
            << i++ << "coordinator.url"
            << "coordinator URL 'coordinator.example' does not start with https://";
        QTest::newRow("url port") << i++ << "coordinator.url"
                                  << "has port 'x'";
        QTest::newRow("ca and pin") << i++ << "coordinator.caFile"
                                    << "both a CA file and a pinned key are set";
        QTest::newRow("ca relative") << i++ << "coordinator.caFile"
                                     << "CA file 'ca.pem' is relative";
        QTest::newRow("pin form") << i++ << "coordinator.pinnedPublicKey"
                                  << "pinned key 'sha1//abc' is not of the form sha256//";
        QTest::newRow("name too long") << i++ << "displayName"
                                       << "display name may have at most 32 characters";
        QTest::newRow("name untrimmed") << i++ << "displayName"
                                        << "displayName has white space at an end";
        QTest::newRow("team control") << i++ << "team"
                                      << "team may hold printable characters only; found U+0007";
        QTest::newRow("negative price") << i++ << "energyPricePerKwh"
                                        << "electricity price is -0.100000 per kWh; expected 0";
        QTest::newRow("NaN price") << i++ << "energyPricePerKwh"
                                   << "electricity price is nan per kWh";
    }
    void validationErrors() {
        QFETCH(int, which);
        QFETCH(QString, key);
        QFETCH(QString, expected);
        const std::vector<std::function<void(Settings&)>> changes{
            [](Settings& s) { s.device = "gpu"; },
            [](Settings& s) { s.device = "cuda:"; },
            [](Settings& s) { s.rules.idleThresholdSeconds = 5; },
            [](Settings& s) { s.rules.useTimeWindows = true; },
            [](Settings& s) {
                s.rules.timeWindows = {{0, 60, 120}};
            },
            [](Settings& s) {
                s.rules.timeWindows = {{1, 1440, 0}};
            },
            [](Settings& s) { s.rules.maxTemperatureC = 150; },
            [](Settings& s) { s.rules.temperatureHysteresisC = -1; },
            [](Settings& s) { s.rules.dailyUploadCapBytes = 5000; },
            [](Settings& s) { s.rules.dailyDownloadCapBytes = -1; },
            [](Settings& s) { s.uploadLimitBytesPerSecond = 10; },
            [](Settings& s) { s.downloadLimitBytesPerSecond = -5; },
            [](Settings& s) { s.proxy = "ftp://p:21"; },
            [](Settings& s) { s.proxy = "http://p.example:99999"; },
            [](Settings& s) { s.proxy = "socks5://:1080"; },
            [](Settings& s) { s.dataDirectory = "data"; },
            [](Settings& s) { s.coordinatorUrl = "http://coordinator.example"; },
            [](Settings& s) { s.coordinatorUrl = "coordinator.example"; },
            [](Settings& s) { s.coordinatorUrl = "https://coordinator.example:x/"; },
            [](Settings& s) {
                s.caFile = "/etc/ssl/ca.pem";
                s.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
            },
            [](Settings& s) { s.caFile = "ca.pem"; },
            [](Settings& s) { s.pinnedPublicKey = "sha1//abc"; },
            [](Settings& s) { s.displayName = std::string(33, 'n'); },
            [](Settings& s) { s.displayName = "Ada "; },
            [](Settings& s) { s.team = "bell\x07"; },
            [](Settings& s) { s.energyPricePerKwh = -0.1; },
            [](Settings& s) { s.energyPricePerKwh = std::nan(""); },
        };
        QCOMPARE(changes.size(), size_t{27});
        const auto issues = issuesOf(changes.at(static_cast<size_t>(which)));
        QCOMPARE(issues.size(), size_t{1});
        QCOMPARE(QString::fromStdString(issues[0].key), key);
        QVERIFY2(QString::fromStdString(issues[0].message).contains(expected),
                 issues[0].message.c_str());
    }

    void acceptedForms() {
        for (const char* device : {"auto", "cpu", "cuda:0", "cuda:12"}) {
            QVERIFY(issuesOf([&](Settings& s) { s.device = device; }).empty());
        }
        for (const char* proxy : {"", "direct", "http://proxy:3128", "https://p.example",
                                  "socks5h://u:p@[::1]:1080/", "socks4a://10.0.0.1:9050"}) {
            QVERIFY2(issuesOf([&](Settings& s) { s.proxy = proxy; }).empty(), proxy);
        }
        for (const char* url :
             {"https://127.0.0.1:8443", "https://c.example/v1/", "https://[::1]:443/x"}) {
            QVERIFY2(issuesOf([&](Settings& s) { s.coordinatorUrl = url; }).empty(), url);
        }
    }

    void severalIssuesAtOnce() {
        Settings s;
        s.device = "tpu";
        s.coordinatorUrl = "http://x";
        const auto issues = validate(s);
        QCOMPARE(issues.size(), size_t{2});
        Status st = validateSettings(s);
        QVERIFY(!st.ok());
        QVERIFY(has(st.error().message, "device is 'tpu'"));
        QVERIFY(has(st.error().message, "; coordinator URL 'http://x'"));
    }

    void invalidSettingsAreNotSaved() {
        const auto path = file("kept.json");
        QVERIFY(saveSettings(path, everythingSet()).ok());
        const std::string before = serializeSettings(everythingSet());
        Settings bad = everythingSet();
        bad.device = "gpu";
        Status s = saveSettings(path, bad);
        QVERIFY(!s.ok());
        QVERIFY2(has(s.error().message, "not saved to " + path.string()),
                 s.error().message.c_str());
        auto loaded = loadSettings(path);
        QVERIFY(loaded.ok());
        QVERIFY(loaded->settings == everythingSet());
        Q_UNUSED(before);
    }

    void loadReportsFileAndProblem() {
        const auto path = file("broken.json");
        write(path, R"({"rules": {"idleThresholdSeconds": 1}})");
        auto r = loadSettings(path);
        QVERIFY(!r.ok());
        QVERIFY2(has(r.error().message, path.string()), r.error().message.c_str());
        QVERIFY(has(r.error().message, "idle threshold is 1 s"));
        write(path, "{");
        r = loadSettings(path);
        QVERIFY(!r.ok());
        QVERIFY(has(r.error().message, "not valid JSON"));
        // A number past double's range is nlohmann's out_of_range, not parse_error; it used to
        // escape and end the process (tests/fuzz/regressions/fuzz_settings).
        for (const char* text : {R"({"version": 1e9999})", "4e8888", R"({"a": [-1e400]})"}) {
            write(path, text);
            r = loadSettings(path);
            QVERIFY2(!r.ok(), text);
            QVERIFY2(has(r.error().message, "not valid JSON"), r.error().message.c_str());
        }
    }

    void timeOfDay() {
        QCOMPARE(*parseTimeOfDay("00:00"), 0);
        QCOMPARE(*parseTimeOfDay("8:05"), 485);
        QCOMPARE(*parseTimeOfDay("23:59"), 1439);
        for (const char* bad :
             {"", "24:00", "12:60", "12:5", "123:00", "ab:cd", "12-00", " 1:00"}) {
            QVERIFY2(!parseTimeOfDay(bad).ok(), bad);
        }
    }
};

QTEST_APPLESS_MAIN(TestSettings)
#include "test_settings.moc"
