// One upload's byte stream alone (no coordinator, no database): a result fed in odd pieces is
// staged byte for byte and measured (norm, cosine to a direction) against an independent half
// decoder, and read back exactly by PayloadReader;
// each header and payload check refuses with its status and code; a retry of an accepted result
// gets its stored receipt.
//
// Dimensions: P parameters.
#include "codec.hpp"
#include "random.hpp"
#include "small_disk.hpp"
#include "upload_stream.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace tandem;
using namespace tandem::coord;
using namespace tandem::testing;

namespace {

// Independent IEEE half decoder (no code shared with kernels/codec.cpp).
double decodeHalf(uint16_t h) {
    const int sign = (h >> 15) & 1, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

// Finite halves of every exponent, subnormals and signed zeros included.
std::vector<uint16_t> randomPayload(int64_t P, uint64_t seed) {
    Rng rng(seed);
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (auto& h : d)
        h = static_cast<uint16_t>((rng.below(2) << 15) | (rng.below(31) << 10) | rng.below(1024));
    return d;
}

struct Result {
    std::vector<uint8_t> body;
    net::ResultHeader header;
    net::Signature signature{};
};

Result makeResult(const net::SigningKey& key, int64_t workUnit, const std::vector<uint16_t>& p,
                  int64_t tokens = 640, int steps = 10) {
    net::ResultHeader h;
    h.workUnitId = workUnit;
    h.parameterCount = static_cast<int64_t>(p.size());
    h.tokens = tokens;
    h.steps = steps;
    h.lossFirst = 5.0f;
    h.lossLast = 3.0f;
    h.lossMean = 4.0f;
    Result r;
    r.body = net::buildResult(h, p);
    r.header = *net::parseResultHeader(r.body);
    r.signature = key.sign(net::resultDigest(r.header));
    return r;
}

// A hand-made int8 payload (net/result_format.hpp, written here without its helpers): blocks of
// 256 values, each an f32 scale then its int8 values; the last block shorter.
struct Int8Payload {
    std::vector<int8_t> values;
    std::vector<float> scales;
    std::vector<uint8_t> bytes;
    // value i as q x scale in double: exact, so rounding it to float is the one rounding a
    // decoder may make.
    double value(int64_t i) const {
        return static_cast<double>(values[size_t(i)]) *
               static_cast<double>(scales[size_t(i / 256)]);
    }
};

Int8Payload randomInt8Payload(int64_t P, uint64_t seed) {
    Rng rng(seed);
    Int8Payload p;
    p.values.resize(size_t(P));
    for (auto& q : p.values)
        q = static_cast<int8_t>(static_cast<int>(rng.below(255)) - 127);
    p.scales.resize(size_t((P + 255) / 256));
    for (size_t b = 0; b < p.scales.size(); ++b)  // many magnitudes; one block of zeros
        p.scales[b] = b == 1 ? 0.0f : std::ldexp(float(rng.uniform()) + 0.5f, -int(rng.below(20)));
    for (size_t b = 0; b < p.scales.size(); ++b) {
        const auto* s = reinterpret_cast<const uint8_t*>(&p.scales[b]);
        p.bytes.insert(p.bytes.end(), s, s + 4);
        const size_t lo = b * 256, hi = std::min(size_t(P), lo + 256);
        for (size_t i = lo; i < hi; ++i)
            p.bytes.push_back(static_cast<uint8_t>(p.values[i]));
    }
    return p;
}

Result makeInt8Result(const net::SigningKey& key, int64_t workUnit, int64_t P,
                      const std::vector<uint8_t>& bytes, int64_t saturated = 0) {
    net::ResultHeader h;
    h.workUnitId = workUnit;
    h.encoding = net::kEncodingInt8;
    h.parameterCount = P;
    h.tokens = 640;
    h.steps = 10;
    h.lossFirst = 5.0f;
    h.lossLast = 3.0f;
    h.lossMean = 4.0f;
    h.saturated = saturated;
    h.payloadSha256 = net::sha256(std::span<const uint8_t>(bytes));
    Result r;
    const auto head = net::serializeResultHeader(h);
    r.body.assign(head.begin(), head.end());
    r.body.insert(r.body.end(), bytes.begin(), bytes.end());
    r.header = h;
    r.signature = key.sign(net::resultDigest(h));
    return r;
}

struct Fixture {
    QTemporaryDir dir;
    net::SigningKey key = net::SigningKey::generate().value();
    int64_t clock = 100;

    UploadExpectation expect(int64_t P, const net::Signature& signature,
                             uint32_t encoding = net::kEncodingFp16) {
        UploadExpectation e;
        e.workUnitId = 7;
        e.parameterCount = P;
        e.encoding = encoding;
        e.modelName = "test model";
        // Written out: 2 bytes a value, or a value's byte and 4 per 256 values.
        e.bodyBytes = static_cast<int64_t>(net::kResultHeaderBytes) +
                      (encoding == net::kEncodingFp16 ? 2 * P : P + 4 * ((P + 255) / 256));
        e.maxTokens = 640;
        e.maxSteps = 10;
        e.clientKey = key.publicKey();
        e.signature = signature;
        e.clock = [this] { return clock; };
        e.startedUnix = 100;
        e.maxSeconds = 60;
        return e;
    }
    std::filesystem::path staging() const {
        return std::filesystem::path(dir.path().toStdString()) / "upload.part";
    }
};

// Feeds body in pieces of 1, 127, 3, 5, then 100003 bytes at a time; the first answer, if any.
std::optional<Outcome<std::string>> feedAll(UploadStream& s, std::span<const uint8_t> body) {
    size_t pos = 0;
    for (size_t piece : {size_t{1}, size_t{127}, size_t{3}, size_t{5}}) {
        const size_t n = std::min(piece, body.size() - pos);
        if (auto a = s.feed(body.subspan(pos, n)))
            return a;
        pos += n;
    }
    while (pos < body.size()) {
        const size_t n = std::min<size_t>(100003, body.size() - pos);
        if (auto a = s.feed(body.subspan(pos, n)))
            return a;
        pos += n;
    }
    return std::nullopt;
}

// The refusal of a stream that took `body` whole and was then finished.
Refusal refusalOf(Fixture& f, const Result& r, int64_t P, uint32_t encoding = net::kEncodingFp16) {
    UploadStream s(f.expect(P, r.signature, encoding));
    if (auto refused = s.open(f.staging()))
        return *refused;
    if (auto answer = feedAll(s, r.body))
        return answer->ok() ? Refusal{200, "answered", answer->value()} : answer->refusal();
    if (auto refused = s.finish(true))
        return *refused;
    return Refusal{200, "accepted", ""};
}

}  // namespace

class TestCoordinatorUploadStream : public QObject {
    Q_OBJECT

