// The binary result (net/result_format.hpp): the header's round trip and its precise errors,
// the int8 payload's layout, and the pieces of a sharded run's result (format version 2): the
// ranges worked by hand, the piece table's round trip and refusals, piece offsets against the
// kernels' int8 encoder, sums of squares against an independent loop over decoded values.
#include "codec.hpp"
#include "codec_int8.hpp"
#include "result_format.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

using namespace tandem;
using namespace tandem::net;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

class TestNetResultFormat : public QObject {
    Q_OBJECT

  private slots:
    void resultHeaderRoundTrip() {
        std::vector<uint16_t> payload{0x3c00, 0xbc00, 0x0001, 0x7bff, 0};
        ResultHeader h;
        h.workUnitId = 42;
        h.tokens = 4096;
        h.steps = 8;
        h.lossFirst = 5.5f;
        h.lossLast = 2.25f;
        h.lossMean = 3.0f;
        h.saturated = 1;
        auto bytes = buildResult(h, payload);
        QCOMPARE(bytes.size(), kResultHeaderBytes + payload.size() * 2);
        auto parsed = parseResultHeader(bytes);
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        QCOMPARE(parsed->parameterCount, int64_t(payload.size()));
        QCOMPARE(parsed->payloadSha256,
                 sha256(std::span<const uint8_t>(bytes).subspan(kResultHeaderBytes)));
        QCOMPARE(parsed->totalBytes(), int64_t(bytes.size()));
        QCOMPARE(resultDigest(*parsed),
                 sha256(std::span<const uint8_t>(bytes).first(kResultHeaderBytes)));
        // Hand-checked offsets: magic, version 1, encoding 1, id 42 at byte 16.
        QCOMPARE(std::memcmp(bytes.data(), "TNDMRSLT", 8), 0);
        QCOMPARE(int(bytes[8]), 1);
        QCOMPARE(int(bytes[12]), 1);
        QCOMPARE(int(bytes[16]), 42);
        QCOMPARE(int(bytes[24]), 5);
    }
    // Encoding 2: blocks of an f32 scale and up to 256 int8 values, laid out by hand here.
    void int8ResultRoundTrip() {
        const int64_t P = 300;  // a block of 256 and one of 44
        std::vector<int8_t> values(P);
        for (int64_t i = 0; i < P; ++i)
            values[size_t(i)] = static_cast<int8_t>(i % 255 - 127);
        const std::vector<float> scales{0.5f, 0.125f};
        auto payload = int8Payload(values, scales);
        QVERIFY(payload.ok());
        QCOMPARE(payload->size(), size_t(300 + 8));
        float scale = 0;
        std::memcpy(&scale, payload->data(), 4);
        QCOMPARE(scale, 0.5f);
        QCOMPARE(int8_t(payload->at(4)), int8_t(-127));
        QCOMPARE(int8_t(payload->at(4 + 255)), int8_t(values[255]));
        std::memcpy(&scale, payload->data() + 260, 4);
        QCOMPARE(scale, 0.125f);
        QCOMPARE(int8_t(payload->at(264)), values[256]);
        QCOMPARE(int8_t(payload->back()), values[299]);
        QVERIFY(!int8Payload(values, std::vector<float>{0.5f}));  // one scale short

        QCOMPARE(resultPayloadBytes(kEncodingFp16, P), int64_t(600));
        QCOMPARE(resultPayloadBytes(kEncodingInt8, P), int64_t(308));
        QCOMPARE(resultPayloadBytes(kEncodingInt8, 256), int64_t(260));
        QCOMPARE(resultPayloadBytes(kEncodingInt8, 257), int64_t(265));
        QCOMPARE(resultPayloadBytes(7, P), int64_t(0));
        ResultHeader h;
        h.workUnitId = 9;
        h.encoding = kEncodingInt8;
        h.parameterCount = P;
        h.tokens = 10;
        h.steps = 1;
        auto bytes = buildResult(h, std::span<const uint8_t>(*payload));
        QVERIFY(bytes.ok());
        QCOMPARE(bytes->size(), kResultHeaderBytes + 308);
        QCOMPARE(int((*bytes)[12]), 2);  // the encoding
        auto parsed = parseResultHeader(*bytes);
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        QCOMPARE(parsed->encoding, kEncodingInt8);
        QCOMPARE(parsed->payloadBytes(), int64_t(308));
        QCOMPARE(parsed->totalBytes(), int64_t(bytes->size()));
        QCOMPARE(parsed->payloadSha256,
                 sha256(std::span<const uint8_t>(*bytes).subspan(kResultHeaderBytes)));
        // A payload of the wrong size for its header is not built.
        auto wrong = buildResult(h, std::span<const uint8_t>(*payload).first(307));
        QVERIFY(!wrong);
        QVERIFY(contains(wrong.error().message, "307 bytes, expected 308"));
        // int8 cannot saturate: a count of saturated values is a damaged header.
        h.saturated = 1;
        auto saturated = parseResultHeader(serializeResultHeader(h));
        QVERIFY(!saturated);
        QVERIFY(contains(saturated.error().message, "an int8 result saturates nothing"));
        QCOMPARE(encodingFromName("int8"), std::optional<uint32_t>(kEncodingInt8));
        QCOMPARE(encodingFromName("fp16"), std::optional<uint32_t>(kEncodingFp16));
        QVERIFY(!encodingFromName("fp32"));
    }
    void resultHeaderErrors() {
        ResultHeader h;
        h.workUnitId = 1;
        h.parameterCount = 10;
        h.tokens = 1;
        h.steps = 1;
        auto good = serializeResultHeader(h);
        auto expectError = [&](std::array<uint8_t, kResultHeaderBytes> bytes, const char* part) {
            auto r = parseResultHeader(bytes);
            QVERIFY(!r);
            QVERIFY2(contains(r.error().message, part), r.error().message.c_str());
        };
        QVERIFY(parseResultHeader(good).ok());
        auto truncated = parseResultHeader(std::span<const uint8_t>(good).first(100));
        QVERIFY(contains(truncated.error().message, "truncated: 100 bytes, expected 128"));
        auto b = good;
        b[0] = 'X';
        expectError(b, "magic");
        b = good;
        b[8] = 3;
        expectError(b, "format version 3 is not supported, expected 1 or 2");
        b = good;
        b[8] = 2;  // a pieced result's header (a piece table follows)
        auto v2 = parseResultHeader(b);
        QVERIFY2(v2.ok(), v2.ok() ? "" : v2.error().message.c_str());
        QCOMPARE(v2->formatVersion, kResultFormatPieces);
        QCOMPARE(serializeResultHeader(*v2), b);
        b = good;
        b[12] = 3;
        expectError(b, "encoding 3 is not supported, expected 1 (fp16) or 2 (int8)");
        b = good;
        b[100] = 1;
        expectError(b, "reserved byte 100");
        ResultHeader bad = h;
        bad.parameterCount = 0;
        expectError(serializeResultHeader(bad), "parameter count 0");
        bad = h;
        bad.lossLast = std::nanf("");
        expectError(serializeResultHeader(bad), "not finite");
        bad = h;
        bad.workUnitId = -3;
        expectError(serializeResultHeader(bad), "work unit id -3");
        bad = h;
        bad.saturated = 11;
        expectError(serializeResultHeader(bad), "saturated count 11");
    }

