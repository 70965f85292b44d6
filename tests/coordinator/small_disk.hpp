// A size-limited disk for tests of a full disk: a tmpfs mounted in a mount namespace of the
// test process's own, so the mount goes with the process even when it crashes. Needs root (a
// test without it says SKIPPED).
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace tandem::testing {

// Mounts a tmpfs of `bytes` on the directory `at` (created if missing). Empty when it worked,
// otherwise why not.
inline std::string mountSmallDisk(const std::filesystem::path& at, int64_t bytes) {
    if (::geteuid() != 0)
        return "mounting a size-limited tmpfs needs root";
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("no private mount namespace: ") + std::strerror(errno);
    std::filesystem::create_directories(at);
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) != 0)
        return std::string("mount tmpfs: ") + std::strerror(errno);
    return {};
}

inline int64_t freeBytes(const std::filesystem::path& dir) {
    struct statvfs v {};
    if (::statvfs(dir.c_str(), &v) != 0)
        return -1;
    return static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
}

}  // namespace tandem::testing
