// Writing the result of a trained unit: results/<id>.result + .json, the result queued.
#include "result_writer.hpp"

#include "codec_int8.hpp"
#include "file_io.hpp"
#include "result_format.hpp"

#include <cstdio>
#include <cstring>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

// The result file and the pieces of a result that could not be written whole.
void removePendingResultFiles(const PendingResult& p) {
    std::error_code ec;
    for (const auto& piece : p.pieces)
        fs::remove(piece.file, ec);
    fs::remove(p.file, ec);
}

}  // namespace

Expected<std::vector<uint8_t>> ResultWriter::encodePayload(net::ResultHeader& h, Backend& backend,
                                                           const std::vector<float>& start) {
    if (h.encoding == net::kEncodingInt8) {
        // No backend encodes int8: the end weights come to the host (from the device, for
        // CUDA) and are encoded here, as the coordinator decodes them (kernels/codec_int8.hpp).
        // Host memory: 5P bytes while encoding (the end weights and the values, freed as soon as
        // done), then about 2P (payload and body) while the moments are saved: below what
        // memory_estimate.hpp counts for the fp16 result (4P beside a checkpoint's peak).
        Expected<std::vector<uint8_t>> payload = makeError("int8 encode did not run");
        {
            std::vector<int8_t> values(start.size());
            std::vector<float> scales(static_cast<size_t>(
                int8BlockCount(static_cast<int64_t>(start.size()), net::kInt8ResultBlock)));
            {
                std::vector<float> end(start.size());
                if (auto st = backend.storeParameters(end); !st) {
                    return makeError("cannot read the trained weights: " + st.error().message);
                }
                auto enc = encodeDeltaInt8(start, end, net::kInt8ResultBlock, values, scales);
                if (!enc) {
                    return makeError("the pseudo-gradient is not finite (" + enc.error().message +
                                     ")");
                }
            }
            payload = net::int8Payload(values, scales);
        }
        if (!payload) {
            return payload.error();
        }
        h.saturated = 0;
        return net::buildResult(h, std::span<const uint8_t>(*payload));
    }
    std::vector<uint16_t> payload(start.size());
    auto enc = backend.encodePseudoGradient(start, payload);
    if (!enc) {
        return makeError("the pseudo-gradient is not finite (" + enc.error().message + ")");
    }
    if (enc->nonFinite > 0) {
        return makeError("the pseudo-gradient has " + std::to_string(enc->nonFinite) +
                         " NaN or Inf values");
    }
    h.saturated = enc->saturated;
    return net::buildResult(h, payload);
}

Expected<std::vector<uint8_t>> ResultWriter::writePieces(const net::Manifest& m,
                                                         std::span<const uint8_t> body,
                                                         PendingResult& p) {
    auto header = net::parseResultHeader(body);
    if (!header)
        return header.error();
    std::vector<net::PieceRange> ranges;
    for (const auto& s : m.shards)
        ranges.push_back(s.range);
    const auto payload = body.subspan(net::kResultHeaderBytes);
    auto pieced = net::buildPiecedResult(*header, payload, ranges);
    if (!pieced)
        return pieced.error();
    auto removeWritten = [&] {
        std::error_code ec;
        for (const auto& piece : p.pieces)
            fs::remove(piece.file, ec);
        p.pieces.clear();
    };
    for (size_t k = 0; k < m.shards.size(); ++k) {
        PendingPiece piece;
        piece.shard = static_cast<int>(k);
        piece.uploadUrl = m.shards[k].uploadUrl;
        piece.file = m_shared.files.pieceFile(m.workUnitId, piece.shard);
        const auto pieceBody = net::pieceBody(*pieced, payload, k);
        piece.bytes = static_cast<int64_t>(pieceBody.size());
        m_shared.checkCrash();
        if (auto st = writeFileAtomically(piece.file, pieceBody); !st) {
            removeWritten();
            return st.error();
        }
        p.pieces.push_back(std::move(piece));
    }
    p.bytes = 0;
    for (const auto& piece : p.pieces)
        p.bytes += piece.bytes;
    p.digest = net::resultDigest(pieced->header);
    const auto head = net::serializeResultHeader(pieced->header);
    std::vector<uint8_t> out(head.size() + pieced->table.size());
    std::memcpy(out.data(), head.data(), head.size());
    std::memcpy(out.data() + head.size(), pieced->table.data(), pieced->table.size());
    return out;
}

