// The platform probe against fake /sys, /proc, /etc and /dev trees, plus a smoke run on the
// real machine (values only checked for plausibility there).
#include "platform_probe.hpp"

#include <QtTest>

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>

using namespace tandem;
using namespace tandem::core;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
}

void supply(const fs::path& root, const std::string& name, const std::string& type,
            std::initializer_list<std::pair<const char*, const char*>> values) {
    const fs::path dir = root / "sys/class/power_supply" / name;
    put(dir / "type", type + "\n");
    for (const auto& [k, v] : values)
        put(dir / k, std::string(v) + "\n");
}

void setAccessTime(const fs::path& file, int64_t unixSeconds) {
    timespec times[2];
    times[0].tv_sec = static_cast<time_t>(unixSeconds);
    times[0].tv_nsec = 0;
    times[1].tv_sec = 0;
    times[1].tv_nsec = UTIME_OMIT;
    QVERIFY(utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

const char* kCpuinfoX86 =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 7 5800X 8-Core "
    "Processor\nphysical id\t: 0\ncore id\t\t: 0\n\n"
    "processor\t: 1\nmodel name\t: AMD Ryzen 7 5800X 8-Core Processor\nphysical id\t: 0\n"
    "core id\t\t: 0\n\n"
    "processor\t: 2\nmodel name\t: AMD Ryzen 7 5800X 8-Core Processor\nphysical id\t: 0\n"
    "core id\t\t: 1\n\n"
    "processor\t: 3\nmodel name\t: AMD Ryzen 7 5800X 8-Core Processor\nphysical id\t: 0\n"
    "core id\t\t: 1\n\n";

const char* kCpuinfoArm =
    "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\n\n"
    "processor\t: 1\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model "
    "B Rev 1.4\n";

}  // namespace

class TestPlatformProbe : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    int m_n = 0;
    fs::path freshRoot() {
        const fs::path root =
            fs::path(m_dir.path().toStdString()) / ("root" + std::to_string(++m_n));
        fs::create_directories(root);
        return root;
    }

  private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void laptopOnMains() {
        const fs::path root = freshRoot();
        supply(root, "AC", "Mains", {{"online", "1"}});
        supply(root, "BAT0", "Battery",
               {{"status", "Charging"}, {"capacity", "57"}, {"scope", "System"}});
        const PowerStatus p = PlatformProbe(root).powerStatus();
        QCOMPARE(p.source, PowerSource::Mains);
        QCOMPARE(p.batteryPercent.value(), 57);
    }

    void laptopOnBattery() {
        const fs::path root = freshRoot();
        supply(root, "ADP1", "Mains", {{"online", "0"}});
        supply(root, "BAT1", "Battery", {{"status", "Discharging"}, {"capacity", "31"}});
        const PowerStatus p = PlatformProbe(root).powerStatus();
        QCOMPARE(p.source, PowerSource::Battery);
        QCOMPARE(p.batteryPercent.value(), 31);
    }

    void usbCSupplyCountsAsMains() {
        const fs::path root = freshRoot();
        supply(root, "ucsi-source-psy-USBC000:001", "USB", {{"online", "1"}});
        supply(root, "BAT0", "Battery", {{"status", "Discharging"}});  // momentary, while plugged
        QCOMPARE(PlatformProbe(root).powerStatus().source, PowerSource::Mains);
    }

    void desktopWithAMouseBattery() {
        const fs::path root = freshRoot();
        // A wireless mouse discharging is not the computer running on battery.
        supply(root, "hidpp_battery_0", "Battery",
               {{"status", "Discharging"}, {"scope", "Device"}, {"capacity", "80"}});
        const PowerStatus p = PlatformProbe(root).powerStatus();
        QCOMPARE(p.source, PowerSource::Mains);
        QVERIFY(!p.batteryPercent.has_value());
    }

    void desktopWithoutSupplies() {
        const fs::path root = freshRoot();
        fs::create_directories(root / "sys/class/power_supply");
        QCOMPARE(PlatformProbe(root).powerStatus().source, PowerSource::Mains);
    }

    void noSysfsIsUnknown() {
        QCOMPARE(PlatformProbe(freshRoot()).powerStatus().source, PowerSource::Unknown);
    }

    void fullBatteryWithoutSupplyEntry() {
        const fs::path root = freshRoot();
        supply(root, "BAT0", "Battery", {{"status", "Full"}, {"capacity", "100"}});
        QCOMPARE(PlatformProbe(root).powerStatus().source, PowerSource::Mains);
    }

    void inventoryX86() {
        const fs::path root = freshRoot();
        put(root / "proc/cpuinfo", kCpuinfoX86);
        put(root / "proc/meminfo",
            "MemTotal:       32768000 kB\nMemFree:         1000 kB\nMemAvailable:   16384000 kB\n");
        put(root / "etc/os-release",
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n"
            "VERSION_ID=\"12\"\n");
        put(root / "proc/sys/kernel/osrelease", "6.1.0-26-amd64\n");
        auto inv = PlatformProbe(root).inventory();
        QVERIFY(inv.ok());
        QCOMPARE(inv->cpuModel, std::string("AMD Ryzen 7 5800X 8-Core Processor"));
        QCOMPARE(inv->logicalCores, 4);
        QCOMPARE(inv->physicalCores, 2);
        QCOMPARE(inv->memoryTotalBytes, int64_t{32768000} * 1024);
        QCOMPARE(inv->memoryAvailableBytes, int64_t{16384000} * 1024);
        QCOMPARE(inv->osName, std::string("Debian GNU/Linux 12 (bookworm)"));
        QCOMPARE(inv->kernelRelease, std::string("6.1.0-26-amd64"));
    }

    void inventoryArmAndFallbacks() {
        const fs::path root = freshRoot();
        put(root / "proc/cpuinfo", kCpuinfoArm);
        put(root / "proc/meminfo", "MemTotal: 4000000 kB\n");
        // No /etc/os-release: /usr/lib/os-release, unquoted NAME only.
        put(root / "usr/lib/os-release", "NAME=Alpine\nID=alpine\n");
        auto inv = PlatformProbe(root).inventory();
        QVERIFY(inv.ok());
        QCOMPARE(inv->cpuModel, std::string("BCM2835"));
        QCOMPARE(inv->logicalCores, 2);
        QCOMPARE(inv->physicalCores, 0);  // not stated
        QCOMPARE(inv->memoryAvailableBytes, int64_t{0});
        QCOMPARE(inv->osName, std::string("Alpine"));
        QCOMPARE(inv->kernelRelease, std::string());
    }

    void inventoryWithoutProcIsAnError() {
        auto inv = PlatformProbe(freshRoot()).inventory();
        QVERIFY(!inv.ok());
        QVERIFY2(inv.error().message.find("is /proc mounted?") != std::string::npos,
                 inv.error().message.c_str());
    }

    void diskSpaceOfMissingDirectoryUsesParent() {
        const fs::path root = freshRoot();
        auto d = PlatformProbe::diskSpace(root / "not" / "yet" / "created");
        QVERIFY2(d.ok(), d.ok() ? "" : d.error().message.c_str());
        QCOMPARE(d->measuredAt, root);
        QVERIFY(d->totalBytes > 0);
        QVERIFY(d->freeBytes >= 0 && d->freeBytes <= d->totalBytes);
    }

    void ttyIdleFromAccessTimes() {
        const fs::path root = freshRoot();
        ManualClock clock(1'000'000'000'000);  // Unix seconds 1e9
        TtyIdleSource none(clock, root);
        QVERIFY(!none.idleSeconds().has_value());  // no terminals at all
        put(root / "dev/pts/0", "");
        put(root / "dev/pts/3", "");
        put(root / "dev/pts/ptmx", "");  // the multiplexer is not a session
        put(root / "dev/tty1", "");
        put(root / "dev/tty", "");  // not a numbered terminal
        setAccessTime(root / "dev/pts/0", 1'000'000'000 - 3600);
        setAccessTime(root / "dev/pts/3", 1'000'000'000 - 125);
        setAccessTime(root / "dev/pts/ptmx", 1'000'000'000 - 1);
        setAccessTime(root / "dev/tty", 1'000'000'000 - 2);
        setAccessTime(root / "dev/tty1", 1'000'000'000 - 86400);
        TtyIdleSource source(clock, root);
        QCOMPARE(source.idleSeconds().value(), int64_t{125});
        clock.advanceMs(10'500);
        QCOMPARE(source.idleSeconds().value(), int64_t{135});
        setAccessTime(root / "dev/tty1", 1'000'000'000);
        QCOMPARE(source.idleSeconds().value(), int64_t{10});
    }

    void functionIdleSource() {
        int64_t idle = 42;
        FunctionIdleSource s([&] { return std::optional<int64_t>(idle); });
        QCOMPARE(s.idleSeconds().value(), int64_t{42});
        idle = 7;
        QCOMPARE(s.idleSeconds().value(), int64_t{7});
        FunctionIdleSource empty({});
        QVERIFY(!empty.idleSeconds().has_value());
    }

    // The real machine: plausible values, no assertion on what this host has.
    void realMachine() {
        const PlatformProbe probe;
        auto inv = probe.inventory();
        QVERIFY(inv.ok());
        QVERIFY(inv->logicalCores >= 1);
        QVERIFY(inv->memoryTotalBytes > 0);
        QVERIFY(!inv->osName.empty());
        QVERIFY(!inv->architecture.empty());
        qInfo("CPU %s, %d threads, %d cores, %.1f GiB, %s, kernel %s, %s, power %s",
              inv->cpuModel.c_str(), inv->logicalCores, inv->physicalCores,
              inv->memoryTotalBytes / 1073741824.0, inv->osName.c_str(), inv->kernelRelease.c_str(),
              inv->architecture.c_str(), toString(probe.powerStatus().source));
    }
};

QTEST_APPLESS_MAIN(TestPlatformProbe)
#include "test_platform_probe.moc"
