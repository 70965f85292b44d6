#include "upload_stream.hpp"

#include "messages.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace tandem::coord {

namespace {
// Values decoded at a time for the cosine (16 KiB).
constexpr size_t kDecodePieceValues = 4096;
}  // namespace

UploadStream::UploadStream(UploadExpectation expectation) : m_expect(std::move(expectation)) {}

UploadStream::~UploadStream() {
    discard();
}

void UploadStream::discard() {
    if (m_fd >= 0)
        ::close(m_fd);
    m_fd = -1;
    std::error_code ec;
    if (!m_stagingFile.empty())
        std::filesystem::remove(m_stagingFile, ec);
    m_stagingFile.clear();
}

double UploadStream::norm() const {
    if (m_expect.shards > 0) {
        double total = 0;
        for (const net::PieceEntry& e : m_table)
            total += e.sumSquares;
        return std::sqrt(total);
    }
    return std::sqrt(m_sumSquares);
}

int64_t UploadStream::stageValues() const {
    return static_cast<int64_t>(m_expect.encoding == net::kEncodingInt8 ? kStageBlockValues
                                                                        : kStageBlockHalves);
}

std::optional<Refusal> UploadStream::open(const std::filesystem::path& stagingFile) {
    m_blockCapacity = static_cast<size_t>(layout().bytesOf(stageValues()));
    m_block.resize((m_blockCapacity + 1) / 2);
    if (m_expect.direction)
        m_decoded.resize(kDecodePieceValues);
    m_stagingFile = stagingFile;
    m_fd = ::open(m_stagingFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0)
        return writeFailed("create", errno);
    // Reserve the payload's space now: a full disk is answered before the body is sent, and
    // cannot strike in the middle of it. A file system without fallocate finds out as it writes.
    const off_t bytes = static_cast<off_t>(layout().bytes());
    if (bytes > 0 && ::fallocate(m_fd, 0, 0, bytes) != 0 && errno != EOPNOTSUPP)
        return writeFailed("reserve space for", errno);
    return std::nullopt;
}

std::optional<Refusal> UploadStream::writeFailed(const char* what, int error) {
    if (error == ENOSPC || error == EDQUOT)
        return diskFull("this result of " + std::to_string(layout().bytes()) + " bytes");
    return internalError(std::string("cannot ") + what + " " + m_stagingFile.string() + ": " +
                         std::strerror(error));
}

std::optional<Outcome<std::string>> UploadStream::checkHeader() {
    const int64_t wuId = m_expect.workUnitId;
    auto h = net::parseResultHeader(m_head);
    if (!h)
        return Outcome<std::string>(refuse(400, "bad_header", h.error().message));
    if (h->workUnitId != wuId)
        return Outcome<std::string>(
            refuse(400, "bad_header",
                   "the result header names work unit " + std::to_string(h->workUnitId) +
                       " but was sent to /v1/results/" + std::to_string(wuId)));
    if (h->encoding != m_expect.encoding)
        return Outcome<std::string>(
            refuse(422, "wrong_encoding",
                   std::string("the result is encoded as ") + net::encodingName(h->encoding) +
                       "; this run takes " + net::encodingName(m_expect.encoding) +
                       " results (the manifest's result_encoding); nothing was stored"));
    if (h->parameterCount != m_expect.parameterCount)
        return Outcome<std::string>(refuse(422, "wrong_size",
                                           "the result has " + std::to_string(h->parameterCount) +
                                               " parameters; the run's model " +
                                               m_expect.modelName + " has " +
                                               std::to_string(m_expect.parameterCount)));
    if (m_expect.shards > 0 && h->formatVersion != net::kResultFormatPieces)
        return Outcome<std::string>(
            refuse(422, "bad_piece_table",
                   "this run is aggregated by " + std::to_string(m_expect.shards) +
                       " shards and takes results of format version 2 (a piece table after the "
                       "header, then the piece); this one is version " +
                       std::to_string(h->formatVersion)));
    if (m_expect.shards == 0 && h->formatVersion != net::kResultFormatVersion)
        return Outcome<std::string>(
            refuse(400, "bad_header",
                   "a result of format version " + std::to_string(h->formatVersion) +
                       " (in pieces) goes to the piece URLs of a sharded run; this run takes whole "
                       "results of format version " +
                       std::to_string(net::kResultFormatVersion)));
    m_digest = net::resultDigest(*h);
    if (!net::verifySignature(m_expect.clientKey, m_digest, m_expect.signature))
        return Outcome<std::string>(
            refuse(403, "bad_signature",
                   "the signature does not verify with this client's registered public key over "
                   "the result digest (SHA-256 of the 128-byte header)"));
    if (m_expect.resultDigestMustBe && m_digest != *m_expect.resultDigestMustBe)
        return Outcome<std::string>(
            refuse(409, "duplicate",
                   "work unit " + std::to_string(wuId) +
                       " already has an accepted result with a different digest (another piece "
                       "of it was accepted); a work unit counts once"));
    if (m_expect.accepted) {
        if (m_digest == m_expect.acceptedDigest)
            return Outcome<std::string>(m_expect.acceptedReceipt);
        return Outcome<std::string>(
            refuse(409, "duplicate",
                   "work unit " + std::to_string(wuId) +
                       " already has an accepted result with a different digest; a work unit "
                       "counts once"));
    }
    if (h->tokens > m_expect.maxTokens || h->steps > m_expect.maxSteps)
        return Outcome<std::string>(refuse(422, "bad_header",
                                           "the result claims " + std::to_string(h->tokens) +
                                               " tokens in " + std::to_string(h->steps) +
                                               " steps; the work unit allows at most " +
                                               std::to_string(m_expect.maxTokens) + " tokens in " +
                                               std::to_string(m_expect.maxSteps) + " steps"));
    if (m_expect.tokensPerStep > 0 && h->tokens > int64_t{h->steps} * m_expect.tokensPerStep)
        return Outcome<std::string>(refuse(
            422, "bad_header",
            "the result claims " + std::to_string(h->tokens) + " tokens in " +
                std::to_string(h->steps) + " steps; a step trains at most " +
                std::to_string(m_expect.tokensPerStep) + " tokens (batch x sequence length)"));
    if (h->steps < m_expect.minSteps)
        return Outcome<std::string>(refuse(
            422, "too_few_steps",
            "the result has " + std::to_string(h->steps) + " inner steps; a result of work unit " +
                std::to_string(wuId) + " needs at least " + std::to_string(m_expect.minSteps) +
                " (of " + std::to_string(m_expect.maxSteps) + " assigned)"));
    m_header = *h;
    return std::nullopt;
}