  private slots:
    void stagesAndMeasures() {
        Fixture f;
        const int64_t P = (int64_t{1} << 19) + 70000;  // a 1 MiB chunk, then two blocks more
        const auto payload = randomPayload(P, 11);
        const auto r = makeResult(f.key, 7, payload);
        // A reference direction with its own values (the gate's last outer step).
        Rng rng(5);
        auto direction = std::make_shared<std::vector<float>>(static_cast<size_t>(P));
        for (auto& v : *direction)
            v = static_cast<float>(rng.uniform() - 0.5);
        {
            auto e = f.expect(P, r.signature);
            e.direction = direction;
            UploadStream s(e);
            QVERIFY(!s.open(f.staging()));
            // The payload's space is reserved before the first byte arrives.
            QCOMPARE(std::filesystem::file_size(f.staging()), uintmax_t(2 * P));
            QVERIFY(!feedAll(s, r.body));
            QVERIFY(!s.finish(true));
            QVERIFY(s.header() == r.header);
            QVERIFY(s.resultDigest() == net::resultDigest(r.header));
            double sumSquares = 0, ab = 0, bb = 0;
            for (int64_t i = 0; i < P; ++i) {
                const double x = decodeHalf(payload[static_cast<size_t>(i)]);
                const double y = (*direction)[static_cast<size_t>(i)];
                sumSquares += x * x;
                ab += x * y;
                bb += y * y;
            }
            // scanFp16 adds squares in float lanes of 16 (relative error below 1e-6).
            QVERIFY(std::abs(s.norm() - std::sqrt(sumSquares)) <= 1e-6 * std::sqrt(sumSquares));
            // Exactly what cosineSimilarity gives on the decoded values held in memory.
            std::vector<float> decoded(static_cast<size_t>(P));
            for (int64_t i = 0; i < P; ++i)
                decoded[size_t(i)] = static_cast<float>(decodeHalf(payload[size_t(i)]));
            QCOMPARE(s.cosine(), cosineSimilarity(decoded, *direction));
            QVERIFY(std::abs(*s.cosine() - ab / std::sqrt(sumSquares * bb)) < 1e-12);
            // The norm is the one a scan of whole 1 MiB chunks gives (the coordinator's before
            // uploads were staged in blocks): its down-weighting must not move.
            const auto whole = scanFp16(std::span(payload).first(size_t{1} << 19)).sumSquares +
                               scanFp16(std::span(payload).subspan(size_t{1} << 19)).sumSquares;
            QCOMPARE(s.norm(), std::sqrt(whole));
            std::ifstream in(f.staging(), std::ios::binary);
            const std::vector<uint8_t> staged{std::istreambuf_iterator<char>(in), {}};
            QVERIFY(staged ==
                    std::vector<uint8_t>(r.body.begin() + net::kResultHeaderBytes, r.body.end()));
            // Read back as the aggregator does: the halves' exact values, chunk by chunk.
            auto reader =
                PayloadReader::open(f.staging(), {net::kEncodingFp16, P}, r.header.payloadSha256);
            QVERIFY(reader.ok());
            int64_t at = 0;
            bool exact = true;
            for (auto chunk = reader->next(); chunk.ok() && !chunk->empty();
                 chunk = reader->next()) {
                QCOMPARE(reader->offset(), at);
                for (float v : *chunk)
                    exact = exact && v == decoded[size_t(at++)];
            }
            QCOMPARE(at, P);
            QVERIFY(exact);
            QVERIFY(s.finish(true)->code == "internal");  // once only
        }
        QVERIFY(!std::filesystem::exists(f.staging()));  // removed unless released
        {
            UploadStream s(f.expect(P, r.signature));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!feedAll(s, r.body));
            QVERIFY(!s.finish(true));
            QVERIFY(!s.cosine());  // no direction given
            s.releaseStagingFile();
        }
        QVERIFY(std::filesystem::exists(f.staging()));
        // A damaged or short file is refused by the reader.
        {
            std::fstream io(f.staging(), std::ios::in | std::ios::out | std::ios::binary);
            io.seekp(1000);
            io.put('\x55');
        }
        auto damaged =
            PayloadReader::open(f.staging(), {net::kEncodingFp16, P}, r.header.payloadSha256);
        QVERIFY(damaged.ok());
        Expected<std::span<const float>> last = damaged->next();
        while (last.ok() && !last->empty())
            last = damaged->next();
        QVERIFY(!last.ok());
        QVERIFY2(last.error().message.find("does not match its SHA-256") != std::string::npos,
                 last.error().message.c_str());
        std::filesystem::resize_file(f.staging(), 2 * P - 2);
        auto shortFile = PayloadReader::open(f.staging(), {net::kEncodingFp16, P});
        last = shortFile->next();
        while (last.ok() && !last->empty())
            last = shortFile->next();
        QVERIFY(!last.ok());
        QVERIFY2(last.error().message.find("ends after") != std::string::npos,
                 last.error().message.c_str());
    }

