// The state directory: published weights and momentum, and the removal of stale files.
#include "coordinator_impl.hpp"

#include "checkpoint.hpp"
#include "file_io.hpp"

namespace tandem::coord {

Expected<ServedFile> Coordinator::Impl::publishWeights(int64_t v, std::span<const float> weights,
                                                       std::span<const float> momentum) {
    Checkpoint ck;
    ck.config = model.layers > 0 ? model : *ModelConfig::parse(cfg.model);
    ck.parameters.assign(weights.begin(), weights.end());
    auto bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(weightsPath(v), bytes); !st)
        return st.error();
    ServedFile f{weightsPath(v), static_cast<int64_t>(bytes.size()), net::sha256(bytes)};
    ck.parameters.assign(momentum.begin(), momentum.end());
    bytes = serializeCheckpoint(ck);
    if (auto st = writeFileAtomically(momentumPath(v), bytes); !st)
        return st.error();
    return f;
}

void Coordinator::Impl::cleanStaleFiles(bool startup) {
    std::error_code ec;
    // Staging files of uploads cut short by a stop; while running they belong to live sessions.
    if (startup)
        for (auto& e : fs::directory_iterator(dir("uploads"), ec))
            fs::remove(e.path(), ec);
    std::set<std::string> keep;
    auto q = db.prepare("SELECT work_unit_id FROM results WHERE round = ?");
    if (q) {
        q->bind(1, version);
        while (q->step())
            keep.insert(std::to_string(q->integer(0)) + ".f16");
    }
    for (auto& e : fs::directory_iterator(dir("rounds"), ec)) {
        if (e.path().filename() != std::to_string(version)) {
            fs::remove_all(e.path(), ec);
            continue;
        }
        for (auto& f : fs::directory_iterator(e.path(), ec))
            if (!keep.count(f.path().filename().string()))
                fs::remove(f.path(), ec);
    }
    for (const char* sub : {"weights", "momentum"}) {
        for (auto& e : fs::directory_iterator(dir(sub), ec)) {
            const std::string name = e.path().filename().string();
            if (name.size() < 7 || name[0] != 'v' || !name.ends_with(".ckpt")) {
                if (name.ends_with(".tmp"))
                    fs::remove(e.path(), ec);
                continue;
            }
            const int64_t v = std::atoll(name.c_str() + 1);
            const bool isWeights = std::strcmp(sub, "weights") == 0;
            const int64_t oldest = isWeights ? version - cfg.maxStaleness - 1 : version;
            if (v < oldest || v > version)
                fs::remove(e.path(), ec);
        }
    }
}

}  // namespace tandem::coord
