// held_weights.json: the weights kept for rebuilding the next version from deltas.
#include "held_weights.hpp"

#include <nlohmann/json.hpp>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path HeldWeights::file(const DataDir& files) const {
    return files.cacheDir() / (net::toHex(sha256) + ".weights");
}

bool HeldWeights::sameRun(const net::Manifest& m) const {
    return runId == m.runId && model == m.model.describe();
}

std::optional<HeldWeights> readHeldWeights(const DataDir& files) {
    std::error_code ec;
    if (!fs::exists(files.heldWeightsFile(), ec))
        return std::nullopt;
    auto j = readJson(files.heldWeightsFile());
    HeldWeights held;
    bool ok = j.ok();
    if (ok) {
        try {
            held.runId = j->at("run_id").get<int64_t>();
            held.version = j->at("version").get<int64_t>();
            held.model = j->at("model").get<std::string>();
            auto digest = net::fromHex(j->at("sha256").get<std::string>());
            ok = digest && digest->size() == held.sha256.size();
            if (ok)
                std::copy(digest->begin(), digest->end(), held.sha256.begin());
        } catch (const std::exception&) {
            ok = false;
        }
    }
    if (!ok) {  // damaged: forget it (the next unit downloads its whole weights)
        fs::remove(files.heldWeightsFile(), ec);
        return std::nullopt;
    }
    if (!fs::is_regular_file(held.file(files), ec))
        return std::nullopt;
    return held;
}

Status writeHeldWeights(const DataDir& files, const HeldWeights& held) {
    json j = {{"run_id", held.runId},
              {"version", held.version},
              {"model", held.model},
              {"sha256", net::toHex(held.sha256)}};
    return writeTextAtomically(files.heldWeightsFile(), j.dump());
}

void removeHeldWeights(const DataDir& files, const HeldWeights& held) {
    std::error_code ec;
    fs::remove(files.heldWeightsFile(), ec);
    fs::remove(held.file(files), ec);
}

void holdWeights(const DataDir& files, const net::Manifest& m, const fs::path& keep) {
    const auto before = readHeldWeights(files);
    if (before && before->sameRun(m) && before->version >= m.baseVersion)
        return;
    HeldWeights now{m.runId, m.baseVersion, m.model.describe(), m.weightsSha256};
    if (!writeHeldWeights(files, now))
        return;  // the old record stays true: its file is still there
    std::error_code ec;
    if (before && before->file(files) != now.file(files) && before->file(files) != keep)
        fs::remove(before->file(files), ec);
}

}  // namespace tandem::core
