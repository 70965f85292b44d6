// The files of the engine's data directory: paths, and reading and writing their formats.
#include "unit_files.hpp"

#include "file_io.hpp"
#include "held_work.hpp"
#include "result_format.hpp"

#include <fstream>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string wuKey(int64_t id) {
    return std::to_string(id);
}

Status writeTextAtomically(const fs::path& path, const std::string& text) {
    return writeFileAtomically(
        path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Expected<std::string> readText(const fs::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    return std::string(bytes->begin(), bytes->end());
}

Expected<json> readJson(const fs::path& path) {
    auto text = readText(path);
    if (!text)
        return text.error();
    auto j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(path.string() + " is not a JSON object");
    return j;
}

bool fileHasDigest(const fs::path& path, const net::Sha256Digest& digest) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        return false;
    auto hashed = net::sha256File(path);
    return hashed && hashed->digest == digest;
}

Status writeProgress(const fs::path& path, const UnitProgress& p) {
    json j = {{"step", p.step},
              {"sampler", std::to_string(p.samplerState)},
              {"loss_sum", p.lossSum},
              {"tokens", p.tokens},
              {"compute_seconds", p.computeSeconds},
              {"checkpoint", p.checkpointFile}};
    if (p.lossFirst)
        j["loss_first"] = *p.lossFirst;
    if (p.lossLast)
        j["loss_last"] = *p.lossLast;
    return writeTextAtomically(path, j.dump());
}

Expected<UnitProgress> readProgress(const fs::path& path) {
    auto j = readJson(path);
    if (!j)
        return j.error();
    UnitProgress p;
    try {
        p.step = j->at("step").get<int64_t>();
        p.samplerState = std::stoull(j->at("sampler").get<std::string>());
        if (j->contains("loss_first"))
            p.lossFirst = (*j)["loss_first"].get<float>();
        if (j->contains("loss_last"))
            p.lossLast = (*j)["loss_last"].get<float>();
        p.lossSum = j->at("loss_sum").get<double>();
        p.tokens = j->at("tokens").get<int64_t>();
        p.computeSeconds = j->at("compute_seconds").get<double>();
        p.checkpointFile = j->at("checkpoint").get<std::string>();
    } catch (const std::exception& e) {
        return makeError(path.string() + ": " + e.what());
    }
    return p;
}

CurrentWorkUnit currentInfo(const ActiveUnit& unit) {
    CurrentWorkUnit c;
    const auto& m = unit.manifest;
    c.id = wuKey(m.workUnitId);
    c.runId = m.runId;
    c.baseVersion = m.baseVersion;
    c.model = m.model.describe();
    c.step = unit.step;
    c.innerSteps = m.innerSteps;
    c.tokens = unit.tokens;
    c.lossFirst = unit.lossFirst;
    c.lossLast = unit.lossLast;
    return c;
}

Status writeResultInfo(const fs::path& path, const ResultInfo& info) {
    json j = {{"work_unit_id", info.workUnitId},
              {"upload_url", info.uploadUrl},
              {"run_id", info.runId},
              {"base_version", info.baseVersion}};
    if (!info.shards.empty()) {
        json shards = json::array();
        for (const auto& s : info.shards)
            shards.push_back(
                {{"begin", s.range.begin}, {"end", s.range.end}, {"upload_url", s.uploadUrl}});
        j["shards"] = shards;
    }
    return writeTextAtomically(path, j.dump());
}

Expected<ResultInfo> readResultInfo(const fs::path& path) {
    auto j = readJson(path);
    if (!j)
        return j.error();
    ResultInfo info;
    try {
        info.workUnitId = j->at("work_unit_id").get<int64_t>();
        info.uploadUrl = j->at("upload_url").get<std::string>();
        // Not needed to upload: read when present.
        if (auto it = j->find("run_id"); it != j->end() && it->is_number_integer())
            info.runId = it->get<int64_t>();
        if (auto it = j->find("base_version"); it != j->end() && it->is_number_integer())
            info.baseVersion = it->get<int64_t>();
        if (auto it = j->find("shards"); it != j->end())
            for (const json& e : it->get_ref<const json::array_t&>())
                info.shards.push_back({{e.at("begin").get<int64_t>(), e.at("end").get<int64_t>()},
                                       e.at("upload_url").get<std::string>()});
    } catch (const std::exception& e) {
        return makeError(path.string() + ": " + e.what());
    }
    return info;
}

namespace {

// The pieces of a result of a sharded run: `head` is results/<id>.result (header and table).
Expected<PendingResult> loadPieces(const DataDir& files, const ResultInfo& info, PendingResult p,
                                   const std::vector<uint8_t>& head, const net::SigningKey& key) {
    auto header = net::parseResultHeader(head);
    if (!header)
        return makeError(p.file.string() + ": " + header.error().message);
    const size_t tableBytes = info.shards.size() * net::kPieceEntryBytes;
    if (header->formatVersion != net::kResultFormatPieces ||
        head.size() != net::kResultHeaderBytes + tableBytes)
        return makeError(p.file.string() + " is damaged: expected a version 2 header and a piece " +
                         "table of " + std::to_string(info.shards.size()) + " pieces");
    const auto table = std::span<const uint8_t>(head).subspan(net::kResultHeaderBytes);
    auto entries = net::parsePieceTable(table, header->parameterCount);
    if (!entries)
        return makeError(p.file.string() + ": " + entries.error().message);
    if (net::sha256(table) != header->payloadSha256)
        return makeError(p.file.string() + " is damaged (piece table digest)");
    for (size_t k = 0; k < entries->size(); ++k) {
        const net::PieceEntry& e = (*entries)[k];
        if (e.range != info.shards[k].range)
            return makeError(p.file.string() + ": piece " + std::to_string(k) +
                             " does not match the shards of " + p.infoFile.string());
        PendingPiece piece;
        piece.shard = static_cast<int>(k);
        piece.uploadUrl = info.shards[k].uploadUrl;
        piece.file = files.pieceFile(p.workUnitId, piece.shard);
        auto body = readFile(piece.file);
        if (!body)
            return body.error();
        const int64_t payload = net::piecePayloadBytes(header->encoding, e.range);
        if (static_cast<int64_t>(body->size()) != static_cast<int64_t>(head.size()) + payload ||
            !std::equal(head.begin(), head.end(), body->begin()) ||
            net::sha256(std::span<const uint8_t>(*body).subspan(head.size())) != e.sha256)
            return makeError(piece.file.string() + " is damaged (size, header or payload digest)");
        piece.bytes = static_cast<int64_t>(body->size());
        p.bytes += piece.bytes;
        p.pieces.push_back(std::move(piece));
    }
    p.digest = net::resultDigest(*header);
    p.steps = header->steps;
    p.lossLast = header->lossLast;
    p.signature = key.sign(p.digest);
    return p;
}

}  // namespace

Expected<PendingResult> loadPendingResult(const DataDir& files, const fs::path& infoFile,
                                          const net::SigningKey& key) {
    auto info = readResultInfo(infoFile);
    if (!info)
        return info.error();
    PendingResult p;
    p.workUnitId = info->workUnitId;
    p.uploadUrl = info->uploadUrl;
    p.infoFile = infoFile;
    p.file = files.resultFile(p.workUnitId);
    auto bytes = readFile(p.file);
    if (!bytes)
        return bytes.error();
    if (!info->shards.empty())
        return loadPieces(files, *info, std::move(p), *bytes, key);
    auto header = net::parseResultHeader(*bytes);
    if (!header)
        return makeError(p.file.string() + ": " + header.error().message);
    if (net::sha256(std::span<const uint8_t>(*bytes).subspan(net::kResultHeaderBytes)) !=
            header->payloadSha256 ||
        static_cast<int64_t>(bytes->size()) != header->totalBytes())
        return makeError(p.file.string() + " is damaged (payload digest or size)");
    p.bytes = static_cast<int64_t>(bytes->size());
    p.digest = net::resultDigest(*header);
    p.steps = header->steps;
    p.lossLast = header->lossLast;
    p.signature = key.sign(p.digest);
    return p;
}

namespace {

// pieces: the piece files of the unit that may exist.
void removeResultPair(const fs::path& infoFile, const fs::path& resultFile,
                      const std::vector<fs::path>& pieces) {
    std::error_code ec;
    fs::remove(infoFile, ec);
    if (ec)
        return;  // keep the pair whole: recovery then uploads it again or removes both
    for (const auto& piece : pieces)
        fs::remove(piece, ec);
    fs::remove(resultFile, ec);
}

}  // namespace

void removePendingResult(const PendingResult& result) {
    std::vector<fs::path> pieces;
    for (const auto& piece : result.pieces)
        pieces.push_back(piece.file);
    removeResultPair(result.infoFile, result.file, pieces);
}

void removeResultFiles(const DataDir& files, int64_t workUnitId) {
    std::vector<fs::path> pieces;
    std::error_code ec;
    for (int k = 0; k < net::kMaxShards; ++k)
        if (fs::exists(files.pieceFile(workUnitId, k), ec))
            pieces.push_back(files.pieceFile(workUnitId, k));
    removeResultPair(files.resultInfoFile(workUnitId), files.resultFile(workUnitId), pieces);
}

Expected<std::optional<std::string>> readUnitRequest(const DataDir& files) {
    const fs::path path = files.unitRequestFile();
    std::error_code ec;
    if (!fs::exists(path, ec))
        return std::optional<std::string>();
    auto j = readJson(path);
    if (!j)
        return j.error();
    auto it = j->find("request_id");
    if (it == j->end() || !it->is_string() || !net::isRequestId(it->get<std::string>()))
        return makeError(path.string() + ": field 'request_id' must be a request id (1 to " +
                         std::to_string(net::kMaxRequestIdChars) + " letters, digits, '-' or '_')");
    return std::optional<std::string>(it->get<std::string>());
}

Status writeUnitRequest(const DataDir& files, const std::string& requestId) {
    return writeTextAtomically(files.unitRequestFile(), json{{"request_id", requestId}}.dump());
}

void removeUnitRequest(const DataDir& files) {
    std::error_code ec;
    fs::remove(files.unitRequestFile(), ec);
}

Status saveMoments(const DataDir& files, const net::Manifest& m, const std::string& device,
                   const Checkpoint& checkpoint) {
    if (auto st = saveCheckpoint(files.optimizerFile(), checkpoint); !st)
        return st;
    json j = {{"run_id", m.runId}, {"device", device}, {"model", m.model.describe()}};
    return writeTextAtomically(files.optimizerInfoFile(), j.dump());
}

std::optional<OptimizerState> carriedMoments(const DataDir& files, const net::Manifest& m,
                                             const std::string& device) {
    auto j = readJson(files.optimizerInfoFile());
    if (!j)
        return std::nullopt;
    try {
        if (j->at("run_id").get<int64_t>() != m.runId ||
            j->at("device").get<std::string>() != device ||
            j->at("model").get<std::string>() != m.model.describe())
            return std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
    auto ck = loadCheckpoint(files.optimizerFile(), m.model);
    if (!ck || !ck->optimizer)
        return std::nullopt;
    return ck->optimizer;
}

}  // namespace tandem::core
