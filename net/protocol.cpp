#include "protocol.hpp"

#include "protocol_json.hpp"

namespace tandem::net {

namespace protocol_json {

Expected<json> parseObject(std::string_view text, const char* what) {
    json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
        return makeError(std::string(what) + ": the body is not valid JSON");
    if (!j.is_object())
        return makeError(std::string(what) + ": expected a JSON object, found " + j.type_name());
    return j;
}

json modelToJson(const ModelConfig& c) {
    return json{{"layers", c.layers},
                {"heads", c.heads},
                {"channels", c.channels},
                {"max_seq_len", c.maxSeqLen},
                {"vocab_size", c.vocabSize}};
}

ModelConfig modelFromJson(Reader& r, const char* name) {
    ModelConfig c;
    const json* m = r.object(name);
    if (!m)
        return c;
    Reader mr(*m, std::string("field '") + name + "'");
    c.layers = static_cast<int>(mr.integer("layers", 1, 1024));
    c.heads = static_cast<int>(mr.integer("heads", 1, 1024));
    c.channels = static_cast<int>(mr.integer("channels", 1, 1 << 16));
    c.maxSeqLen = static_cast<int>(mr.integer("max_seq_len", 1, 1 << 20));
    c.vocabSize = static_cast<int>(mr.integer("vocab_size", 1, 1 << 20));
    if (mr.failed())
        return r.fail(mr.error().message), c;
    if (auto st = c.validate(); !st)
        r.fail(std::string("field '") + name + "': " + st.error().message);
    return c;
}

}  // namespace protocol_json

using namespace protocol_json;

namespace {

std::string b64(std::span<const uint8_t> bytes) {
    return toBase64(bytes);
}

json manifestBody(const Manifest& m) {
    json j{{"work_unit_id", m.workUnitId},
           {"run_id", m.runId},
           {"base_version", m.baseVersion},
           {"model", modelToJson(m.model)},
           {"weights",
            {{"url", m.weightsUrl}, {"sha256", toHex(m.weightsSha256)}, {"bytes", m.weightsBytes}}},
           {"data",
            {{"url", m.dataUrl},
             {"shard", m.dataShard},
             {"offset", m.dataOffset},
             {"length", m.dataLength},
             {"token_bytes", m.dataTokenBytes},
             {"header_bytes", m.dataHeaderBytes},
             {"sha256", toHex(m.dataSha256)}}},
           {"inner_steps", m.innerSteps},
           {"batch", m.batch},
           {"seq_len", m.seqLen},
           {"lr",
            {{"peak", m.lr.peakLr},
             {"min", m.lr.minLr},
             {"warmup_steps", m.lr.warmupSteps},
             {"total_steps", m.lr.totalSteps},
             {"start_step", m.lrStartStep}}},
           {"seed", m.seed},
           {"deadline_unix", m.deadlineUnix},
           {"heartbeat_seconds", m.heartbeatSeconds},
           {"upload_url", m.uploadUrl},
           {"max_upload_bytes", m.maxUploadBytes},
           {"protocol", m.protocol}};
    if (m.protocol >= 3)
        j["start_blend"] = m.startBlend;
    // Version 4: absent when there are none (the worker then downloads from "url").
    if (m.protocol >= 4 && !m.weightsUrls.empty())
        j["weights"]["urls"] = m.weightsUrls;
    if (m.protocol >= 4 && !m.dataUrls.empty())
        j["data"]["urls"] = m.dataUrls;
    // Version 5: the result's encoding (the int8 block size stated, though the format fixes it,
    // so that a worker meets a different one with a clear refusal).
    if (m.protocol >= kResultEncodingProtocol) {
        j["result_encoding"] = encodingName(m.resultEncoding);
        if (m.resultEncoding == kEncodingInt8)
            j["result_block"] = kInt8ResultBlock;
    }
    // Version 6: absent for a run of one shard.
    if (m.protocol >= kShardsProtocol && !m.shards.empty()) {
        json shards = json::array();
        for (const ShardUpload& u : m.shards)
            shards.push_back(
                {{"begin", u.range.begin}, {"end", u.range.end}, {"upload_url", u.uploadUrl}});
        j["shards"] = shards;
    }
    // Version 5: absent when the run has no weight deltas.
    if (m.protocol >= 5 && !m.weightDeltas.empty()) {
        json deltas = json::array();
        for (const WeightDeltaRef& d : m.weightDeltas)
            deltas.push_back({{"from_version", d.fromVersion},
                              {"sha256", toHex(d.sha256)},
                              {"bytes", d.bytes},
                              {"urls", d.urls}});
        j["weights"]["deltas"] = deltas;
    }
    return j;
}

// A version 4 "urls" list: 1 to kMaxBlobUrls paths on the coordinator or https:// URLs.
std::vector<std::string> blobUrls(Reader& r) {
    std::vector<std::string> urls;
    const json* a = r.array("urls");
    if (!a)
        return urls;
    if (a->empty() || a->size() > kMaxBlobUrls) {
        r.fail("field 'urls' must list 1 to " + std::to_string(kMaxBlobUrls) + " URLs, found " +
               std::to_string(a->size()));
        return urls;
    }
    for (const json& u : *a) {
        const bool ok =
            u.is_string() && !u.get<std::string>().empty() && u.get<std::string>().size() <= 2000 &&
            (u.get<std::string>().front() == '/' || u.get<std::string>().rfind("https://", 0) == 0);
        if (!ok) {
            r.fail(
                "field 'urls' must hold paths ('/...') or https:// URLs of at most 2000 "
                "characters, found " +
                u.dump().substr(0, 120));
            return urls;
        }
        urls.push_back(u.get<std::string>());
    }
    return urls;
}

// A version 5 "deltas" list: 1 to kMaxWeightDeltas consecutive deltas ending at baseVersion.
std::vector<WeightDeltaRef> weightDeltaRefs(Reader& r, int64_t baseVersion) {
    std::vector<WeightDeltaRef> out;
    const json* a = r.array("deltas");
    if (!a)
        return out;
    if (a->empty() || a->size() > kMaxWeightDeltas) {
        r.fail("field 'deltas' must list 1 to " + std::to_string(kMaxWeightDeltas) +
               " deltas, found " + std::to_string(a->size()));
        return out;
    }
    for (const json& e : *a) {
        if (!e.is_object()) {
            r.fail("field 'deltas' must hold objects, found " + e.dump().substr(0, 120));
            return out;
        }
        Reader dr(e, "manifest weight delta");
        WeightDeltaRef d;
        d.fromVersion = dr.integer("from_version", 0, kMaxI64);
        d.sha256 = dr.digest("sha256");
        d.bytes = dr.integer("bytes", 1, kMaxI64);
        d.urls = blobUrls(dr);
        if (!dr.failed() && d.urls.empty())
            dr.fail("field 'urls' is missing");
        if (dr.failed()) {
            r.fail(dr.error().message);
            return out;
        }
        out.push_back(std::move(d));
    }
    for (size_t i = 0; i < out.size(); ++i) {
        const int64_t expected = baseVersion - static_cast<int64_t>(out.size() - i);
        if (out[i].fromVersion != expected) {
            r.fail("field 'deltas' must be the consecutive deltas up to base version " +
                   std::to_string(baseVersion) + ", oldest first; found one from version " +
                   std::to_string(out[i].fromVersion) + " where " + std::to_string(expected) +
                   " was expected");
            return {};
        }
    }
    return out;
}

// A version 6 "shards" list: 2 to kMaxShards pieces of the model's P, exactly pieceRanges(P, K),
// each with an absolute https:// upload URL.
std::vector<ShardUpload> shardUploads(Reader& r, const ModelConfig& model) {
    std::vector<ShardUpload> out;
    const json* a = r.array("shards");
    if (!a)
        return out;
    if (a->size() < 2 || a->size() > static_cast<size_t>(kMaxShards)) {
        r.fail("field 'shards' must list 2 to " + std::to_string(kMaxShards) + " shards, found " +
               std::to_string(a->size()));
        return out;
    }
    for (const json& e : *a) {
        if (!e.is_object()) {
            r.fail("field 'shards' must hold objects, found " + e.dump().substr(0, 120));
            return {};
        }
        Reader sr(e, "manifest shard " + std::to_string(out.size()));
        ShardUpload u;
        u.range.begin = sr.integer("begin", 0, kMaxI64);
        u.range.end = sr.integer("end", 1, kMaxI64);
        u.uploadUrl = sr.string("upload_url", 1, 2000);
        if (!sr.failed() && (u.uploadUrl.rfind("https://", 0) != 0 || u.uploadUrl.size() <= 8))
            sr.fail("manifest shard " + std::to_string(out.size()) +
                    ": field 'upload_url' must be an absolute https:// URL, found '" +
                    u.uploadUrl.substr(0, 120) + "'");
        if (sr.failed()) {
            r.fail(sr.error().message);
            return {};
        }
        out.push_back(std::move(u));
    }
    const int64_t parameters = model.parameterCount();
    const auto expected = pieceRanges(parameters, static_cast<int>(out.size()));
    for (size_t k = 0; k < out.size(); ++k) {
        if (k >= expected.size() || out[k].range != expected[k]) {
            r.fail("field 'shards': shard " + std::to_string(k) + " has parameters [" +
                   std::to_string(out[k].range.begin) + ", " + std::to_string(out[k].range.end) +
                   "), expected " +
                   (k < expected.size() ? "[" + std::to_string(expected[k].begin) + ", " +
                                              std::to_string(expected[k].end) + ")"
                                        : std::string("no such shard")) +
                   " (" + std::to_string(out.size()) + " shards of " + std::to_string(parameters) +
                   " parameters)");
            return {};
        }
    }
    return out;
}

json receiptBody(const Receipt& r) {
    json j{{"work_unit_id", r.workUnitId},
           {"client_id", r.clientId},
           {"round", r.round},
           {"weight", r.weight},
           {"time_unix", r.timeUnix},
           {"result_sha256", toHex(r.resultDigest)}};
    if (r.credit)
        j["credit"] = *r.credit;
    if (r.shard)
        j["shard"] = *r.shard;
    return j;
}

std::span<const uint8_t> bytesOf(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

// ---- ApiError

std::string ApiError::toJson() const {
    // Never throws: a message that still holds invalid UTF-8 is sent with U+FFFD in its place.
    return json{{"error", {{"code", code}, {"message", message}}}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

Expected<ApiError> ApiError::fromJson(std::string_view text) {
    auto j = parseObject(text, "error body");
    if (!j)
        return j.error();
    Reader r(*j, "error body");
    const json* e = r.object("error");
    if (r.failed())
        return r.error();
    Reader er(*e, "error body 'error'");
    ApiError out;
    out.code = er.string("code", 1, 100);
    out.message = er.string("message", 0, 10000);
    if (er.failed())
        return er.error();
    return out;
}

// ---- register

std::string RegisterRequest::toJson() const {
    json j{{"name", name}, {"public_key", b64(publicKey)}, {"hardware", hardware}};
    if (!displayName.empty())
        j["display_name"] = displayName;
    if (!team.empty())
        j["team"] = team;
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<RegisterRequest> RegisterRequest::fromJson(std::string_view text) {
    auto j = parseObject(text, "register request");
    if (!j)
        return j.error();
    Reader r(*j, "register request");
    RegisterRequest out;
    out.name = r.string("name", 1, 100);
    out.publicKey = r.publicKey("public_key");
    out.hardware = r.string("hardware", 0, 2000);
    // display_name and team: optional strings (or null), checked by the coordinator.
    for (auto [field, dest] :
         {std::pair{"display_name", &out.displayName}, std::pair{"team", &out.team}}) {
        auto it = j->find(field);
        if (it != j->end() && !it->is_null())
            *dest = r.string(field, 0, 1000);
    }
    if (r.failed())
        return r.error();
    return out;
}

std::string RegisterResponse::toJson() const {
    return json{{"client_id", clientId},
                {"token", token},
                {"coordinator_public_key", b64(coordinatorPublicKey)}}
        .dump();
}

Expected<RegisterResponse> RegisterResponse::fromJson(std::string_view text) {
    auto j = parseObject(text, "register response");
    if (!j)
        return j.error();
    Reader r(*j, "register response");
    RegisterResponse out;
    out.clientId = r.integer("client_id", 1, kMaxI64);
    out.token = r.string("token", 16, 200);
    out.coordinatorPublicKey = r.publicKey("coordinator_public_key");
    if (r.failed())
        return r.error();
    return out;
}

// ---- work request

std::string WorkRequest::toJson() const {
    return json{{"device", device},
                {"memory_bytes", memoryBytes},
                {"tokens_per_second", tokensPerSecond},
                {"uplink_bytes_per_second", uplinkBytesPerSecond},
                {"free_disk_bytes", freeDiskBytes},
                {"protocol", protocol}}
        .dump();
}

Expected<WorkRequest> WorkRequest::fromJson(std::string_view text) {
    auto j = parseObject(text, "work request");
    if (!j)
        return j.error();
    Reader r(*j, "work request");
    WorkRequest out;
    out.device = r.string("device", 1, 200);
    out.memoryBytes = r.integer("memory_bytes", 0, kMaxI64);
    out.tokensPerSecond = r.number("tokens_per_second", 0, 1e12);
    if (j->contains("uplink_bytes_per_second"))
        out.uplinkBytesPerSecond = r.number("uplink_bytes_per_second", 0, 1e12);
    out.freeDiskBytes = r.integer("free_disk_bytes", 0, kMaxI64);
    out.protocol = j->contains("protocol") ? static_cast<int>(r.integer("protocol", 1, 1000))
                                           : kOldestProtocolVersion;
    if (r.failed())
        return r.error();
    return out;
}

// ---- manifest

std::string Manifest::signingText() const {
    return manifestBody(*this).dump();
}

void Manifest::sign(const SigningKey& key) {
    std::string text = signingText();
    signature = key.sign(bytesOf(text));
}

bool Manifest::verify(const PublicKey& coordinatorKey) const {
    std::string text = signingText();
    return verifySignature(coordinatorKey, bytesOf(text), signature);
}

std::string Manifest::toJson() const {
    json j = manifestBody(*this);
    j["signature"] = b64(signature);
    return j.dump();
}

Expected<Manifest> Manifest::fromJson(std::string_view text) {
    auto j = parseObject(text, "manifest");
    if (!j)
        return j.error();
    Reader r(*j, "manifest");
    Manifest m;
    int64_t protocol = r.integer("protocol", 1, 1000);
    if (!r.failed() && (protocol < kOldestProtocolVersion || protocol > kProtocolVersion))
        r.fail("protocol version " + std::to_string(protocol) + " is not supported, expected " +
               std::to_string(kOldestProtocolVersion) + " to " + std::to_string(kProtocolVersion) +
               " (the coordinator and this worker run different Tandem versions; update the "
               "older one)");
    m.protocol = static_cast<int>(protocol);
    m.workUnitId = r.integer("work_unit_id", 1, kMaxI64);
    m.runId = r.integer("run_id", 1, kMaxI64);
    m.baseVersion = r.integer("base_version", 0, kMaxI64);
    m.model = modelFromJson(r, "model");
    if (const json* w = r.object("weights")) {
        Reader wr(*w, "manifest 'weights'");
        m.weightsUrl = wr.string("url", 1, 2000);
        m.weightsSha256 = wr.digest("sha256");
        m.weightsBytes = wr.integer("bytes", 1, kMaxI64);
        if (protocol >= 4 && w->contains("urls"))
            m.weightsUrls = blobUrls(wr);
        if (protocol >= 5 && w->contains("deltas"))
            m.weightDeltas = weightDeltaRefs(wr, m.baseVersion);
        if (wr.failed())
            r.fail(wr.error().message);
    }
    if (const json* d = r.object("data")) {
        Reader dr(*d, "manifest 'data'");
        m.dataUrl = dr.string("url", 1, 2000);
        m.dataShard = dr.integer("shard", 0, kMaxI64);
        m.dataOffset = dr.integer("offset", 0, int64_t{1} << 60);
        m.dataLength = dr.integer("length", 1, int64_t{1} << 60);
        m.dataTokenBytes = static_cast<int>(dr.integer("token_bytes", 1, 2));
        m.dataHeaderBytes = dr.integer("header_bytes", 0, int64_t{1} << 30);
        m.dataSha256 = dr.digest("sha256");
        if (protocol >= 4 && d->contains("urls"))
            m.dataUrls = blobUrls(dr);
        if (dr.failed())
            r.fail(dr.error().message);
    }
    m.innerSteps = static_cast<int>(r.integer("inner_steps", 1, 1000000));
    m.batch = static_cast<int>(r.integer("batch", 1, 65536));
    m.seqLen = static_cast<int>(r.integer("seq_len", 1, 1 << 20));
    if (const json* l = r.object("lr")) {
        Reader lr(*l, "manifest 'lr'");
        m.lr.peakLr = static_cast<float>(lr.number("peak", 0, 10));
        m.lr.minLr = static_cast<float>(lr.number("min", 0, 10));
        m.lr.warmupSteps = lr.integer("warmup_steps", 0, kMaxI64);
        m.lr.totalSteps = lr.integer("total_steps", 1, kMaxI64);
        m.lrStartStep = l->contains("start_step") ? lr.integer("start_step", 0, kMaxI64) : 0;
        if (lr.failed())
            r.fail(lr.error().message);
    }
    m.seed = static_cast<uint64_t>(r.integer("seed", 0, kMaxSeed));
    m.deadlineUnix = r.integer("deadline_unix", 0, kMaxI64);
    m.heartbeatSeconds = static_cast<int>(r.integer("heartbeat_seconds", 1, 86400));
    m.uploadUrl = r.string("upload_url", 1, 2000);
    m.maxUploadBytes = r.integer("max_upload_bytes", 1, kMaxI64);
    if (m.protocol >= 3)
        m.startBlend = static_cast<float>(r.number("start_blend", 0, 1));
    if (m.protocol >= kResultEncodingProtocol) {
        const std::string encoding = r.string("result_encoding", 1, 20);
        const auto known = encodingFromName(encoding);
        if (!r.failed() && !known)
            r.fail("manifest: result_encoding '" + encoding +
                   "' is not supported, expected fp16 or int8");
        m.resultEncoding = known.value_or(kEncodingFp16);
        if (known == kEncodingInt8) {
            const int64_t block = r.integer("result_block", 1, int64_t{1} << 30);
            if (!r.failed() && block != kInt8ResultBlock)
                r.fail("manifest: result_block " + std::to_string(block) +
                       " is not supported, expected " + std::to_string(kInt8ResultBlock));
        }
    }
    if (m.protocol >= kShardsProtocol && !r.failed() && j->contains("shards"))
        m.shards = shardUploads(r, m.model);
    m.signature = r.signature("signature");
    if (r.failed())
        return r.error();
    if (m.seqLen > m.model.maxSeqLen)
        return makeError("manifest: seq_len " + std::to_string(m.seqLen) +
                         " exceeds the model's max_seq_len " + std::to_string(m.model.maxSeqLen));
    return m;
}

// ---- progress

std::string ProgressReport::toJson() const {
    return json{{"step", step}, {"loss", loss}, {"tokens_per_second", tokensPerSecond}}.dump();
}

Expected<ProgressReport> ProgressReport::fromJson(std::string_view text) {
    auto j = parseObject(text, "progress report");
    if (!j)
        return j.error();
    Reader r(*j, "progress report");
    ProgressReport p;
    p.step = r.integer("step", 0, kMaxI64);
    p.loss = static_cast<float>(r.number("loss", 0, 1e6));
    p.tokensPerSecond = r.number("tokens_per_second", 0, 1e12);
    if (r.failed())
        return r.error();
    return p;
}

std::string ProgressReply::toJson() const {
    json j{{"action", action}};
    if (!reason.empty())
        j["reason"] = reason;
    if (minSteps > 0)
        j["min_steps"] = minSteps;
    return j.dump();
}

Expected<ProgressReply> ProgressReply::fromJson(std::string_view text) {
    auto j = parseObject(text, "progress reply");
    if (!j)
        return j.error();
    Reader r(*j, "progress reply");
    ProgressReply p;
    p.action = r.string("action", 1, 20);
    if (!r.failed() && p.action != "continue" && p.action != "abandon")
        r.fail("field 'action' must be \"continue\" or \"abandon\", found \"" + p.action + "\"");
    if (j->contains("reason"))
        p.reason = r.string("reason", 0, 1000);
    if (j->contains("min_steps"))  // absent from older coordinators
        p.minSteps = static_cast<int>(r.integer("min_steps", 0, 1 << 30));
    if (r.failed())
        return r.error();
    return p;
}

// ---- receipt

std::string Receipt::signingText() const {
    return receiptBody(*this).dump();
}

void Receipt::sign(const SigningKey& key) {
    std::string text = signingText();
    signature = key.sign(bytesOf(text));
}

bool Receipt::verify(const PublicKey& coordinatorKey) const {
    std::string text = signingText();
    return verifySignature(coordinatorKey, bytesOf(text), signature);
}

std::string Receipt::toJson() const {
    json j = receiptBody(*this);
    j["signature"] = b64(signature);
    return j.dump();
}

Expected<Receipt> Receipt::fromJson(std::string_view text) {
    auto j = parseObject(text, "receipt");
    if (!j)
        return j.error();
    Reader r(*j, "receipt");
    Receipt out;
    out.workUnitId = r.integer("work_unit_id", 1, kMaxI64);
    out.clientId = r.integer("client_id", 1, kMaxI64);
    out.round = r.integer("round", 0, kMaxI64);
    out.weight = r.number("weight", 0, 1e18);
    if (j->contains("credit"))
        out.credit = r.integer("credit", 0, kMaxI64);
    if (j->contains("shard"))
        out.shard = static_cast<int>(r.integer("shard", 0, kMaxShards - 1));
    out.timeUnix = r.integer("time_unix", 0, kMaxI64);
    out.resultDigest = r.digest("result_sha256");
    out.signature = r.signature("signature");
    if (r.failed())
        return r.error();
    return out;
}

// ---- status

}  // namespace tandem::net
