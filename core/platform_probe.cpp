#include "platform_probe.hpp"

#include "text.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> readSmallFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::optional<std::string> readValue(const fs::path& path) {
    auto text = readSmallFile(path);
    if (!text)
        return std::nullopt;
    return trimWhitespace(*text);
}

// "key\t: value" lines of /proc/cpuinfo and "Key:   123 kB" lines of /proc/meminfo.
std::pair<std::string, std::string> splitColon(const std::string& line) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
        return {trimWhitespace(line), {}};
    return {trimWhitespace(line.substr(0, colon)), trimWhitespace(line.substr(colon + 1))};
}

// os-release values: unquoted, "double quoted" with backslash escapes, or 'single quoted'.
std::string unquote(const std::string& v) {
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        std::string out;
        for (size_t i = 1; i + 1 < v.size(); ++i) {
            if (v.front() == '"' && v[i] == '\\' && i + 2 < v.size())
                ++i;
            out += v[i];
        }
        return out;
    }
    return v;
}

}  // namespace

fs::path PlatformProbe::under(const char* absolute) const {
    return m_root / fs::path(absolute).relative_path();
}

PowerStatus PlatformProbe::powerStatus() const {
    PowerStatus status;
    std::error_code ec;
    fs::directory_iterator it(under("/sys/class/power_supply"), ec);
    if (ec)
        return status;
    bool supplyOnline = false;
    bool systemBattery = false;
    bool discharging = false;
    std::vector<fs::path> entries;
    for (const auto& entry : it)
        entries.push_back(entry.path());
    std::sort(entries.begin(), entries.end());
    for (const fs::path& dir : entries) {
        const std::string type = readValue(dir / "type").value_or("");
        if (type == "Battery") {
            if (readValue(dir / "scope").value_or("") == "Device")
                continue;
            systemBattery = true;
            if (readValue(dir / "status").value_or("") == "Discharging")
                discharging = true;
            if (!status.batteryPercent) {
                if (auto cap = readValue(dir / "capacity")) {
                    try {
                        status.batteryPercent = std::clamp(std::stoi(*cap), 0, 100);
                    } catch (const std::exception&) {
                    }
                }
            }
        } else if (type == "Mains" || type.rfind("USB", 0) == 0) {
            if (readValue(dir / "online").value_or("0") == "1")
                supplyOnline = true;
        }
    }
    if (supplyOnline || !systemBattery) {
        status.source = PowerSource::Mains;
    } else if (discharging) {
        status.source = PowerSource::Battery;
    } else {
        // A battery that is full or not charging, with no supply listed: on mains.
        status.source = PowerSource::Mains;
    }
    return status;
}

Expected<HardwareInventory> PlatformProbe::inventory() const {
    HardwareInventory inv;
    const auto cpuinfo = readSmallFile(under("/proc/cpuinfo"));
    const auto meminfo = readSmallFile(under("/proc/meminfo"));
    if (!cpuinfo && !meminfo) {
        return makeError("cannot read " + under("/proc/cpuinfo").string() + " or " +
                         under("/proc/meminfo").string() + ": is /proc mounted?");
    }
    if (cpuinfo) {
        std::istringstream lines(*cpuinfo);
        std::string line;
        std::string physicalId;
        std::set<std::pair<std::string, std::string>> cores;
        std::string fallbackModel;
        while (std::getline(lines, line)) {
            const auto [key, value] = splitColon(line);
            if (key == "processor") {
                ++inv.logicalCores;
            } else if (key == "model name" && inv.cpuModel.empty()) {
                inv.cpuModel = value;
            } else if ((key == "Hardware" || key == "cpu model" || key == "Model") &&
                       fallbackModel.empty()) {
                fallbackModel = value;
            } else if (key == "physical id") {
                physicalId = value;
            } else if (key == "core id") {
                cores.emplace(physicalId, value);
            }
        }
        if (inv.cpuModel.empty())
            inv.cpuModel = fallbackModel;
        inv.physicalCores = static_cast<int>(cores.size());
    }
    if (inv.cpuModel.empty())
        inv.cpuModel = "unknown CPU";
    if (inv.logicalCores == 0)
        inv.logicalCores = static_cast<int>(std::thread::hardware_concurrency());
    if (meminfo) {
        std::istringstream lines(*meminfo);
        std::string line;
        while (std::getline(lines, line)) {
            const auto [key, value] = splitColon(line);
            int64_t kib = 0;
            try {
                kib = std::stoll(value);
            } catch (const std::exception&) {
                continue;
            }
            if (key == "MemTotal")
                inv.memoryTotalBytes = kib * 1024;
            if (key == "MemAvailable")
                inv.memoryAvailableBytes = kib * 1024;
        }
    }
    auto osRelease = readSmallFile(under("/etc/os-release"));
    if (!osRelease)
        osRelease = readSmallFile(under("/usr/lib/os-release"));
    if (osRelease) {
        std::istringstream lines(*osRelease);
        std::string line;
        std::string name;
        while (std::getline(lines, line)) {
            const size_t eq = line.find('=');
            if (eq == std::string::npos)
                continue;
            const std::string key = trimWhitespace(line.substr(0, eq));
            const std::string value = unquote(trimWhitespace(line.substr(eq + 1)));
            if (key == "PRETTY_NAME")
                inv.osName = value;
            if (key == "NAME")
                name = value;
        }
        if (inv.osName.empty())
            inv.osName = name;
    }
    if (inv.osName.empty())
        inv.osName = "Linux";
    inv.kernelRelease = readValue(under("/proc/sys/kernel/osrelease")).value_or("");
    utsname uts{};
    if (uname(&uts) == 0)
        inv.architecture = uts.machine;
    return inv;
}

Expected<DiskSpace> PlatformProbe::diskSpace(const fs::path& directory) {
    std::error_code ec;
    fs::path at = fs::absolute(directory, ec);
    if (ec)
        return makeError("cannot measure free space of " + directory.string() + ": " +
                         ec.message());
    while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) {
        at = at.parent_path();
    }
    struct statvfs st {};
    if (statvfs(at.c_str(), &st) != 0) {
        return makeError("cannot measure free space of " + at.string() + ": " +
                         std::strerror(errno));
    }
    DiskSpace d;
    d.measuredAt = at;
    d.freeBytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
    d.totalBytes = static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize);
    return d;
}

std::optional<int64_t> TtyIdleSource::idleSeconds() {
    std::optional<int64_t> latestMs;
    auto consider = [&](const fs::path& p) {
        struct stat st {};
        // Terminals are character devices; regular files stand in for them in test trees.
        if (::stat(p.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISREG(st.st_mode)))
            return;
        const int64_t ms = int64_t{st.st_atim.tv_sec} * 1000 + st.st_atim.tv_nsec / 1'000'000;
        if (!latestMs || ms > *latestMs)
            latestMs = ms;
    };
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(m_root / "dev/pts", ec)) {
        if (e.path().filename() != "ptmx")
            consider(e.path());
    }
    for (const auto& e : fs::directory_iterator(m_root / "dev", ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() > 3 && name.rfind("tty", 0) == 0 &&
            std::isdigit(static_cast<unsigned char>(name[3]))) {
            consider(e.path());
        }
    }
    if (!latestMs)
        return std::nullopt;
    return std::max<int64_t>(0, (m_clock.nowMs() - *latestMs) / 1000);
}

}  // namespace tandem::core