std::optional<Refusal> UploadStream::checkTable() {
    m_tableChecked = true;
    if (net::sha256(m_tableBytes) != m_header->payloadSha256)
        return refuse(422, "bad_piece_table",
                      "the piece table's SHA-256 differs from the one in the result header");
    auto table = net::parsePieceTable(m_tableBytes, m_expect.parameterCount);
    if (!table)
        return refuse(422, "bad_piece_table", table.error().message);
    if (static_cast<int>(table->size()) != m_expect.shards)
        return refuse(422, "bad_piece_table",
                      "the piece table has " + std::to_string(table->size()) +
                          " pieces; this run is aggregated by " + std::to_string(m_expect.shards) +
                          " shards");
    if (!((*table)[static_cast<size_t>(m_expect.shardIndex)].range == m_expect.pieceRange))
        return refuse(422, "bad_piece_table", "the piece table's ranges are not this run's");
    m_table = std::move(*table);
    return std::nullopt;
}

std::optional<Refusal> UploadStream::flushBlock() {
    if (m_blockBytes == 0)
        return std::nullopt;
    // Values in the block: a full block, or the payload's tail (finish() checked its length).
    const int64_t n = m_blockBytes == m_blockCapacity
                          ? stageValues()
                          : std::min(stageValues(), m_expect.payloadValues() - m_written);
    const auto* bytes = reinterpret_cast<const uint8_t*>(m_block.data());
    const std::span<const uint8_t> piece(bytes, m_blockBytes);
    size_t written = 0;
    while (written < m_blockBytes) {
        ssize_t w = ::write(m_fd, bytes + written, m_blockBytes - written);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return writeFailed("write", w < 0 ? errno : EIO);
        written += static_cast<size_t>(w);
    }
    // Start writing back what has arrived, so that the fsync at the end has little left to do.
    ::sync_file_range(m_fd, layout().bytesOf(m_written), static_cast<off_t>(m_blockBytes),
                      SYNC_FILE_RANGE_WRITE);
    const PieceScan scan = scanPayload(layout(), piece, n);
    if (scan.nonFinite > 0)
        return refuse(
            422, "non_finite",
            "the payload holds " + std::to_string(scan.nonFinite) +
                (m_expect.encoding == net::kEncodingInt8 ? " NaN, Inf or negative int8 scale(s)"
                                                         : " NaN or Inf value(s)") +
                " among parameters " + std::to_string(m_written) + ".." +
                std::to_string(m_written + n - 1) + "; a worker must not send a failed work unit");
    // The sums a scan of whole 1 MiB chunks makes: block sums in order within a chunk, then the
    // chunks' sums in order (the norm decides the gate's down-weighting, so it must not move).
    m_chunkSquares += scan.sumSquares;
    if (const auto& dir = m_expect.direction) {
        const int64_t step = static_cast<int64_t>(m_decoded.size());
        for (int64_t k = 0; k < n; k += step) {
            const int64_t len = std::min(step, n - k);
            const auto values = std::span(m_decoded).first(static_cast<size_t>(len));
            decodePayload(layout(), std::span(bytes + layout().bytesOf(k), layout().bytesOf(len)),
                          values);
            const size_t at = static_cast<size_t>(m_written + k);
            if (at < dir->size())
                m_cosine.add(
                    values, std::span(*dir).subspan(at, std::min(values.size(), dir->size() - at)));
        }
    }
    m_written += n;
    if (m_written % static_cast<int64_t>(kDecodeChunkHalves) == 0 ||
        m_written == m_expect.payloadValues()) {
        m_sumSquares += m_chunkSquares;
        m_chunkSquares = 0;
    }
    m_blockBytes = 0;
    return std::nullopt;
}

