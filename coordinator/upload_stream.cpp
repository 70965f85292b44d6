// The checks of an upload stream as it arrives.
#include "coordinator_impl.hpp"

#include "codec.hpp"
#include "result_format.hpp"

#include <cerrno>

namespace tandem::coord {

std::optional<Outcome<std::string>> UploadSession::State::onHeader() {
    auto h = net::parseResultHeader(head);
    if (!h)
        return Outcome<std::string>(refuse(400, "bad_header", h.error().message));
    if (h->workUnitId != wuId)
        return Outcome<std::string>(
            refuse(400, "bad_header",
                   "the result header names work unit " + std::to_string(h->workUnitId) +
                       " but was sent to /v1/results/" + std::to_string(wuId)));
    if (h->parameterCount != c->P)
        return Outcome<std::string>(refuse(422, "wrong_size",
                                           "the result has " + std::to_string(h->parameterCount) +
                                               " parameters; the run's model " +
                                               c->run.model.describe() + " has " +
                                               std::to_string(c->P)));
    digest = net::resultDigest(*h);
    if (!net::verifySignature(clientKey, digest, signature))
        return Outcome<std::string>(
            refuse(403, "bad_signature",
                   "the signature does not verify with this client's registered public key over "
                   "the result digest (SHA-256 of the 128-byte header)"));
    if (wasAccepted) {
        if (digest == storedDigest)
            return Outcome<std::string>(storedReceipt);
        return Outcome<std::string>(
            refuse(409, "duplicate",
                   "work unit " + std::to_string(wuId) +
                       " already has an accepted result with a different digest; a work unit "
                       "counts once"));
    }
    if (h->tokens > maxTokens || h->steps > maxSteps)
        return Outcome<std::string>(refuse(
            422, "bad_header",
            "the result claims " + std::to_string(h->tokens) + " tokens in " +
                std::to_string(h->steps) + " steps; the work unit allows at most " +
                std::to_string(maxTokens) + " tokens in " + std::to_string(maxSteps) + " steps"));
    header = *h;
    return std::nullopt;
}

std::optional<Refusal> UploadSession::State::flush() {
    if (chunkBytes == 0)
        return std::nullopt;
    const size_t n = chunkBytes / 2;
    std::span<const uint16_t> halves(chunk.data(), n);
    const auto* bytes = reinterpret_cast<const uint8_t*>(chunk.data());
    size_t written = 0;
    while (written < n * 2) {
        ssize_t w = ::write(fd, bytes + written, n * 2 - written);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return internalError("cannot write " + tmpPath.string() + ": " + std::strerror(errno));
        written += static_cast<size_t>(w);
    }
    // Start writing back what has arrived, so that the fsync at the end has little left to do.
    ::sync_file_range(fd, 2 * decoded, static_cast<off_t>(n * 2), SYNC_FILE_RANGE_WRITE);
    const Fp16Scan scan = scanFp16(halves);
    if (scan.nonFinite > 0)
        return refuse(422, "non_finite",
                      "the payload holds " + std::to_string(scan.nonFinite) +
                          " NaN or Inf value(s) among parameters " + std::to_string(decoded) +
                          ".." + std::to_string(decoded + static_cast<int64_t>(n) - 1) +
                          "; a worker must not send a failed work unit");
    sumSquares += scan.sumSquares;
    accumulateFp16(std::span(scratch).subspan(static_cast<size_t>(decoded), n), halves, 1.0f);
    decoded += static_cast<int64_t>(n);
    chunkBytes = 0;
    return std::nullopt;
}

std::optional<Outcome<std::string>> UploadSession::feed(std::span<const uint8_t> bytes) {
    State& s = *m_s;
    s.received += static_cast<int64_t>(bytes.size());
    if (s.received > s.expectedBytes)
        return Outcome<std::string>(refuse(400, "wrong_size", "the body is longer than declared"));
    if (s.head.size() < net::kResultHeaderBytes) {
        const size_t take = std::min(bytes.size(), net::kResultHeaderBytes - s.head.size());
        s.head.insert(s.head.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (s.head.size() < net::kResultHeaderBytes)
            return std::nullopt;
        if (auto answer = s.onHeader())
            return answer;
    }
    if (bytes.empty())
        return std::nullopt;
    s.payloadHash.update(bytes);
    auto* chunkBytes = reinterpret_cast<uint8_t*>(s.chunk.data());
    const size_t capacity = s.chunk.size() * 2;
    while (!bytes.empty()) {
        const size_t take = std::min(bytes.size(), capacity - s.chunkBytes);
        std::memcpy(chunkBytes + s.chunkBytes, bytes.data(), take);
        s.chunkBytes += take;
        bytes = bytes.subspan(take);
        if (s.chunkBytes == capacity)
            if (auto r = s.flush())
                return Outcome<std::string>(*r);
    }
    if (s.c->now() - s.startedUnix > s.c->cfg.maxUploadSeconds)
        return Outcome<std::string>(refuse(
            408, "too_slow",
            "the upload took longer than " + std::to_string(s.c->cfg.maxUploadSeconds) + " s"));
    return std::nullopt;
}

}  // namespace tandem::coord