    // An int8 upload (hand-made payload) across stage blocks and decode chunks: staged byte for
    // byte, its norm and cosine against an independent decode, read back exactly.
    void stagesInt8() {
        Fixture f;
        const int64_t P = (int64_t{1} << 19) + 1000;  // a decode chunk, then 3 blocks and 232
        const Int8Payload payload = randomInt8Payload(P, 21);
        QCOMPARE(int64_t(payload.bytes.size()), P + 4 * 2052);
        const auto r = makeInt8Result(f.key, 7, P, payload.bytes);
        Rng rng(6);
        auto direction = std::make_shared<std::vector<float>>(static_cast<size_t>(P));
        for (auto& v : *direction)
            v = static_cast<float>(rng.uniform() - 0.5);
        auto e = f.expect(P, r.signature, net::kEncodingInt8);
        e.direction = direction;
        UploadStream s(e);
        QVERIFY(!s.open(f.staging()));
        QCOMPARE(std::filesystem::file_size(f.staging()), uintmax_t(payload.bytes.size()));
        const auto answer = feedAll(s, r.body);
        QVERIFY2(!answer, answer ? answer->refusal().message.c_str() : "");
        const auto refused = s.finish(true);
        QVERIFY2(!refused, refused ? refused->message.c_str() : "");
        QVERIFY(s.header() == r.header);
        double sumSquares = 0, ab = 0, bb = 0;
        std::vector<float> decoded(static_cast<size_t>(P));
        for (int64_t i = 0; i < P; ++i) {
            const double x = payload.value(i), y = (*direction)[size_t(i)];
            decoded[size_t(i)] = static_cast<float>(x);
            sumSquares += x * x;
            ab += x * y;
            bb += y * y;
        }
        QVERIFY(sumSquares > 0);
        QVERIFY(std::abs(s.norm() - std::sqrt(sumSquares)) <= 1e-12 * std::sqrt(sumSquares));
        QCOMPARE(s.cosine(), cosineSimilarity(decoded, *direction));
        QVERIFY(std::abs(*s.cosine() - ab / std::sqrt(sumSquares * bb)) < 1e-9);
        std::ifstream in(f.staging(), std::ios::binary);
        const std::vector<uint8_t> staged{std::istreambuf_iterator<char>(in), {}};
        QVERIFY(staged == payload.bytes);
        auto reader =
            PayloadReader::open(f.staging(), {net::kEncodingInt8, P}, r.header.payloadSha256);
        QVERIFY(reader.ok());
        int64_t at = 0;
        bool exact = true;
        auto chunk = reader->next();
        for (; chunk.ok() && !chunk->empty(); chunk = reader->next()) {
            QCOMPARE(reader->offset(), at);
            for (float v : *chunk)
                exact = exact && v == decoded[size_t(at++)];
        }
        QVERIFY2(chunk.ok(), chunk.ok() ? "" : chunk.error().message.c_str());
        QCOMPARE(at, P);
        QVERIFY(exact);
        // A file cut inside the last block is refused by the reader.
        s.releaseStagingFile();
        std::filesystem::resize_file(f.staging(), payload.bytes.size() - 7);
        auto cut = PayloadReader::open(f.staging(), {net::kEncodingInt8, P});
        Expected<std::span<const float>> last = cut->next();
        while (last.ok() && !last->empty())
            last = cut->next();
        QVERIFY(!last.ok());
        QVERIFY2(last.error().message.find("ends after") != std::string::npos,
                 last.error().message.c_str());
    }