    // pieceRanges worked by hand from the formula (docs/protocol.md "Sharded runs").
    void pieceRangesByHand() {
        using R = std::vector<PieceRange>;
        // tiny: P = 437760 = 1710 x 256; K = 3: floor(1710/3) = 570 -> 145920, floor(3420/3) =
        // 1140 -> 291840.
        QCOMPARE(pieceRanges(437760, 3), (R{{0, 145920}, {145920, 291840}, {291840, 437760}}));
        QCOMPARE(pieceRanges(437760, 1), (R{{0, 437760}}));
        // P = 1000: NB = 4; K = 3: floor(4/3) = 1 -> 256, floor(8/3) = 2 -> 512, end min(1000,
        // 1024) = 1000.
        QCOMPARE(pieceRanges(1000, 3), (R{{0, 256}, {256, 512}, {512, 1000}}));
        // P = 1000, K = 4: one block each, the last one short (744..1000).
        QCOMPARE(pieceRanges(1000, 4), (R{{0, 256}, {256, 512}, {512, 768}, {768, 1000}}));
        // P = 2561: NB = 11; K = 2: floor(11/2) = 5 -> 1280.
        QCOMPARE(pieceRanges(2561, 2), (R{{0, 1280}, {1280, 2561}}));
        // K > NB, K out of range, P out of range: no ranges.
        QVERIFY(pieceRanges(1000, 5).empty());
        QVERIFY(pieceRanges(100, 2).empty());
        QVERIFY(pieceRanges(1000, 0).empty());
        QVERIFY(pieceRanges(int64_t{1} << 30, kMaxShards + 1).empty());
        QCOMPARE(pieceRanges(int64_t{1} << 30, kMaxShards).size(), size_t(kMaxShards));
        QVERIFY(pieceRanges(0, 1).empty());
        // Every range of a larger set starts on a block and they tile [0, P).
        const auto many = pieceRanges(1234567, 7);
        QCOMPARE(many.size(), size_t(7));
        for (size_t k = 0; k < many.size(); ++k) {
            QCOMPARE(many[k].begin % 256, int64_t(0));
            QCOMPARE(many[k].begin, k == 0 ? int64_t(0) : many[k - 1].end);
        }
        QCOMPARE(many.back().end, int64_t(1234567));
    }
    void piecePayloadSizes() {
        QCOMPARE(piecePayloadBytes(kEncodingFp16, {256, 1000}), int64_t(2 * 744));
        QCOMPARE(piecePayloadBytes(kEncodingInt8, {256, 1000}), int64_t(744 + 4 * 3));
        QCOMPARE(piecePayloadBytes(kEncodingInt8, {512, 768}), int64_t(260));
        QCOMPARE(piecePayloadOffset(kEncodingFp16, {512, 768}), int64_t(1024));
        QCOMPARE(piecePayloadOffset(kEncodingInt8, {512, 768}), int64_t(512 + 8));
        QCOMPARE(piecePayloadOffset(kEncodingInt8, {100, 768}), int64_t(-1));
        QCOMPARE(piecePayloadBytes(7, {0, 256}), int64_t(0));
    }
    void pieceTableRoundTripAndRefusals() {
        const int64_t P = 1000;
        std::vector<PieceEntry> entries;
        for (const PieceRange& r : pieceRanges(P, 3)) {
            PieceEntry e;
            e.range = r;
            e.sha256[0] = static_cast<uint8_t>(r.begin / 256 + 1);
            e.sumSquares = 0.25 * static_cast<double>(r.end);
            entries.push_back(e);
        }
        const auto table = serializePieceTable(entries);
        QCOMPARE(table.size(), size_t(3 * 64));
        // Hand-checked layout of entry 1: begin 256 at 64, end 512 at 72, sha at 80, sum at 112.
        QCOMPARE(int(table[64 + 1]), 1);
        QCOMPARE(int(table[72 + 1]), 2);
        QCOMPARE(int(table[80]), 2);
        double sum = 0;
        std::memcpy(&sum, table.data() + 64 + 48, 8);
        QCOMPARE(sum, 128.0);
        auto parsed = parsePieceTable(table, P);
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        QCOMPARE(*parsed, entries);

        auto expectError = [&](std::span<const uint8_t> bytes, int64_t p, const char* part) {
            auto r = parsePieceTable(bytes, p);
            QVERIFY(!r);
            QVERIFY2(contains(r.error().message, part), r.error().message.c_str());
        };
        expectError(std::span(table).first(100), P, "100 bytes, expected 1 to 64 entries of 64");
        expectError({}, P, "0 bytes");
        std::vector<uint8_t> tooMany(65 * 64, 0);
        expectError(tooMany, int64_t{1} << 30, "4160 bytes");
        // Another P: the ranges are not that P's.
        expectError(table, 1024, "entry 2: range [512, 1000), expected [512, 1024)");
        // More entries than blocks.
        expectError(table, 500, "3 pieces of 500 parameters");
        auto bad = table;
        bad[64 + 8] = 1;  // entry 1's end 512 -> 513
        expectError(bad, P, "entry 1: range [256, 513), expected [256, 512)");
        bad = table;
        const double nan = std::nan("");
        std::memcpy(bad.data() + 2 * 64 + 48, &nan, 8);
        expectError(bad, P, "entry 2: sum of squares nan, expected a finite number >= 0");
        bad = table;
        const double negative = -1;
        std::memcpy(bad.data() + 48, &negative, 8);
        expectError(bad, P, "entry 0: sum of squares -1");
        bad = table;
        bad[64 + 63] = 9;
        expectError(bad, P, "entry 1: reserved byte 63 is not zero");
        bad = table;
        bad[56] = 1;
        expectError(bad, P, "entry 0: reserved byte 56 is not zero");
    }
    // Sum of squares against an independent double loop over the decoded values (the kernels'
    // halfToFloat; q x scale per block as laid out by the kernels' encoder).
    void sumSquaresIndependent() {
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 0.01f);
        const int64_t P = 1000;
        std::vector<float> start(P), end(P);
        for (int64_t i = 0; i < P; ++i) {
            start[size_t(i)] = normal(rng);
            end[size_t(i)] = normal(rng);
        }
        std::vector<uint16_t> halves(P);
        QVERIFY(encodeDeltaFp16(start, end, halves).ok());
        const std::span<const uint8_t> fp16Bytes(reinterpret_cast<const uint8_t*>(halves.data()),
                                                 halves.size() * 2);
        double expected = 0;
        for (uint16_t h : halves)
            expected += static_cast<double>(halfToFloat(h)) * static_cast<double>(halfToFloat(h));
        auto got = payloadSumSquares(kEncodingFp16, fp16Bytes, P);
        QVERIFY(got.ok());
        QCOMPARE(*got, expected);
        QVERIFY(expected > 0);

