// Durable writes with POSIX calls: the data is on disk before the rename makes it visible, and
// the rename itself is on disk before we report success.
#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <string>

namespace tandem {
namespace {

std::string reason(int error) {
    return std::strerror(error);
}

Error ioError(const std::string& what, const std::filesystem::path& path, int error) {
    return makeError("cannot " + what + " '" + path.string() + "': " + reason(error));
}

// Closes a descriptor on every path out of a function.
class FileDescriptor {
  public:
    explicit FileDescriptor(int fd) : m_fd(fd) {}
    ~FileDescriptor() {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    int get() const { return m_fd; }
    // close() can report a deferred write error (NFS, quota); the caller must see it.
    int close() {
        const int result = ::close(m_fd);
        m_fd = -1;
        return result;
    }

  private:
    int m_fd;
};

Status writeAll(int fd, std::span<const uint8_t> bytes, const std::filesystem::path& path) {
    size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return ioError("write " + std::to_string(bytes.size()) + " bytes to", path, errno);
        }
        written += static_cast<size_t>(n);
    }
    return {};
}

Status writeTemporary(const std::filesystem::path& tmp, std::span<const uint8_t> bytes,
                      bool privateFile) {
    FileDescriptor fd(
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, privateFile ? 0600 : 0644));
    if (fd.get() < 0)
        return ioError("create", tmp, errno);
    // O_CREAT leaves the mode of an existing file alone.
    if (privateFile && ::fchmod(fd.get(), 0600) != 0)
        return ioError("restrict the mode of", tmp, errno);
    if (Status s = writeAll(fd.get(), bytes, tmp); !s)
        return s;
    if (::fsync(fd.get()) != 0)
        return ioError("flush (fsync)", tmp, errno);
    if (fd.close() != 0)
        return ioError("close", tmp, errno);
    return {};
}

Status writeAtomically(const std::filesystem::path& path, std::span<const uint8_t> bytes,
                       bool privateFile) {
    std::filesystem::path tmp = path;
    tmp += ".tmp";
    if (Status s = writeTemporary(tmp, bytes, privateFile); !s) {
        ::unlink(tmp.c_str());
        return s;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int error = errno;
        ::unlink(tmp.c_str());
        return ioError("rename '" + tmp.string() + "' to", path, error);
    }
    // The rename is durable once the directory entry is.
    std::filesystem::path directory = path.parent_path();
    if (directory.empty())
        directory = ".";
    FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0)
        return ioError("open directory", directory, errno);
    // Some file systems cannot sync a directory (EINVAL); the rename is as durable as they allow.
    if (::fsync(dir.get()) != 0 && errno != EINVAL) {
        return ioError("flush (fsync) directory", directory, errno);
    }
    return {};
}

}  // namespace

Status writeFileAtomically(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
    return writeAtomically(path, bytes, false);
}

Status writePrivateFileAtomically(const std::filesystem::path& path,
                                  std::span<const uint8_t> bytes) {
    return writeAtomically(path, bytes, true);
}

Expected<std::vector<uint8_t>> readFile(const std::filesystem::path& path) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        return ioError("open", path, errno);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0)
        return ioError("stat", path, errno);
    if (S_ISDIR(info.st_mode))
        return ioError("read", path, EISDIR);
    std::vector<uint8_t> bytes;
    bytes.reserve(S_ISREG(info.st_mode) ? static_cast<size_t>(info.st_size) : 0);
    uint8_t buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return ioError("read", path, errno);
        }
        if (n == 0)
            break;
        bytes.insert(bytes.end(), buffer, buffer + n);
    }
    return bytes;
}

}  // namespace tandem
