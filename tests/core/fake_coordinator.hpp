// An in-process CoordinatorApi for engine tests: signs manifests and receipts with its own key,
// serves a small model's weights and a text range, accepts results idempotently (the same result
// again returns the same receipt), keeps the units it counts as the client's (request ids, list,
// release, the 409 limit), and lets a test inject failures, block uploads and watch calls. With
// publishVersions() it also serves later versions of a run's weights and their weight deltas
// (protocol 5), made with the coordinator's own step (kernels/weight_delta.hpp). With shards > 1
// it is a sharded run (protocol 6): manifests list the shards' piece URLs and results arrive in
// pieces (uploadPiece), each checked as a shard checks it and answered with a receipt naming it.
#pragma once

#include "checkpoint.hpp"
#include "clock.hpp"
#include "coordinator_api.hpp"
#include "file_io.hpp"
#include "model.hpp"
#include "result_format.hpp"
#include "weight_delta_file.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tandem::testing {

class FakeCoordinator final : public core::CoordinatorApi {
  public:
    explicit FakeCoordinator(std::string model = "L=1,NH=2,C=16,T=16", int innerSteps = 6)
        : m_key(net::SigningKey::generate().value()), m_innerSteps(innerSteps) {
        m_model = ModelConfig::parse(model).value();
        Checkpoint ck;
        ck.config = m_model;
        ck.parameters.resize(static_cast<size_t>(m_model.parameterCount()));
        initParameters(ParameterLayout(m_model), ck.parameters, 7);
        m_weights = serializeCheckpoint(ck);
        Checkpoint bad = ck;
        bad.parameters[3] = std::numeric_limits<float>::quiet_NaN();
        m_nanWeights = serializeCheckpoint(bad);
        const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat.\n", "dogs ", "run "};
        uint64_t x = 12345;
        while (m_text.size() < 6000) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const char* w = words[(x >> 33) % 8];
            m_text.insert(m_text.end(), w, w + std::strlen(w));
        }
    }

    // --- controls (any thread) ---
    std::mutex mu;
    std::condition_variable cv;
    std::deque<core::ApiFailure> workFailures;  // the next requestWork calls fail with these
    std::deque<core::ApiFailure> uploadFailures;
    int maxWorkUnits = 1000;  // then 204 "no work"
    int64_t noWorkRetryAfterMs = 60000;
    bool blockUploads = false;  // uploads wait until cleared
    bool abandonOnProgress = false;
    int minSteps = 0;  // the partial-result minimum a heartbeat's answer states (0: none)
    bool abandonFinishedUnits = false;  // "abandon" to the heartbeat sent before an upload
    bool badReceiptKey = false;
    double staleWeight = 1.0;    // the receipt's weight: tokens x this (0.5: one version late)
    bool receiptCredit = true;   // false: a receipt without credit, as older coordinators sent
    std::set<int64_t> nanUnits;  // work units served NaN weights
    float startBlend = 0;        // every manifest's start_blend (protocol 3)
    std::function<void(int64_t)> onUploadAccepted;  // called after accepting, before answering
    // Called once a unit is assigned (committed here), before the answer returns: a crash there
    // is a worker killed between the coordinator's commit and its own record of the unit.
    std::function<void(int64_t)> onAssigned;
    // > 0: a request while the client holds this many units is refused (409
    // too_many_work_units, Retry-After heldRetryAfterMs), as the real coordinator does.
    int maxHeldUnits = 0;
    int64_t heldRetryAfterMs = 180000;
    // The units counted as the client's (assigned, not accepted, released or abandoned), with
    // the request id each was assigned for: what GET /v1/work lists.
    std::map<int64_t, std::string> held;
    std::deque<core::ApiFailure> listFailures;  // the next listWork calls fail with these

    bool blockProgress = false;  // heartbeats wait until cleared
    // The coordinator's heartbeat timeout, as its tick applies it: set heartbeatClock, then
    // expireSilent() abandons every held unit silent for longer than the timeout, except one
    // whose upload is arriving (docs/protocol.md).
    const core::Clock* heartbeatClock = nullptr;
    std::map<int64_t, int64_t> lastHeartbeatMs;     // by heartbeatClock: assignment, progress
    std::map<int64_t, std::string> abandonedUnits;  // work unit -> reason
    std::set<int64_t> uploading;
    int expireSilent(int64_t timeoutMs) {
        std::lock_guard lock(mu);
        const int64_t now = heartbeatClock->nowMs();
        int n = 0;
        for (auto it = held.begin(); it != held.end();) {
            const int64_t id = it->first;
            if (!uploading.count(id) && lastHeartbeatMs[id] < now - timeoutMs) {
                abandonedUnits[id] =
                    "no heartbeat for " + std::to_string((now - lastHeartbeatMs[id]) / 1000) + " s";
                it = held.erase(it);
                ++n;
            } else {
                ++it;
            }
        }
        return n;
    }

    // Weight deltas: the base version and run of a unit's manifest (default 0 and run 1).
    std::map<int64_t, int64_t> unitVersion;
    std::map<int64_t, int64_t> unitRun;
    std::set<int64_t> corruptDeltas;  // from-versions whose delta comes with a byte flipped
    std::set<int64_t> missingDeltas;  // from-versions whose delta is listed but gone (404)
    std::atomic<int> weightsDownloads{0};
    std::atomic<int> deltaDownloads{0};

    // Versions 1..count of `run` after its version 0 (run 1: the weights served so far, another
    // run: its own initialisation), each the previous one moved by a pseudo-random update
    // quantized with feedback exactly as the coordinator closes a round, with its delta file.
    void publishVersions(int64_t run, int count, WeightDeltaCodec codec) {
        std::lock_guard lock(mu);
        auto& files = m_versions[run];
        Checkpoint ck;
        ck.config = m_model;
        ck.parameters.resize(static_cast<size_t>(m_model.parameterCount()));
        if (run == 1)
            ck = parseCheckpoint(m_weights).value();
        else
            initParameters(ParameterLayout(m_model), ck.parameters,
                           static_cast<uint64_t>(run) * 31);
        files = {serializeCheckpoint(ck)};
        std::vector<float> residual(ck.parameters.size(), 0.0f);
        uint64_t x = static_cast<uint64_t>(run) * 977;
        for (int v = 0; v < count; ++v) {
            std::vector<float> next = ck.parameters;
            for (float& w : next) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                w += 1e-3f * (static_cast<float>((x >> 40) % 2001) / 1000.0f - 1.0f);
            }
            WeightDeltaFile file;
            file.fromVersion = v;
            file.toVersion = v + 1;
            file.delta = quantizeWithFeedback(ck.parameters, next, residual, codec).value();
            ck.parameters = next;
            files.push_back(serializeCheckpoint(ck));
            m_deltas[run].push_back(serializeWeightDelta(file));
        }
    }
    // The weights file of a run's version, as served.
    std::vector<uint8_t> versionBytes(int64_t run, int64_t version) {
        std::lock_guard lock(mu);
        return weightsOfLocked(run, version);
    }
    int64_t deltaFileBytes(int64_t run, int64_t fromVersion) {
        std::lock_guard lock(mu);
        return static_cast<int64_t>(m_deltas[run].at(static_cast<size_t>(fromVersion)).size());
    }

    // Protocol v6: > 1 makes every manifest a sharded run's (shards, pieces uploaded to
    // pieceUrl(id, k)); the result encoding of every manifest.
    int shards = 1;
    uint32_t resultEncoding = net::kEncodingFp16;
    std::map<int, std::deque<core::ApiFailure>> pieceFailures;  // shard -> its next answers
    std::function<void(int64_t, int)> onPieceAccepted;          // after accepting, before answering
    std::map<int64_t, std::map<int, std::vector<uint8_t>>> acceptedPieces;  // unit -> shard -> body
    std::map<int, int> pieceAttempts;  // shard -> uploads that reached the fake
    static std::string pieceUrl(int64_t id, int k) {
        return "https://agg" + std::to_string(k) + ".test:8443/v1/results/" + std::to_string(id) +
               "/pieces/" + std::to_string(k);
    }

    // --- observations ---
    std::atomic<int> registrations{0};  // atomic: tests read them while the engine runs
    std::atomic<int> workRequests{0};
    std::atomic<int> progressReports{0};
    std::atomic<int> uploadAttempts{0};
    std::atomic<int> listCalls{0};
    std::atomic<int> tooManyRefusals{0};
    std::vector<int64_t> released;                     // DELETE /v1/work/{id} that released a unit
    std::vector<int64_t> assigned;                     // every unit handed out, repeats included
    std::map<int64_t, std::vector<uint8_t>> accepted;  // work unit -> result body
    std::map<int64_t, int> acceptCount;                // how often counted (must stay 1)
    std::vector<net::WorkRequest> requests;
    std::vector<std::string> requestIds;  // the idempotency key of each request ("" none)
    std::string token;

    // The id of the next unit handed out (before the first request).
    void setNextId(int64_t id) {
        std::lock_guard lock(mu);
        m_nextId = id;
    }
    const net::SigningKey& key() const { return m_key; }
    const ModelConfig& model() const { return m_model; }
    const std::vector<uint8_t>& weightsBytes() const { return m_weights; }
    const std::vector<uint8_t>& text() const { return m_text; }  // data shard 0

    net::Manifest manifestFor(int64_t id) const {
        net::Manifest m;
        m.workUnitId = id;
        m.runId = unitRun.count(id) ? unitRun.at(id) : 1;
        m.baseVersion = unitVersion.count(id) ? unitVersion.at(id) : 0;
        m.model = m_model;
        const auto w = nanUnitsLocked(id) ? m_nanWeights : weightsOfLocked(m.runId, m.baseVersion);
        m.weightsUrl =
            "/v1/runs/" + std::to_string(m.runId) + "/weights/" + std::to_string(m.baseVersion);
        m.weightsSha256 = net::sha256(w);
        m.weightsBytes = static_cast<int64_t>(w.size());
        // As the coordinator lists them: the last (at most 4) deltas ending at the base version.
        if (auto it = m_deltas.find(m.runId); it != m_deltas.end())
            for (int64_t v = std::max<int64_t>(0, m.baseVersion - 4); v < m.baseVersion; ++v) {
                const auto& d = it->second.at(static_cast<size_t>(v));
                net::WeightDeltaRef ref;
                ref.fromVersion = v;
                ref.sha256 = net::sha256(d);
                ref.bytes = static_cast<int64_t>(d.size());
                ref.urls = {"/blobs/sha256/" + net::toHex(ref.sha256)};
                m.weightDeltas.push_back(ref);
            }
        m.dataUrl = "/v1/runs/1/data/0";
        m.dataShard = 0;
        m.dataOffset = (id % 2) * 3000;
        m.dataLength = 3000;
        m.dataSha256 = net::sha256(std::span<const uint8_t>(m_text).subspan(
            static_cast<size_t>(m.dataOffset), static_cast<size_t>(m.dataLength)));
        m.innerSteps = m_innerSteps;
        m.batch = 2;
        m.seqLen = 16;
        m.lr.peakLr = 1e-3f;
        m.lr.minLr = 1e-4f;
        m.lr.warmupSteps = 1;
        m.lr.totalSteps = m_innerSteps;
        m.seed = 1000 + static_cast<uint64_t>(id);
        m.deadlineUnix = 4000000000;
        m.heartbeatSeconds = 30;
        m.uploadUrl = "/v1/results/" + std::to_string(id);
        m.maxUploadBytes =
            static_cast<int64_t>(net::kResultHeaderBytes) + 2 * m_model.parameterCount();
        m.startBlend = startBlend;
        m.resultEncoding = resultEncoding;
        m.maxUploadBytes = static_cast<int64_t>(net::kResultHeaderBytes) +
                           net::resultPayloadBytes(resultEncoding, m_model.parameterCount());
        if (shards > 1) {
            const auto ranges = net::pieceRanges(m_model.parameterCount(), shards);
            for (size_t k = 0; k < ranges.size(); ++k)
                m.shards.push_back({ranges[k], pieceUrl(id, static_cast<int>(k))});
            m.uploadUrl = m.shards.front().uploadUrl;
        }
        m.sign(m_key);
        return m;
    }

    // --- CoordinatorApi ---
    core::ApiResult<net::RegisterResponse> registerClient(const net::RegisterRequest& r) override {
        std::lock_guard lock(mu);
        ++registrations;
        m_clientKey = r.publicKey;
        net::RegisterResponse out;
        out.clientId = 1;
        out.token = "token-" + std::to_string(registrations);
        out.coordinatorPublicKey = m_key.publicKey();
        return out;
    }
    void setToken(const std::string& t) override {
        std::lock_guard lock(mu);
        token = t;
    }
    core::ApiResult<core::WorkOffer> requestWork(const net::WorkRequest& r,
                                                 const std::string& requestId) override {
        std::unique_lock lock(mu);
        ++workRequests;
        requests.push_back(r);
        requestIds.push_back(requestId);
        if (!workFailures.empty()) {
            auto f = workFailures.front();
            workFailures.pop_front();
            return f;
        }
        core::WorkOffer offer;
        int64_t id = 0;
        for (const auto& [heldId, heldRequestId] : held)
            if (!requestId.empty() && heldRequestId == requestId)
                id = heldId;  // a repeated request: the same unit
        if (id == 0) {
            if (maxHeldUnits > 0 && static_cast<int>(held.size()) >= maxHeldUnits) {
                ++tooManyRefusals;
                return core::apiFailure(
                    "this client already holds " + std::to_string(held.size()) + " work units",
                    true, heldRetryAfterMs, "too_many_work_units", 409);
            }
            if (m_nextId > maxWorkUnits) {
                offer.retryAfterMs = noWorkRetryAfterMs;
                return offer;
            }
            id = m_nextId++;
            held[id] = requestId;
        }
        if (heartbeatClock)
            lastHeartbeatMs[id] = heartbeatClock->nowMs();
        assigned.push_back(id);
        offer.manifest = manifestFor(id);
        offer.manifestJson = offer.manifest->toJson();
        auto hook = onAssigned;
        lock.unlock();
        if (hook)
            hook(id);
        return offer;
    }
    core::ApiResult<std::vector<net::HeldWorkUnit>> listWork() override {
        std::lock_guard lock(mu);
        ++listCalls;
        if (!listFailures.empty()) {
            auto f = listFailures.front();
            listFailures.pop_front();
            return f;
        }
        std::vector<net::HeldWorkUnit> out;
        for (const auto& [id, requestId] : held)
            out.push_back({id, requestId, 0, 0, 1795300000, 4000000000});
        return out;
    }
    core::ApiResult<void> releaseWork(int64_t id) override {
        std::lock_guard lock(mu);
        if (id <= 0 || id >= m_nextId)
            return core::apiFailure("unknown", false, {}, "unknown_work_unit", 404);
        if (!held.erase(id))
            return core::apiFailure("not assigned", false, {}, "not_assigned", 409);
        released.push_back(id);
        return {};
    }
    core::ApiResult<core::DownloadOutcome> downloadWeights(
        const net::Manifest& m, const std::filesystem::path& dest,
        const core::TransferProgressFn& p) override {
        std::vector<uint8_t> w;
        {
            std::lock_guard lock(mu);
            ++weightsDownloads;
            w = nanUnitsLocked(m.workUnitId) ? m_nanWeights
                                             : weightsOfLocked(m.runId, m.baseVersion);
        }
        return write(dest, w, p);
    }
    core::ApiResult<core::DownloadOutcome> downloadWeightDelta(
        const net::Manifest&, const net::WeightDeltaRef& ref, const std::filesystem::path& dest,
        const core::TransferProgressFn& p) override {
        std::vector<uint8_t> bytes;
        {
            std::lock_guard lock(mu);
            ++deltaDownloads;
            for (const auto& [run, deltas] : m_deltas)
                for (const auto& d : deltas)
                    if (net::sha256(d) == ref.sha256)
                        bytes = d;
            if (bytes.empty() || missingDeltas.count(ref.fromVersion))
                return core::apiFailure("HTTP 404: no blob " + net::toHex(ref.sha256), false, {},
                                        "not_found", 404);
            if (corruptDeltas.count(ref.fromVersion))
                bytes[bytes.size() / 2] ^= 0x40;  // as a client that did not check would pass on
        }
        return write(dest, bytes, p);
    }
    core::ApiResult<core::DownloadOutcome> downloadData(
        const net::Manifest& m, const std::filesystem::path& dest,
        const core::TransferProgressFn& p) override {
        std::vector<uint8_t> d(m_text.begin() + m.dataOffset,
                               m_text.begin() + m.dataOffset + m.dataLength);
        return write(dest, d, p);
    }
    core::ApiResult<net::ProgressReply> reportProgress(int64_t id,
                                                       const net::ProgressReport& report) override {
        std::unique_lock lock(mu);
        ++progressReports;
        cv.wait(lock, [&] { return !blockProgress; });
        net::ProgressReply r;
        if (const auto it = abandonedUnits.find(id); it != abandonedUnits.end()) {
            r.action = "abandon";
            r.reason = it->second;
            return r;
        }
        if (heartbeatClock)
            lastHeartbeatMs[id] = heartbeatClock->nowMs();
        if (accepted.count(id)) {  // as the real coordinator answers
            r.action = "abandon";
            r.reason = "the result of this work unit was already accepted";
            return r;
        }
        if (abandonOnProgress || (abandonFinishedUnits && report.step == m_innerSteps)) {
            r.action = "abandon";
            r.reason = "no heartbeat for 181 s; its data was reassigned";
        } else {
            r.minSteps = minSteps;
        }
        return r;
    }
    core::ApiResult<core::UploadOutcome> uploadResult(const std::string& url,
                                                      const std::filesystem::path& file,
                                                      const net::Signature& signature,
                                                      const core::TransferProgressFn& p) override {
        std::unique_lock lock(mu);
        ++uploadAttempts;
        const int64_t urlId = std::atoll(url.substr(url.rfind('/') + 1).c_str());
        uploading.insert(urlId);
        cv.wait(lock, [&] { return !blockUploads; });
        uploading.erase(urlId);
        if (!uploadFailures.empty()) {
            auto f = uploadFailures.front();
            uploadFailures.pop_front();
            return f;
        }
        auto body = readFile(file);
        if (!body)
            return core::apiFailure(body.error().message, false);
        auto h = net::parseResultHeader(*body);
        if (!h)
            return core::apiFailure(h.error().message, false, {}, "bad_header", 400);
        if (url != "/v1/results/" + std::to_string(h->workUnitId))
            return core::apiFailure("wrong url " + url, false, {}, "bad_request", 400);
        const auto digest = net::resultDigest(*h);
        if (!net::verifySignature(m_clientKey, digest, signature))
            return core::apiFailure("bad signature", false, {}, "bad_signature", 403);
        if (p)
            p(static_cast<int64_t>(body->size()), static_cast<int64_t>(body->size()), 1e6);
        auto it = accepted.find(h->workUnitId);
        if (it == accepted.end() && !held.count(h->workUnitId))  // as the real one answers
            return core::apiFailure("work unit " + std::to_string(h->workUnitId) +
                                        " was abandoned: no heartbeat for 181 s",
                                    false, {}, "work_unit_abandoned", 409);
        if (it != accepted.end() && it->second != *body)
            return core::apiFailure("another result", false, {}, "duplicate", 409);
        if (it == accepted.end()) {
            accepted[h->workUnitId] = *body;
            ++acceptCount[h->workUnitId];
            held.erase(h->workUnitId);
        }
        net::Receipt r;
        r.workUnitId = h->workUnitId;
        r.clientId = 1;
        r.round = 0;
        r.weight = static_cast<double>(h->tokens) * staleWeight;
        if (receiptCredit)
            r.credit = h->tokens;
        r.timeUnix = 1795314629;
        r.resultDigest = digest;
        if (badReceiptKey)
            r.sign(net::SigningKey::generate().value());
        else
            r.sign(m_key);
        core::UploadOutcome out;
        out.receipt = r;
        out.receiptJson = r.toJson();
        out.bytesSent = static_cast<int64_t>(body->size());
        auto hook = onUploadAccepted;
        lock.unlock();
        if (hook)
            hook(h->workUnitId);
        return out;
    }

    core::ApiResult<core::UploadOutcome> uploadPiece(const std::string& url,
                                                     const std::filesystem::path& file, int shard,
                                                     const net::Signature& signature,
                                                     const core::TransferProgressFn& p) override {
        std::unique_lock lock(mu);
        ++pieceAttempts[shard];
        cv.wait(lock, [&] { return !blockUploads; });
        if (auto it = pieceFailures.find(shard); it != pieceFailures.end() && !it->second.empty()) {
            auto f = it->second.front();
            it->second.pop_front();
            return f;
        }
        auto body = readFile(file);
        if (!body)
            return core::apiFailure(body.error().message, false);
        auto h = net::parseResultHeader(*body);
        if (!h || h->formatVersion != net::kResultFormatPieces)
            return core::apiFailure("not a version 2 header", false, {}, "bad_header", 400);
        if (url != pieceUrl(h->workUnitId, shard))
            return core::apiFailure("wrong url " + url, false, {}, "wrong_shard", 421);
        const size_t tableBytes = static_cast<size_t>(shards) * net::kPieceEntryBytes;
        if (body->size() < net::kResultHeaderBytes + tableBytes)
            return core::apiFailure("short", false, {}, "bad_piece_table", 422);
        const auto table =
            std::span<const uint8_t>(*body).subspan(net::kResultHeaderBytes, tableBytes);
        auto entries = net::parsePieceTable(table, h->parameterCount);
        if (!entries || net::sha256(table) != h->payloadSha256)
            return core::apiFailure("bad table", false, {}, "bad_piece_table", 422);
        const auto piece =
            std::span<const uint8_t>(*body).subspan(net::kResultHeaderBytes + tableBytes);
        const auto& e = (*entries)[static_cast<size_t>(shard)];
        if (static_cast<int64_t>(piece.size()) != net::piecePayloadBytes(h->encoding, e.range) ||
            net::sha256(piece) != e.sha256)
            return core::apiFailure("digest", false, {}, "digest_mismatch", 422);
        const auto digest = net::resultDigest(*h);
        if (!net::verifySignature(m_clientKey, digest, signature))
            return core::apiFailure("bad signature", false, {}, "bad_signature", 403);
        if (p)
            p(static_cast<int64_t>(body->size()), static_cast<int64_t>(body->size()), 1e6);
        auto& pieces = acceptedPieces[h->workUnitId];
        if (auto it = pieces.find(shard); it != pieces.end() && it->second != *body)
            return core::apiFailure("another result", false, {}, "duplicate", 409);
        pieces[shard] = *body;
        if (static_cast<int>(pieces.size()) == shards)
            held.erase(h->workUnitId);
        net::Receipt r;
        r.workUnitId = h->workUnitId;
        r.clientId = 1;
        r.round = 0;
        r.weight = static_cast<double>(h->tokens) * staleWeight;
        r.credit = h->tokens;
        r.timeUnix = 1795314629;
        r.resultDigest = digest;
        r.shard = shard;
        r.sign(m_key);
        core::UploadOutcome out;
        out.receipt = r;
        out.receiptJson = r.toJson();
        out.bytesSent = static_cast<int64_t>(body->size());
        auto hook = onPieceAccepted;
        lock.unlock();
        if (hook)
            hook(h->workUnitId, shard);
        return out;
    }

  private:
    bool nanUnitsLocked(int64_t id) const { return nanUnits.count(id) > 0; }
    std::vector<uint8_t> weightsOfLocked(int64_t run, int64_t version) const {
        auto it = m_versions.find(run);
        if (it == m_versions.end() || version < 0 ||
            version >= static_cast<int64_t>(it->second.size()))
            return m_weights;  // version 0 of run 1 (and whatever a test did not publish)
        return it->second[static_cast<size_t>(version)];
    }
    core::ApiResult<core::DownloadOutcome> write(const std::filesystem::path& dest,
                                                 const std::vector<uint8_t>& bytes,
                                                 const core::TransferProgressFn& p) {
        if (p &&
            !p(static_cast<int64_t>(bytes.size()) / 2, static_cast<int64_t>(bytes.size()), 1e6))
            return core::apiFailure("cancelled", true);
        if (auto st = writeFileAtomically(dest, bytes); !st)
            return core::apiFailure(st.error().message, false);
        core::DownloadOutcome out;
        out.bytesTransferred = static_cast<int64_t>(bytes.size());
        return out;
    }

    net::SigningKey m_key;
    ModelConfig m_model;
    int m_innerSteps;
    std::vector<uint8_t> m_weights, m_nanWeights, m_text;
    std::map<int64_t, std::vector<std::vector<uint8_t>>> m_versions;  // run -> its weights files
    std::map<int64_t, std::vector<std::vector<uint8_t>>> m_deltas;    // run -> delta v -> v + 1
    net::PublicKey m_clientKey{};
    int64_t m_nextId = 1;
};

}  // namespace tandem::testing