        std::vector<int8_t> q(P);
        std::vector<float> scales(size_t(int8BlockCount(P, 256)));
        QVERIFY(encodeDeltaInt8(start, end, 256, q, scales).ok());
        auto int8Bytes = int8Payload(q, scales);
        QVERIFY(int8Bytes.ok());
        expected = 0;
        for (int64_t i = 0; i < P; ++i) {
            const double v = double(q[size_t(i)]) * double(scales[size_t(i / 256)]);
            expected += v * v;
        }
        got = payloadSumSquares(kEncodingInt8, *int8Bytes, P);
        QVERIFY(got.ok());
        QCOMPARE(*got, expected);

        // Refusals: wrong size, NaN half, negative scale.
        QVERIFY(contains(payloadSumSquares(kEncodingFp16, fp16Bytes.first(10), P).error().message,
                         "10 bytes, expected 2000"));
        auto nanHalves = halves;
        nanHalves[3] = 0x7e00;
        QVERIFY(contains(
            payloadSumSquares(
                kEncodingFp16,
                std::span(reinterpret_cast<const uint8_t*>(nanHalves.data()), nanHalves.size() * 2),
                P)
                .error()
                .message,
            "value 3 is not finite"));
        auto badScale = *int8Bytes;
        const float minus = -1.0f;
        std::memcpy(badScale.data() + 260, &minus, 4);
        QVERIFY(contains(payloadSumSquares(kEncodingInt8, badScale, P).error().message,
                         "block 1: scale -1"));
    }
    // int8 and fp16 pieces: each piece's bytes are the whole payload's slice at its offset, the
    // table's entries match, the body is header + table + slice, and the header is version 2
    // with the table's SHA-256.
    void piecedResult() {
        for (const uint32_t encoding : {kEncodingInt8, kEncodingFp16}) {
            const int64_t P = 437760 / 4 + 77;  // NB = 428, the last block short
            std::mt19937 rng(11);
            std::normal_distribution<float> normal(0.0f, 0.02f);
            std::vector<float> start(P), end(P);
            for (int64_t i = 0; i < P; ++i) {
                start[size_t(i)] = normal(rng);
                end[size_t(i)] = normal(rng);
            }
            std::vector<uint8_t> payload;
            std::vector<int8_t> q(P);
            std::vector<float> scales(size_t(int8BlockCount(P, 256)));
            std::vector<uint16_t> halves(P);
            if (encoding == kEncodingInt8) {
                QVERIFY(encodeDeltaInt8(start, end, 256, q, scales).ok());
                payload = *int8Payload(q, scales);
            } else {
                QVERIFY(encodeDeltaFp16(start, end, halves).ok());
                payload.resize(size_t(P) * 2);
                std::memcpy(payload.data(), halves.data(), payload.size());
            }
            ResultHeader h;
            h.workUnitId = 17;
            h.encoding = encoding;
            h.parameterCount = P;
            h.tokens = 100;
            h.steps = 2;
            const auto ranges = pieceRanges(P, 3);
            auto pieced = buildPiecedResult(h, payload, ranges);
            QVERIFY2(pieced.ok(), pieced.ok() ? "" : pieced.error().message.c_str());
            QCOMPARE(pieced->header.formatVersion, kResultFormatPieces);
            QCOMPARE(pieced->header.payloadSha256, sha256(std::span<const uint8_t>(pieced->table)));
            QCOMPARE(*parsePieceTable(pieced->table, P), pieced->entries);
            for (size_t k = 0; k < ranges.size(); ++k) {
                const PieceRange r = ranges[k];
                // Independent slice: values [begin, end) and their blocks, from the encoder's
                // own arrays.
                std::vector<uint8_t> slice;
                double squares = 0;
                if (encoding == kEncodingInt8) {
                    slice = *int8Payload(
                        std::span<const int8_t>(q).subspan(size_t(r.begin),
                                                           size_t(r.end - r.begin)),
                        std::span<const float>(scales).subspan(
                            size_t(r.begin / 256), size_t(int8BlockCount(r.end - r.begin, 256))));
                    for (int64_t i = r.begin; i < r.end; ++i) {
                        const double v = double(q[size_t(i)]) * double(scales[size_t(i / 256)]);
                        squares += v * v;
                    }
                } else {
                    slice.resize(size_t(r.end - r.begin) * 2);
                    std::memcpy(slice.data(), halves.data() + r.begin, slice.size());
                    for (int64_t i = r.begin; i < r.end; ++i)
                        squares += double(halfToFloat(halves[size_t(i)])) *
                                   double(halfToFloat(halves[size_t(i)]));
                }
                QCOMPARE(int64_t(slice.size()), piecePayloadBytes(encoding, r));
                QCOMPARE(pieced->entries[k].sha256, sha256(std::span<const uint8_t>(slice)));
                QCOMPARE(pieced->entries[k].sumSquares, squares);
                const auto body = pieceBody(*pieced, payload, k);
                QCOMPARE(body.size(), kResultHeaderBytes + pieced->table.size() + slice.size());
                const auto head = serializeResultHeader(pieced->header);
                QVERIFY(std::equal(head.begin(), head.end(), body.begin()));
                QVERIFY(std::equal(pieced->table.begin(), pieced->table.end(),
                                   body.begin() + kResultHeaderBytes));
                QVERIFY(std::equal(
                    slice.begin(), slice.end(),
                    body.begin() + ptrdiff_t(kResultHeaderBytes + pieced->table.size())));
                auto parsedHead = parseResultHeader(body);
                QVERIFY(parsedHead.ok());
                QCOMPARE(parsedHead->formatVersion, kResultFormatPieces);
            }
            // Wrong ranges and a short payload are refused.
            std::vector<PieceRange> wrong = ranges;
            wrong[1].begin += 256;
            wrong[0].end += 256;
            QVERIFY(contains(buildPiecedResult(h, payload, wrong).error().message,
                             "are not the pieces of"));
            QVERIFY(
                contains(buildPiecedResult(h, std::span<const uint8_t>(payload).first(10), ranges)
                             .error()
                             .message,
                         "10 bytes, expected"));
        }
    }
};

QTEST_APPLESS_MAIN(TestNetResultFormat)
#include "test_net_result_format.moc"