    // Bad int8 input: a NaN or negative scale, the other encoding either way round, a count of
    // saturated values, a cut body. Each refused, nothing staged.
    void int8Refusals() {
        Fixture f;
        const int64_t P = 1000;
        Int8Payload payload = randomInt8Payload(P, 22);
        auto expectRefusal = [&](const Result& r, uint32_t encoding, int status,
                                 const std::string& code, const std::string& part) {
            const Refusal refusal = refusalOf(f, r, P, encoding);
            QCOMPARE(refusal.httpStatus, status);
            QCOMPARE(refusal.code, code);
            QVERIFY2(refusal.message.find(part) != std::string::npos, refusal.message.c_str());
            QVERIFY(!std::filesystem::exists(f.staging()));
        };
        auto withScale = [&](size_t block, float scale) {
            std::vector<uint8_t> bytes = payload.bytes;
            std::memcpy(bytes.data() + block * 260, &scale, 4);
            return makeInt8Result(f.key, 7, P, bytes);
        };
        expectRefusal(withScale(3, std::nanf("")), net::kEncodingInt8, 422, "non_finite",
                      "1 NaN, Inf or negative int8 scale(s) among parameters 0..999");
        expectRefusal(withScale(0, -INFINITY), net::kEncodingInt8, 422, "non_finite", "int8 scale");
        expectRefusal(withScale(2, -0.5f), net::kEncodingInt8, 422, "non_finite", "negative");
        // An int8 body for an fp16 run, and an fp16 body for an int8 run.
        const auto int8Result = makeInt8Result(f.key, 7, P, payload.bytes);
        expectRefusal(int8Result, net::kEncodingFp16, 422, "wrong_encoding",
                      "encoded as int8; this run takes fp16 results");
        expectRefusal(makeResult(f.key, 7, randomPayload(P, 23)), net::kEncodingInt8, 422,
                      "wrong_encoding", "encoded as fp16; this run takes int8 results");
        expectRefusal(makeInt8Result(f.key, 7, P, payload.bytes, 3), net::kEncodingInt8, 400,
                      "bad_header", "an int8 result saturates nothing");
        {
            UploadStream s(f.expect(P, int8Result.signature, net::kEncodingInt8));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!feedAll(s, std::span(int8Result.body).first(int8Result.body.size() - 100)));
            const auto refused = s.finish(true);
            QCOMPARE(refused->code, std::string("truncated"));
            QVERIFY2(refused->message.find("after 1044 of 1144 bytes") != std::string::npos,
                     refused->message.c_str());
        }
        QVERIFY(!std::filesystem::exists(f.staging()));
        expectRefusal(int8Result, net::kEncodingInt8, 200, "accepted", "");
    }

    void headerChecks() {
        Fixture f;
        const int64_t P = 1000;
        const auto payload = randomPayload(P, 12);
        auto check = [&](const Result& r, int status, const std::string& code,
                         const std::string& part) {
            const Refusal refusal = refusalOf(f, r, P);
            QCOMPARE(refusal.httpStatus, status);
            QCOMPARE(refusal.code, code);
            QVERIFY2(refusal.message.find(part) != std::string::npos, refusal.message.c_str());
        };
        check(makeResult(f.key, 8, payload), 400, "bad_header", "names work unit 8");
        check(makeResult(f.key, 7, randomPayload(P - 1, 12)), 422, "wrong_size",
              "the result has 999 parameters; the run's model test model has 1000");
        auto other = net::SigningKey::generate().value();
        check(makeResult(other, 7, payload), 403, "bad_signature", "does not verify");
        check(makeResult(f.key, 7, payload, 641, 10), 422, "bad_header", "641 tokens in 10 steps");
        check(makeResult(f.key, 7, payload, 640, 11), 422, "bad_header", "at most 640 tokens");
        auto garbled = makeResult(f.key, 7, payload);
        garbled.body[0] = 'X';  // the magic
        check(garbled, 400, "bad_header", "");
        check(makeResult(f.key, 7, payload), 200, "accepted", "");
    }

    void payloadChecks() {
        Fixture f;
        const int64_t P = (int64_t{1} << 19) + 10;
        auto payload = randomPayload(P, 13);
        payload[(size_t{1} << 19) + 3] = 0x7E00;  // NaN in the second decode step
        auto r = makeResult(f.key, 7, payload);
        Refusal refusal = refusalOf(f, r, P);
        QCOMPARE(refusal.httpStatus, 422);
        QCOMPARE(refusal.code, std::string("non_finite"));
        QVERIFY2(refusal.message.find("1 NaN or Inf value(s) among parameters 524288..524297") !=
                     std::string::npos,
                 refusal.message.c_str());

        payload = randomPayload(P, 14);
        r = makeResult(f.key, 7, payload);
        r.body[net::kResultHeaderBytes + 5] ^= 1;  // the header still names the old SHA-256
        refusal = refusalOf(f, r, P);
        QCOMPARE(refusal.httpStatus, 422);
        QCOMPARE(refusal.code, std::string("digest_mismatch"));
    }

    void lengthAndTime() {
        Fixture f;
        const int64_t P = 1000;
        const auto r = makeResult(f.key, 7, randomPayload(P, 15));
        {
            UploadStream s(f.expect(P, r.signature));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!feedAll(s, std::span(r.body).first(r.body.size() - 2)));
            const auto refused = s.finish(true);
            QCOMPARE(refused->httpStatus, 400);
            QCOMPARE(refused->code, std::string("truncated"));
            QVERIFY(refused->message.find("after 2126 of 2128 bytes") != std::string::npos);
        }
        {
            UploadStream s(f.expect(P, r.signature));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!feedAll(s, r.body));
            QCOMPARE(s.finish(false)->code, std::string("truncated"));  // the body was cut
        }
        {
            UploadStream s(f.expect(P, r.signature));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!feedAll(s, r.body));
            const uint8_t extra = 0;
            auto refused = s.feed(std::span(&extra, 1));
            QVERIFY(refused && !refused->ok());
            QCOMPARE(refused->refusal().code, std::string("wrong_size"));
        }
        {
            UploadStream s(f.expect(P, r.signature));
            QVERIFY(!s.open(f.staging()));
            QVERIFY(!s.feed(std::span(r.body).first(200)));
            f.clock = 100 + 61;
            auto refused = s.feed(std::span(r.body).subspan(200, 10));
            QVERIFY(refused && !refused->ok());
            QCOMPARE(refused->refusal().httpStatus, 408);
            QCOMPARE(refused->refusal().code, std::string("too_slow"));
        }
    }

    // A disk without room for the payload: 507 before the first byte, and no file left behind.
    // (The coordinator answers the same before it opens the stream when it sees the disk full;
    // this is the reservation that catches a disk filled meanwhile.)
    void aFullDiskIsRefusedAtOpen() {
        Fixture f;
        const auto disk = std::filesystem::path(f.dir.path().toStdString()) / "disk";
        if (auto why = mountSmallDisk(disk, 1 << 20); !why.empty())
            QSKIP(why.c_str());
        const int64_t P = 600000;  // 1.2 MB of payload on a 1 MiB disk
        const auto r = makeResult(f.key, 7, randomPayload(P, 18));
        {
            UploadStream s(f.expect(P, r.signature));
            const auto refused = s.open(disk / "upload.part");
            QVERIFY(refused);
            QCOMPARE(refused->httpStatus, 507);
            QCOMPARE(refused->code, std::string("insufficient_storage"));
            QVERIFY2(refused->message.find("disk is full") != std::string::npos &&
                         refused->message.find("1200000 bytes") != std::string::npos,
                     refused->message.c_str());
        }
        QVERIFY(std::filesystem::is_empty(disk));
        QVERIFY(freeBytes(disk) > (1 << 20) - 8192);  // the failed reservation holds nothing
        // One that fits is staged there.
        const int64_t small = 100000;
        const auto fits = makeResult(f.key, 7, randomPayload(small, 19));
        UploadStream s(f.expect(small, fits.signature));
        QVERIFY(!s.open(disk / "upload.part"));
        QVERIFY(!feedAll(s, fits.body));
        QVERIFY(!s.finish(true));
        QCOMPARE(std::filesystem::file_size(disk / "upload.part"), uintmax_t(2 * small));
        ::umount2(disk.c_str(), MNT_DETACH);
    }

    void retryOfAnAcceptedResult() {
        Fixture f;
        const int64_t P = 1000;
        const auto r = makeResult(f.key, 7, randomPayload(P, 16));
        auto e = f.expect(P, r.signature);
        e.accepted = true;
        e.acceptedDigest = net::resultDigest(r.header);
        e.acceptedReceipt = "{\"stored\":\"receipt\"}";
        {
            UploadStream s(e);
            auto answer = s.feed(r.body);  // no staging file: open() is not called
            QVERIFY(answer && answer->ok());
            QCOMPARE(answer->value(), e.acceptedReceipt);
        }
        {
            const auto other = makeResult(f.key, 7, randomPayload(P, 17));
            e.signature = other.signature;
            UploadStream s(e);
            auto answer = s.feed(other.body);
            QVERIFY(answer && !answer->ok());
            QCOMPARE(answer->refusal().httpStatus, 409);
            QCOMPARE(answer->refusal().code, std::string("duplicate"));
        }
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorUploadStream)
#include "test_coordinator_upload_stream.moc"
