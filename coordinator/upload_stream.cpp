#include "upload_stream.hpp"

#include "codec.hpp"
#include "messages.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace tandem::coord {

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
    return std::sqrt(m_sumSquares);
}

std::optional<Refusal> UploadStream::open(const std::filesystem::path& stagingFile,
                                          std::vector<float> scratch) {
    m_scratch = std::move(scratch);
    m_scratch.assign(static_cast<size_t>(m_expect.parameterCount), 0.0f);
    m_chunk.resize(kDecodeChunkHalves);
    m_stagingFile = stagingFile;
    m_fd = ::open(m_stagingFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0)
        return internalError("cannot create " + m_stagingFile.string());
    return std::nullopt;
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
    if (h->parameterCount != m_expect.parameterCount)
        return Outcome<std::string>(refuse(422, "wrong_size",
                                           "the result has " + std::to_string(h->parameterCount) +
                                               " parameters; the run's model " +
                                               m_expect.modelName + " has " +
                                               std::to_string(m_expect.parameterCount)));
    m_digest = net::resultDigest(*h);
    if (!net::verifySignature(m_expect.clientKey, m_digest, m_expect.signature))
        return Outcome<std::string>(
            refuse(403, "bad_signature",
                   "the signature does not verify with this client's registered public key over "
                   "the result digest (SHA-256 of the 128-byte header)"));
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

std::optional<Refusal> UploadStream::flushChunk() {
    if (m_chunkBytes == 0)
        return std::nullopt;
    const size_t n = m_chunkBytes / 2;
    std::span<const uint16_t> halves(m_chunk.data(), n);
    const auto* bytes = reinterpret_cast<const uint8_t*>(m_chunk.data());
    size_t written = 0;
    while (written < n * 2) {
        ssize_t w = ::write(m_fd, bytes + written, n * 2 - written);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return internalError("cannot write " + m_stagingFile.string() + ": " +
                                 std::strerror(errno));
        written += static_cast<size_t>(w);
    }
    // Start writing back what has arrived, so that the fsync at the end has little left to do.
    ::sync_file_range(m_fd, 2 * m_decoded, static_cast<off_t>(n * 2), SYNC_FILE_RANGE_WRITE);
    const Fp16Scan scan = scanFp16(halves);
    if (scan.nonFinite > 0)
        return refuse(422, "non_finite",
                      "the payload holds " + std::to_string(scan.nonFinite) +
                          " NaN or Inf value(s) among parameters " + std::to_string(m_decoded) +
                          ".." + std::to_string(m_decoded + static_cast<int64_t>(n) - 1) +
                          "; a worker must not send a failed work unit");
    m_sumSquares += scan.sumSquares;
    accumulateFp16(std::span(m_scratch).subspan(static_cast<size_t>(m_decoded), n), halves, 1.0f);
    m_decoded += static_cast<int64_t>(n);
    m_chunkBytes = 0;
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
    if (bytes.empty())
        return std::nullopt;
    m_payloadHash.update(bytes);
    auto* chunkBytes = reinterpret_cast<uint8_t*>(m_chunk.data());
    const size_t capacity = m_chunk.size() * 2;
    while (!bytes.empty()) {
        const size_t take = std::min(bytes.size(), capacity - m_chunkBytes);
        std::memcpy(chunkBytes + m_chunkBytes, bytes.data(), take);
        m_chunkBytes += take;
        bytes = bytes.subspan(take);
        if (m_chunkBytes == capacity)
            if (auto r = flushChunk())
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
    if ((m_chunkBytes % 2) != 0)
        return refuse(400, "truncated", "odd payload length");
    if (auto r = flushChunk())
        return *r;
    if (m_payloadHash.finish() != m_header->payloadSha256)
        return refuse(422, "digest_mismatch",
                      "the payload's SHA-256 differs from the one in the result header; the "
                      "data was damaged in transit or the header is wrong");
    if (::fsync(m_fd) != 0)
        return internalError("cannot flush " + m_stagingFile.string());
    ::close(m_fd);
    m_fd = -1;
    return std::nullopt;
}

}  // namespace tandem::coord
