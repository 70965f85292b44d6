// The binary result (net/result_format.hpp) as the coordinator reads an upload of it
// (coordinator/upload_stream.hpp): the 128-byte header, the signature over its digest, the fp16
// payload fed in pieces of fuzzer-chosen size, NaN/Inf scanning, the payload digest. The
// selector byte can make the harness sign the header and fix the payload digest, so the fuzzer
// gets past those checks to the payload. Checks: a parsed header serializes back to the same
// 128 bytes; every refusal is a 4xx with a message; an accepted upload is finite and complete.
// The bytes after the header are also read as a piece table (format version 2, a sharded run's
// result): a table that parses serializes back to the same bytes and tiles [0, P).
#include "fuzz_common.hpp"
#include "result_format.hpp"
#include "upload_stream.hpp"

#include <cmath>
#include <vector>

namespace {

using namespace tandem;
constexpr int64_t kParameters = 8;  // P: a 144-byte body

void checkRefusal(const coord::Refusal& r) {
    FUZZ_CHECK(r.httpStatus >= 400 && r.httpStatus < 500);
    FUZZ_CHECK(!r.message.empty() && fuzz::isUtf8(r.message));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const size_t piece = 1 + in.byte() % 64;
    std::vector<uint8_t> body(in.rest().begin(), in.rest().end());

    auto parsed = net::parseResultHeader(body);
    if (parsed) {
        const auto again = net::serializeResultHeader(*parsed);
        FUZZ_CHECK(std::equal(again.begin(), again.end(), body.begin()));
    }
    if (body.size() > net::kResultHeaderBytes) {
        // The header's P when it parsed (a version 2 body: header, table, piece), else 600.
        const int64_t parameters = parsed ? parsed->parameterCount : 600;
        auto tail = std::span<const uint8_t>(body).subspan(net::kResultHeaderBytes);
        const size_t entries = std::min<size_t>(tail.size() / net::kPieceEntryBytes,
                                                std::max<size_t>(1, selector >> 3));
        const auto bytes = tail.first(entries * net::kPieceEntryBytes);
        if (auto table = net::parsePieceTable(bytes, parameters)) {
            const auto again = net::serializePieceTable(*table);
            FUZZ_CHECK(again.size() == bytes.size() &&
                       std::equal(again.begin(), again.end(), bytes.begin()));
            FUZZ_CHECK(table->front().range.begin == 0 && table->back().range.end == parameters);
            for (size_t k = 1; k < table->size(); ++k)
                FUZZ_CHECK((*table)[k].range.begin == (*table)[k - 1].range.end);
        }
    }

    static const net::SigningKey key = [] {
        auto k = net::SigningKey::generate();
        return std::move(*k);
    }();
    if ((selector & 1) && body.size() >= net::kResultHeaderBytes) {
        const auto payload =
            net::sha256(std::span<const uint8_t>(body).subspan(net::kResultHeaderBytes));
        std::copy(payload.begin(), payload.end(), body.begin() + 64);
    }
    coord::UploadExpectation expect;
    expect.workUnitId = 7;
    expect.parameterCount = kParameters;
    expect.modelName = "fuzz";
    expect.bodyBytes = static_cast<int64_t>(net::kResultHeaderBytes) + 2 * kParameters;
    expect.maxTokens = 1 << 20;
    expect.maxSteps = 100;
    expect.clientKey = key.publicKey();
    if ((selector & 2) && body.size() >= net::kResultHeaderBytes) {
        const auto digest =
            net::sha256(std::span<const uint8_t>(body).first(net::kResultHeaderBytes));
        expect.signature = key.sign(digest);
    }
    expect.clock = [] { return int64_t{0}; };
    expect.maxSeconds = 3600;

    coord::UploadStream stream(std::move(expect));
    const auto staging = fuzz::scratchFile({}).parent_path() / "staging";
    if (auto r = stream.open(staging))
        return checkRefusal(*r), 0;
    const bool stopEarly = selector & 4;  // the connection ends before the body does
    size_t fed = 0;
    while (fed < body.size()) {
        const size_t n = std::min(piece, body.size() - fed);
        auto answer = stream.feed(std::span<const uint8_t>(body).subspan(fed, n));
        fed += n;
        if (answer) {
            FUZZ_CHECK(!answer->ok());  // nothing was accepted before: no stored receipt
            return checkRefusal(answer->refusal()), 0;
        }
        if (stopEarly && fed * 2 >= body.size())
            break;
    }
    if (auto r = stream.finish(fed == body.size()))
        return checkRefusal(*r), 0;
    // Accepted: the whole body, a header that parses, a finite decoded payload.
    FUZZ_CHECK(fed == body.size());
    FUZZ_CHECK(static_cast<int64_t>(body.size()) == net::kResultHeaderBytes + 2 * kParameters);
    FUZZ_CHECK(net::parseResultHeader(body).ok());
    FUZZ_CHECK(stream.header().workUnitId == 7);
    // The staged payload: 2P bytes of finite halves, as the aggregator will read them.
    auto staged = coord::PayloadReader::open(
        stream.stagingFile(), {net::kEncodingFp16, kParameters},
        net::sha256(std::span<const uint8_t>(body).subspan(net::kResultHeaderBytes)));
    FUZZ_CHECK(staged.ok());
    int64_t values = 0;
    for (auto chunk = staged->next(); chunk.ok() && !chunk->empty(); chunk = staged->next()) {
        values += static_cast<int64_t>(chunk->size());
        for (float v : *chunk)
            FUZZ_CHECK(std::isfinite(v));
    }
    FUZZ_CHECK(values == kParameters);
    FUZZ_CHECK(std::isfinite(stream.norm()));
    return 0;
}
