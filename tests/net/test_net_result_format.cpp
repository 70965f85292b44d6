// The binary result (net/result_format.hpp): the header's round trip and its precise errors,
// and the int8 payload's layout.
#include "result_format.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>

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
        b[8] = 2;
        expectError(b, "format version 2 is not supported, expected 1");
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
};

QTEST_APPLESS_MAIN(TestNetResultFormat)
#include "test_net_result_format.moc"