std::optional<Outcome<std::string>> UploadStream::feed(std::span<const uint8_t> bytes) {
    m_received += static_cast<int64_t>(bytes.size());
    if (m_received > m_expect.bodyBytes)
        return Outcome<std::string>(refuse(400, "wrong_size", "the body is longer than declared"));
    if (m_head.size() < net::kResultHeaderBytes) {
        const size_t take = std::min(bytes.size(), net::kResultHeaderBytes - m_head.size());
        m_head.insert(m_head.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (m_head.size() < net::kResultHeaderBytes)
            return std::nullopt;
        if (auto answer = checkHeader())
            return answer;
    }
    if (m_expect.shards > 0 && !m_tableChecked) {
        const size_t tableBytes = static_cast<size_t>(m_expect.shards) * net::kPieceEntryBytes;
        const size_t take = std::min(bytes.size(), tableBytes - m_tableBytes.size());
        m_tableBytes.insert(m_tableBytes.end(), bytes.begin(),
                            bytes.begin() + static_cast<ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (m_tableBytes.size() < tableBytes)
            return std::nullopt;
        if (auto r = checkTable())
            return Outcome<std::string>(*r);
    }
    if (bytes.empty())
        return std::nullopt;
    m_payloadHash.update(bytes);
    auto* blockBytes = reinterpret_cast<uint8_t*>(m_block.data());
    const size_t capacity = m_blockCapacity;
    while (!bytes.empty()) {
        const size_t take = std::min(bytes.size(), capacity - m_blockBytes);
        std::memcpy(blockBytes + m_blockBytes, bytes.data(), take);
        m_blockBytes += take;
        bytes = bytes.subspan(take);
        if (m_blockBytes == capacity)
            if (auto r = flushBlock())
                return Outcome<std::string>(*r);
    }
    if (m_expect.clock() - m_expect.startedUnix > m_expect.maxSeconds)
        return Outcome<std::string>(
            refuse(408, "too_slow",
                   "the upload took longer than " + std::to_string(m_expect.maxSeconds) + " s"));
    return std::nullopt;
}

std::optional<Refusal> UploadStream::finish(bool complete) {
    if (m_finished)
        return internalError("upload finished twice");
    m_finished = true;
    if (!complete || m_received != m_expect.bodyBytes)
        return refuse(400, "truncated",
                      "the body ended after " + std::to_string(m_received) + " of " +
                          std::to_string(m_expect.bodyBytes) + " bytes; nothing was counted");
    if (m_expect.accepted || !m_header)
        return internalError("upload state");
    // The tail holds exactly the values still missing (whole blocks before it were flushed).
    if (static_cast<int64_t>(m_blockBytes) !=
        layout().bytesOf(m_expect.payloadValues() - m_written))
        return refuse(400, "truncated",
                      "the payload is not " + std::to_string(layout().bytes()) + " bytes of " +
                          std::to_string(m_expect.payloadValues()) + " " +
                          net::encodingName(m_expect.encoding) + " values");
    if (auto r = flushBlock())
        return *r;
    const bool piece = m_expect.shards > 0;
    if (m_payloadHash.finish() != (piece ? pieceEntry().sha256 : m_header->payloadSha256))
        return refuse(422, "digest_mismatch",
                      piece ? "the piece's SHA-256 differs from its entry in the piece table; the "
                              "data was damaged in transit or the table is wrong"
                            : "the payload's SHA-256 differs from the one in the result header; "
                              "the data was damaged in transit or the header is wrong");
    if (piece) {
        // Each shard checks its own piece's sum, so the whole norm that every shard computes
        // from the table (and gates on) is checked piece by piece; to 1e-4, since a scan sums
        // in float within its blocks (kernels/codec.hpp) where the worker sums in double.
        const double claimed = pieceEntry().sumSquares;
        if (std::abs(claimed - m_sumSquares) >
            kPieceSumTolerance * std::max(claimed, m_sumSquares) + 1e-30)
            return refuse(422, "norm_mismatch",
                          "the piece's sum of squares is " + fmt(m_sumSquares, 12) +
                              "; its entry in the piece table says " + fmt(claimed, 12));
    }
    if (::fsync(m_fd) != 0)
        return writeFailed("flush", errno);
    ::close(m_fd);
    m_fd = -1;
    return std::nullopt;
}

}  // namespace tandem::coord
