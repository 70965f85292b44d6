#include "state_dir.hpp"

#include "checkpoint.hpp"
#include "file_io.hpp"
#include "weight_delta_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tandem::coord {

namespace fs = std::filesystem;

StateDir::StateDir(fs::path root, std::shared_ptr<int> lock)
    : m_root(std::move(root)), m_lock(std::move(lock)) {}

Expected<StateDir> StateDir::open(const fs::path& root) {
    std::error_code ec;
    for (const char* sub : {"", "weights", "momentum", "residual", "deltas", "rounds", "uploads",
                            "data", "held", "blobs/sha256", "parts"}) {
        fs::create_directories(root / sub, ec);
        if (ec)
            return makeError("cannot create " + (root / sub).string() + ": " + ec.message());
    }
    const fs::path lockPath = root / "coordinator.lock";
    int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lockFd < 0)
        return makeError("cannot open " + lockPath.string() + ": " + std::strerror(errno));
    std::shared_ptr<int> lock(new int(lockFd), [](int* fd) {
        ::close(*fd);
        delete fd;
    });
    if (::flock(lockFd, LOCK_EX | LOCK_NB) != 0)
        return makeError("another tandem-coordinator is using the state directory " +
                         root.string());
    return StateDir(root, std::move(lock));
}

fs::path StateDir::weights(int64_t version) const {
    return m_root / "weights" / ("v" + std::to_string(version) + ".ckpt");
}

fs::path StateDir::momentum(int64_t version) const {
    return m_root / "momentum" / ("v" + std::to_string(version) + ".ckpt");
}

fs::path StateDir::residual(int64_t version) const {
    return m_root / "residual" / ("v" + std::to_string(version) + ".ckpt");
}

fs::path StateDir::weightDelta(int64_t version) const {
    return m_root / "deltas" / ("v" + std::to_string(version) + ".wdlt");
}

Expected<ServedFile> StateDir::publishWeightDelta(int64_t toVersion,
                                                  const QuantizedDelta& delta) const {
    const auto bytes = serializeWeightDelta(WeightDeltaFile{toVersion - 1, toVersion, delta});
    if (auto st = writeFileAtomically(weightDelta(toVersion), bytes); !st)
        return st.error();
    ServedFile f{weightDelta(toVersion), static_cast<int64_t>(bytes.size()), net::sha256(bytes)};
    if (auto st = blobs().publish(f.path, f.sha256); !st)
        return st.error();
    return f;
}

fs::path StateDir::weightsPart(int64_t version) const {
    return m_root / "parts" / ("w" + std::to_string(version) + ".part");
}

fs::path StateDir::momentumPart(int64_t version) const {
    return m_root / "parts" / ("m" + std::to_string(version) + ".part");
}

Expected<ServedFile> StateDir::publishWeights(int64_t version, const ModelConfig& model,
                                              std::span<const float> parameters) const {
    Checkpoint ck;
    ck.config = model;
    ck.parameters.assign(parameters.begin(), parameters.end());
    auto bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(weights(version), bytes); !st)
        return st.error();
    ServedFile f{weights(version), static_cast<int64_t>(bytes.size()), net::sha256(bytes)};
    if (auto st = blobs().publish(f.path, f.sha256); !st)
        return st.error();
    return f;
}

fs::path StateDir::round(int64_t number) const {
    return m_root / "rounds" / std::to_string(number);
}

fs::path StateDir::payload(int64_t roundNumber, int64_t workUnitId) const {
    return round(roundNumber) / (std::to_string(workUnitId) + ".f16");
}

Expected<ServedFile> StateDir::publish(int64_t version, const ModelConfig& model,
                                       std::span<const float> parameters,
                                       std::span<const float> velocity,
                                       std::span<const float> residual) const {
    auto f = publishWeights(version, model, parameters);
    if (!f)
        return f;
    Checkpoint ck;
    ck.config = model;
    ck.parameters.assign(velocity.begin(), velocity.end());
    auto bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(momentum(version), bytes); !st)
        return st.error();
    if (!residual.empty()) {
        ck.parameters.assign(residual.begin(), residual.end());
        if (auto st = writeFileAtomically(this->residual(version), serializeCheckpoint(ck)); !st)
            return st.error();
    }
    return f;
}

void StateDir::removeStale(int64_t version, int maxStaleness,
                           const std::set<std::string>& keepPayloads, bool startup,
                           int64_t openRound) const {
    std::error_code ec;
    if (openRound < 0)
        openRound = version;
    if (startup)
        for (auto& e : fs::directory_iterator(uploads(), ec))
            fs::remove(e.path(), ec);
    for (auto& e : fs::directory_iterator(m_root / "rounds", ec)) {
        if (e.path().filename() != std::to_string(openRound)) {
            fs::remove_all(e.path(), ec);
            continue;
        }
        for (auto& f : fs::directory_iterator(e.path(), ec))
            if (!keepPayloads.count(f.path().filename().string()))
                fs::remove(f.path(), ec);
    }
    for (const char* sub : {"weights", "momentum", "residual", "deltas"}) {
        const bool isDeltas = std::strcmp(sub, "deltas") == 0;
        const char* suffix = isDeltas ? ".wdlt" : ".ckpt";
        for (auto& e : fs::directory_iterator(m_root / sub, ec)) {
            const std::string name = e.path().filename().string();
            if (name.size() < 7 || name[0] != 'v' || !name.ends_with(suffix)) {
                if (name.ends_with(".tmp"))
                    fs::remove(e.path(), ec);
                continue;
            }
            const int64_t v = std::atoll(name.c_str() + 1);
            const bool isWeights = std::strcmp(sub, "weights") == 0;
            const int64_t oldest = isWeights  ? version - maxStaleness - 1
                                   : isDeltas ? version - kKeptWeightDeltas - maxStaleness + 1
                                              : version;
            const int64_t newest = isWeights ? std::max(version, openRound) : version;
            if (v < oldest || v > newest)
                fs::remove(e.path(), ec);
        }
    }
    for (auto& e : fs::directory_iterator(m_root / "parts", ec)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".tmp") || (name.size() > 6 && name.ends_with(".part") &&
                                       std::atoll(name.c_str() + 1) < version - maxStaleness))
            fs::remove(e.path(), ec);
    }
}

Status fsyncPath(const fs::path& path, bool directory) {
    int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return makeError("cannot open " + path.string() + " to flush it");
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0)
        return makeError("cannot flush " + path.string());
    return {};
}

}  // namespace tandem::coord