Status ResultWriter::write(const ActiveUnit& a, Backend& backend, const std::vector<float>& start,
                           const char* stoppedBy) {
    const net::Manifest& m = a.manifest;
    const std::string id = wuKey(m.workUnitId);
    net::ResultHeader h;
    h.workUnitId = m.workUnitId;
    h.encoding = m.resultEncoding;
    h.parameterCount = static_cast<int64_t>(start.size());
    h.tokens = a.tokens;
    h.steps = static_cast<int32_t>(a.step);
    h.lossFirst = a.lossFirst.value_or(0);
    h.lossLast = a.lossLast.value_or(0);
    h.lossMean = a.step > 0 ? static_cast<float>(a.lossSum / static_cast<double>(a.step)) : 0;
    auto encoded = encodePayload(h, backend, start);
    if (!encoded) {
        return encoded.error();
    }
    const std::vector<uint8_t> body = std::move(*encoded);
    auto header = net::parseResultHeader(body);
    if (!header) {
        return makeError(header.error().message);
    }
    PendingResult p;
    p.workUnitId = m.workUnitId;
    p.uploadUrl = m.uploadUrl;
    p.file = m_shared.files.resultFile(m.workUnitId);
    p.infoFile = m_shared.files.resultInfoFile(m.workUnitId);
    p.bytes = static_cast<int64_t>(body.size());
    p.digest = net::resultDigest(*header);
    p.steps = header->steps;
    p.lossLast = header->lossLast;
    p.heartbeatMs = heartbeatPeriodMs(m.heartbeatSeconds);
    // A sharded run's result: the pieces first, then the head (header and table) as the .result.
    std::vector<uint8_t> head;
    if (!m.shards.empty()) {
        auto written = writePieces(m, body, p);
        if (!written)
            return makeError("cannot write the result's pieces: " + written.error().message);
        head = std::move(*written);
    }
    const std::span<const uint8_t> resultBytes =
        m.shards.empty() ? std::span<const uint8_t>(body) : std::span<const uint8_t>(head);
    p.signature = m_shared.key.sign(p.digest);
    m_shared.checkCrash();
    if (auto st = writeFileAtomically(p.file, resultBytes); !st) {
        removePendingResultFiles(p);
        return makeError("cannot write the result: " + st.error().message);
    }
    m_shared.hook("result");
    m_shared.checkCrash();
    const ResultInfo info{m.workUnitId, m.uploadUrl, m.runId, m.baseVersion, m.shards};
    if (auto st = writeResultInfo(p.infoFile, info); !st) {
        // A .result without its .json is no result: leave nothing half-made.
        removePendingResultFiles(p);
        return makeError("cannot write the result: " + st.error().message);
    }
    m_shared.checkCrash();
    (void)m_shared.ledger.updateWorkUnitProgress(id, a.tokens, a.step, a.computeSeconds,
                                                 a.lossFirst, a.lossLast, m_shared.now());
    m_shared.transition(m.workUnitId, WorkUnitState::Trained);
    m_shared.checkCrash();
    std::error_code ec;
    fs::remove_all(a.dir, ec);
    char lossText[64];
    std::snprintf(lossText, sizeof lossText, "loss %.3f -> %.3f", h.lossFirst, h.lossLast);
    const std::string what = stoppedBy ? " stopped at step " + std::to_string(a.step) + " of " +
                                             std::to_string(m.innerSteps) + " (" + stoppedBy +
                                             "), a partial result: "
                                       : " trained: " + std::to_string(a.step) + " steps, ";
    m_shared.log(EventLevel::Info, "work unit " + id + what + std::to_string(a.tokens) +
                                       " tokens, " + lossText + "; result " +
                                       std::to_string(p.bytes) + " bytes");
    bool nowPaused = false;
    {
        std::lock_guard lock(m_shared.mu);
        m_shared.uploads.pushLocked(p);
        m_shared.snap.current.reset();
        ++m_shared.trainedThisSession;
        if (m_shared.finishFlag) {
            m_shared.finishFlag = false;
            m_shared.pauseRequested = true;
            nowPaused = true;
        }
    }
    if (nowPaused)
        m_shared.saveHold();
    m_shared.notifyAll();
    m_shared.refreshTotals();
    return {};
}

}  // namespace tandem::core
