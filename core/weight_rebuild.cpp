// Weights rebuilt from a chain of weight deltas.
#include "weight_rebuild.hpp"

#include "checkpoint.hpp"
#include "crypto.hpp"
#include "file_io.hpp"
#include "weight_delta_file.hpp"

namespace tandem::core {

namespace fs = std::filesystem;

std::optional<std::vector<net::WeightDeltaRef>> weightDeltaChain(const net::Manifest& m,
                                                                 int64_t heldVersion) {
    if (heldVersion < 0 || heldVersion >= m.baseVersion)
        return std::nullopt;
    std::vector<net::WeightDeltaRef> chain;
    for (int64_t v = heldVersion; v < m.baseVersion; ++v) {
        const net::WeightDeltaRef* found = nullptr;
        for (const net::WeightDeltaRef& d : m.weightDeltas)
            if (d.fromVersion == v)
                found = &d;
        if (!found)
            return std::nullopt;
        chain.push_back(*found);
    }
    return chain;
}

int64_t weightDeltaChainBytes(const std::vector<net::WeightDeltaRef>& chain) {
    int64_t bytes = 0;
    for (const net::WeightDeltaRef& d : chain)
        bytes += d.bytes;
    return bytes;
}

namespace {

// One downloaded delta, checked: its SHA-256, its format and that it is the step it is listed as.
Expected<WeightDeltaFile> readDelta(const net::WeightDeltaRef& ref, const fs::path& file) {
    const std::string name = "the delta from version " + std::to_string(ref.fromVersion);
    auto bytes = readFile(file);
    if (!bytes)
        return makeError(name + ": " + bytes.error().message);
    if (net::sha256(*bytes) != ref.sha256)
        return makeError(name + " does not match its SHA-256 in the manifest");
    auto parsed = parseWeightDelta(*bytes);
    if (!parsed)
        return makeError(name + ": " + parsed.error().message);
    if (parsed->fromVersion != ref.fromVersion || parsed->toVersion != ref.fromVersion + 1)
        return makeError(name + " is the file of version " + std::to_string(parsed->fromVersion) +
                         " to " + std::to_string(parsed->toVersion));
    return parsed;
}

}  // namespace

Expected<WeightRebuild> rebuildWeightsFromDeltas(const net::Manifest& m,
                                                 const fs::path& heldWeights, int64_t heldVersion,
                                                 const std::vector<net::WeightDeltaRef>& chain,
                                                 const fs::path& scratchDir,
                                                 const WeightDeltaDownload& download,
                                                 const fs::path& destination) {
    std::error_code ec;
    fs::create_directories(scratchDir, ec);
    WeightRebuild out;
    std::vector<WeightDeltaFile> deltas;
    for (const net::WeightDeltaRef& d : chain) {
        // Each delta is read into memory and its file removed at once, also a partial download.
        const fs::path file = scratchDir / ("delta-" + std::to_string(d.fromVersion));
        fs::remove(file, ec);
        auto got = download(d, file);
        auto delta = got ? readDelta(d, file) : Expected<WeightDeltaFile>(got.error());
        fs::remove(file, ec);
        if (!got)
            return makeError("downloading the delta from version " + std::to_string(d.fromVersion) +
                             " failed: " + got.error().message);
        if (!delta)
            return delta.error();
        out.bytesDownloaded += *got;
        deltas.push_back(std::move(*delta));
    }
    auto ck = loadCheckpoint(heldWeights);
    if (!ck)
        return makeError("the weights held of version " + std::to_string(heldVersion) + ": " +
                         ck.error().message);
    if (auto st = applyWeightDeltaChain(ck->parameters, heldVersion, deltas); !st)
        return st.error();
    const std::vector<uint8_t> rebuilt = serializeCheckpoint(*ck);
    if (net::sha256(rebuilt) != m.weightsSha256)
        return makeError("the rebuilt weights of version " + std::to_string(m.baseVersion) +
                         " do not match the manifest's SHA-256");
    if (auto st = writeFileAtomically(destination, rebuilt); !st)
        return st.error();
    out.deltas = static_cast<int>(deltas.size());
    return out;
}

}  // namespace tandem::core
