// Protocol JSON round trips and validation, signatures on manifests and receipts (the binary
// result format is test_net_result_format's).
#include "protocol.hpp"

#include <QtTest>

#include <cmath>
#include <cstring>

using namespace tandem;
using namespace tandem::net;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

Manifest sampleManifest() {
    Manifest m;
    m.workUnitId = 42;
    m.runId = 1;
    m.baseVersion = 3;
    m.model = *ModelConfig::parse("tiny");
    m.weightsUrl = "/v1/runs/1/weights/3";
    m.weightsSha256 = sha256(std::string_view("w"));
    m.weightsBytes = 123456;
    m.dataUrl = "/v1/runs/1/data/0";
    m.dataShard = 0;
    m.dataOffset = 1000;
    m.dataLength = 5000;
    m.dataTokenBytes = 2;
    m.dataHeaderBytes = 1024;
    m.dataSha256 = sha256(std::string_view("d"));
    m.innerSteps = 50;
    m.batch = 8;
    m.seqLen = m.model.maxSeqLen;
    m.lr = LrSchedule{6e-4f, 6e-5f, 5, 50};
    m.lrStartStep = 3;
    m.startBlend = 0.25f;
    m.seed = (uint64_t{1} << 53) - 1;
    m.deadlineUnix = 1800000000;
    m.heartbeatSeconds = 30;
    m.uploadUrl = "/v1/results/42";
    m.maxUploadBytes = 999999;
    m.weightsUrls = {"/blobs/sha256/" + toHex(m.weightsSha256),
                     "https://mirror.example/blobs/sha256/" + toHex(m.weightsSha256)};
    m.dataUrls = {"/blobs/sha256/" + toHex(sha256(std::string_view("shard")))};
    return m;
}

}  // namespace

class TestNetProtocol : public QObject {
    Q_OBJECT
  private slots:
    void errorBody() {
        ApiError e{"stale", "too old"};
        QCOMPARE(e.toJson(), std::string(R"({"error":{"code":"stale","message":"too old"}})"));
        auto back = ApiError::fromJson(e.toJson());
        QVERIFY(back.ok());
        QCOMPARE(back->code, e.code);
        QVERIFY(!ApiError::fromJson(R"({"error":"x"})"));
    }
    void registerRoundTripAndValidation() {
        auto key = SigningKey::generate();
        RegisterRequest r{"alice's pc", key->publicKey(), "RTX 3060 12 GB"};
        auto back = RegisterRequest::fromJson(r.toJson());
        QVERIFY(back.ok());
        QCOMPARE(back->name, r.name);
        QCOMPARE(back->publicKey, r.publicKey);
        QCOMPARE(back->hardware, r.hardware);

        auto notJson = RegisterRequest::fromJson("{\"name\": ");
        QVERIFY(!notJson);
        QVERIFY(contains(notJson.error().message, "not valid JSON"));
        auto array = RegisterRequest::fromJson("[1,2]");
        QVERIFY(contains(array.error().message, "expected a JSON object, found array"));
        auto missing = RegisterRequest::fromJson(R"({"name":"a","hardware":""})");
        QVERIFY(contains(missing.error().message, "'public_key' is missing"));
        auto wrongType = RegisterRequest::fromJson(R"({"name":5,"public_key":"","hardware":""})");
        QVERIFY(contains(wrongType.error().message, "'name' must be a string, found number"));
        auto emptyName = RegisterRequest::fromJson(
            R"({"name":"","public_key":")" + toBase64(key->publicKey()) + R"(","hardware":""})");
        QVERIFY(contains(emptyName.error().message, "'name' must be 1 to 100 characters"));
        auto shortKey =
            RegisterRequest::fromJson(R"({"name":"a","public_key":"AAAA","hardware":""})");
        QVERIFY(contains(shortKey.error().message, "32 bytes, found 3"));

        RegisterResponse resp{7, std::string(43, 'x'), key->publicKey()};
        auto rb = RegisterResponse::fromJson(resp.toJson());
        QVERIFY(rb.ok());
        QCOMPARE(rb->clientId, 7);
        QCOMPARE(rb->coordinatorPublicKey, key->publicKey());
    }
    void workRequestValidation() {
        WorkRequest w{"cpu", 8'000'000'000, 1234.5, 50'000'000'000};
        auto back = WorkRequest::fromJson(w.toJson());
        QVERIFY(back.ok());
        QCOMPARE(back->tokensPerSecond, 1234.5);
        QCOMPARE(back->memoryBytes, w.memoryBytes);
        auto neg = WorkRequest::fromJson(
            R"({"device":"cpu","memory_bytes":-1,"tokens_per_second":1,"free_disk_bytes":0})");
        QVERIFY(contains(neg.error().message, "'memory_bytes' must be in [0,"));
        auto fractional = WorkRequest::fromJson(
            R"({"device":"cpu","memory_bytes":1.5,"tokens_per_second":1,"free_disk_bytes":0})");
        QVERIFY(contains(fractional.error().message, "'memory_bytes' must be an integer"));
        auto huge = WorkRequest::fromJson(
            R"({"device":"cpu","memory_bytes":18446744073709551615,"tokens_per_second":1,"free_disk_bytes":0})");
        QVERIFY(!huge);
    }
    void manifestSignedRoundTrip() {
        auto key = SigningKey::generate();
        Manifest m = sampleManifest();
        m.sign(*key);
        QVERIFY(m.verify(key->publicKey()));
        auto back = Manifest::fromJson(m.toJson());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QVERIFY(back->verify(key->publicKey()));
        QCOMPARE(back->seed, m.seed);
        QCOMPARE(back->lr.peakLr, m.lr.peakLr);
        QCOMPARE(back->lrStartStep, int64_t(3));
        // Step h of the unit is step 3 + h of the run: warmup 4/5, 5/5 of the peak, then cosine.
        QCOMPARE(back->learningRate(0), 6e-4f * 4 / 5);
        QCOMPARE(back->learningRate(1), 6e-4f);
        QCOMPARE(back->learningRate(2), 6e-4f);
        QVERIFY(back->learningRate(3) < 6e-4f);
        QCOMPARE(back->dataSha256, m.dataSha256);
        QCOMPARE(back->dataTokenBytes, 2);
        QCOMPARE(back->dataHeaderBytes, int64_t{1024});
        // Tokens [1000, 6000) of uint16 after the 1024-byte header: bytes [3024, 13024).
        QCOMPARE(back->dataByteOffset(), int64_t{3024});
        QCOMPARE(back->dataByteLength(), int64_t{10000});
        QCOMPARE(back->model, m.model);
        QCOMPARE(back->signingText(), m.signingText());
        // Any change breaks the signature.
        Manifest tampered = *back;
        tampered.dataOffset += 1;
        QVERIFY(!tampered.verify(key->publicKey()));
        auto other = SigningKey::generate();
        QVERIFY(!back->verify(other->publicKey()));
    }
    void manifestValidation() {
        auto key = SigningKey::generate();
        Manifest m = sampleManifest();
        m.sign(*key);
        std::string text = m.toJson();
        auto replace = [&](const std::string& from, const std::string& to) {
            std::string t = text;
            size_t at = t.find(from);
            Q_ASSERT(at != std::string::npos);
            return t.replace(at, from.size(), to);
        };
        auto badSha = Manifest::fromJson(replace(toHex(m.dataSha256), "abcd"));
        QVERIFY(contains(badSha.error().message, "manifest 'data': field 'sha256'"));
        // A manifest of protocol v1 (byte ranges, no token width) is refused, saying so.
        auto badProtocol = Manifest::fromJson(replace("\"protocol\":6", "\"protocol\":1"));
        QVERIFY(contains(badProtocol.error().message,
                         "protocol version 1 is not supported, expected 2 to 6"));
        auto newer = Manifest::fromJson(replace("\"protocol\":6", "\"protocol\":7"));
        QVERIFY(contains(newer.error().message, "protocol version 7 is not supported"));
        auto badBlend = Manifest::fromJson(replace("\"start_blend\":0.25", "\"start_blend\":1.5"));
        QVERIFY(contains(badBlend.error().message,
                         "'start_blend' must be a finite number in [0.0, 1.0]"));
        auto noBlend = Manifest::fromJson(replace("\"start_blend\":0.25,", ""));
        QVERIFY(contains(noBlend.error().message, "'start_blend' is missing"));
        auto badWidth = Manifest::fromJson(replace("\"token_bytes\":2", "\"token_bytes\":4"));
        QVERIFY(!badWidth);
        QVERIFY(contains(badWidth.error().message, "token_bytes"));
        auto badModel = Manifest::fromJson(replace("\"heads\":", "\"heads\":0,\"x\":"));
        QVERIFY(!badModel);
        auto badSeqLen = Manifest::fromJson(replace("\"seq_len\":", "\"seq_len\":9999,\"y\":"));
        QVERIFY(!badSeqLen);
        auto badStart = Manifest::fromJson(replace("\"start_step\":3", "\"start_step\":-1"));
        QVERIFY(contains(badStart.error().message, "manifest 'lr': field 'start_step'"));
        // A manifest without start_step (an older coordinator) starts the schedule at 0.
        auto noStart = Manifest::fromJson(replace("\"start_step\":3,", ""));
        QVERIFY2(noStart.ok(), noStart.ok() ? "" : noStart.error().message.c_str());
        QCOMPARE(noStart->lrStartStep, int64_t(0));
        auto noSig = Manifest::fromJson(replace("\"signature\"", "\"signatur\""));
        QVERIFY(contains(noSig.error().message, "'signature' is missing"));
    }
    // Version 5 (issue 15): "weights" may list the consecutive weight deltas up to the base
    // version, signed; malformed lists are refused with the reason; a version 4 manifest has none.
    void weightDeltaVersions() {
        auto key = SigningKey::generate();
        Manifest m = sampleManifest();
        m.baseVersion = 7;
        for (int64_t from : {5, 6})
            m.weightDeltas.push_back(WeightDeltaRef{
                from,
                sha256(std::vector<uint8_t>(3, static_cast<uint8_t>(from))),
                1000 + from,
                {"/blobs/sha256/" + std::string(64, 'a'), "https://m.example/blobs/sha256/x"}});
        m.sign(*key);
        const std::string text = m.toJson();
        QVERIFY(contains(text, "\"deltas\":[{\"bytes\":1005"));
        auto back = Manifest::fromJson(text);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QVERIFY(back->verify(key->publicKey()));
        QCOMPARE(back->weightDeltas.size(), size_t{2});
        QCOMPARE(back->weightDeltas[1].fromVersion, int64_t{6});
        QCOMPARE(back->weightDeltas[1].bytes, int64_t{1006});
        QVERIFY(back->weightDeltas[0].sha256 == m.weightDeltas[0].sha256);
        QCOMPARE(back->weightDeltas[0].urls, m.weightDeltas[0].urls);
        Manifest tampered = *back;
        tampered.weightDeltas[0].bytes += 1;
        QVERIFY(!tampered.verify(key->publicKey()));
        auto replace = [&](const std::string& from, const std::string& to) {
            std::string t = text;
            const size_t at = t.find(from);
            Q_ASSERT(at != std::string::npos);
            return t.replace(at, from.size(), to);
        };
        auto gap = Manifest::fromJson(replace("\"from_version\":5", "\"from_version\":4"));
        QVERIFY(contains(gap.error().message, "consecutive deltas up to base version 7"));
        auto noUrls = Manifest::fromJson(replace("\"urls\":[\"/blobs/sha256/aaaa", "\"u\":[\"/"));
        QVERIFY(!noUrls);
        auto empty = Manifest::fromJson(replace("\"deltas\":[", "\"deltas\":[],\"x\":["));
        QVERIFY(contains(empty.error().message, "must list 1 to 8 deltas"));
        // Version 4: the field is not written, and not read.
        Manifest v4 = m;
        v4.protocol = 4;
        v4.sign(*key);
        QVERIFY(!contains(v4.toJson(), "deltas"));
        auto back4 = Manifest::fromJson(v4.toJson());
        QVERIFY(back4.ok());
        QVERIFY(back4->weightDeltas.empty());
    }
    // Version 3 adds start_blend. A worker that asks with version 2 (or an older worker that
    // does not say) gets a version 2 manifest without it, signed as such, and a version 3
    // worker still reads a version 2 manifest (start_blend 0: start from the weights).
    void startBlendVersions() {
        auto key = SigningKey::generate();
        Manifest v3 = sampleManifest();
        v3.protocol = 3;
        v3.weightsUrls.clear();
        v3.dataUrls.clear();
        v3.sign(*key);
        QVERIFY(contains(v3.toJson(), "\"protocol\":3"));
        QVERIFY(contains(v3.toJson(), "\"start_blend\":0.25"));
        auto back3 = Manifest::fromJson(v3.toJson());
        QVERIFY2(back3.ok(), back3.ok() ? "" : back3.error().message.c_str());
        QCOMPARE(back3->startBlend, 0.25f);
        QCOMPARE(back3->protocol, 3);
        QVERIFY(back3->verify(key->publicKey()));
        // The blend is signed: changing it breaks the signature.
        Manifest tampered = *back3;
        tampered.startBlend = 1.0f;
        QVERIFY(!tampered.verify(key->publicKey()));

        Manifest v2 = sampleManifest();
        v2.protocol = 2;
        v2.startBlend = 0;
        v2.sign(*key);
        QVERIFY(contains(v2.toJson(), "\"protocol\":2"));
        QVERIFY(!contains(v2.toJson(), "start_blend"));
        auto back2 = Manifest::fromJson(v2.toJson());
        QVERIFY2(back2.ok(), back2.ok() ? "" : back2.error().message.c_str());
        QCOMPARE(back2->protocol, 2);
        QCOMPARE(back2->startBlend, 0.0f);
        QVERIFY(back2->verify(key->publicKey()));
        // A v2 manifest that carries start_blend anyway: the field is not part of v2, so it is
        // not read and the signature (over the fields of v2) does not cover it.
        std::string extra = v2.toJson();
        extra.insert(1, "\"start_blend\":1,");
        auto ignored = Manifest::fromJson(extra);
        QVERIFY(ignored.ok());
        QCOMPARE(ignored->startBlend, 0.0f);

        WorkRequest request;
        request.device = "cpu";
        QVERIFY(contains(request.toJson(), "\"protocol\":6"));
        auto newWorker = WorkRequest::fromJson(request.toJson());
        QVERIFY(newWorker.ok());
        QCOMPARE(newWorker->protocol, 6);
        auto oldWorker = WorkRequest::fromJson(
            R"({"device":"cpu","memory_bytes":0,"tokens_per_second":1,"free_disk_bytes":0})");
        QVERIFY(oldWorker.ok());
        QCOMPARE(oldWorker->protocol, 2);
    }
    // Version 4 adds the blob URLs of weights and data, signed; older versions neither write
    // nor read them.
    void blobUrlVersions() {
        auto key = SigningKey::generate();
        Manifest v4 = sampleManifest();
        v4.sign(*key);
        auto back = Manifest::fromJson(v4.toJson());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back->weightsUrls, v4.weightsUrls);
        QCOMPARE(back->dataUrls, v4.dataUrls);
        QVERIFY(back->verify(key->publicKey()));
        Manifest tampered = *back;
        tampered.dataUrls[0] = "https://evil.example/blobs/sha256/00";
        QVERIFY(!tampered.verify(key->publicKey()));

        const std::string text = v4.toJson();
        const std::string list = "[\"" + v4.dataUrls[0] + "\"]";
        auto replaced = [&](const std::string& to) {
            std::string t = text;
            return t.replace(t.find(list), list.size(), to);
        };
        QVERIFY(contains(Manifest::fromJson(replaced("[]")).error().message,
                         "manifest 'data': field 'urls' must list 1 to 16 URLs, found 0"));
        QVERIFY(
            contains(Manifest::fromJson(replaced("[\"http://plain.example/x\"]")).error().message,
                     "paths ('/...') or https:// URLs"));
        QVERIFY(contains(Manifest::fromJson(replaced("[7]")).error().message, "field 'urls'"));
        QVERIFY(contains(Manifest::fromJson(replaced("\"/x\"")).error().message,
                         "field 'urls' must be an array"));
        std::string many = "[";
        for (int i = 0; i < 17; ++i)
            many += std::string(i ? "," : "") + "\"/blobs/sha256/x\"";
        QVERIFY(contains(Manifest::fromJson(replaced(many + "]")).error().message, "found 17"));
        std::string noUrls = text;
        const std::string field = ",\"urls\":" + list;
        noUrls.erase(noUrls.find(field), field.size());
        // Absent: no blobs for that file (the worker downloads from "url"); still signed.
        auto without = Manifest::fromJson(noUrls);
        QVERIFY2(without.ok(), without.ok() ? "" : without.error().message.c_str());
        QVERIFY(without->dataUrls.empty());
        QVERIFY(!without->verify(key->publicKey()));  // the signature covered the urls
        Manifest none = sampleManifest();
        none.weightsUrls.clear();
        none.dataUrls.clear();
        none.sign(*key);
        QVERIFY(!contains(none.toJson(), "urls"));
        auto noneBack = Manifest::fromJson(none.toJson());
        QVERIFY(noneBack.ok() && noneBack->verify(key->publicKey()));

        Manifest v3 = sampleManifest();
        v3.protocol = 3;
        v3.sign(*key);
        QVERIFY(!contains(v3.toJson(), "urls"));
        auto back3 = Manifest::fromJson(v3.toJson());
        QVERIFY(back3.ok() && back3->weightsUrls.empty() && back3->dataUrls.empty());
    }
    // Version 5 states the result encoding, signed: fp16, or int8 with its block of 256. Older
    // versions neither write nor read it (their results are fp16).
    void resultEncodingVersions() {
        auto key = SigningKey::generate();
        Manifest m = sampleManifest();
        m.resultEncoding = kEncodingInt8;
        m.sign(*key);
        const std::string text = m.toJson();
        QVERIFY(contains(text, "\"result_encoding\":\"int8\""));
        QVERIFY(contains(text, "\"result_block\":256"));
        auto back = Manifest::fromJson(text);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back->resultEncoding, kEncodingInt8);
        QVERIFY(back->verify(key->publicKey()));
        Manifest tampered = *back;
        tampered.resultEncoding = kEncodingFp16;
        QVERIFY(!tampered.verify(key->publicKey()));
        auto replaced = [&](const std::string& from, const std::string& to) {
            std::string t = text;
            return Manifest::fromJson(t.replace(t.find(from), from.size(), to));
        };
        QVERIFY(contains(replaced("\"int8\"", "\"int4\"").error().message,
                         "result_encoding 'int4' is not supported, expected fp16 or int8"));
        QVERIFY(contains(replaced("\"result_block\":256", "\"result_block\":128").error().message,
                         "result_block 128 is not supported, expected 256"));
        QVERIFY(contains(replaced("\"result_block\":256,", "").error().message,
                         "'result_block' is missing"));
        QVERIFY(contains(replaced("\"result_encoding\":\"int8\",", "").error().message,
                         "'result_encoding' is missing"));

        Manifest fp16 = sampleManifest();
        fp16.sign(*key);
        QVERIFY(contains(fp16.toJson(), "\"result_encoding\":\"fp16\""));
        QVERIFY(!contains(fp16.toJson(), "result_block"));
        auto fp16Back = Manifest::fromJson(fp16.toJson());
        QVERIFY(fp16Back.ok() && fp16Back->resultEncoding == kEncodingFp16);

        Manifest v4 = sampleManifest();
        v4.protocol = 4;
        v4.resultEncoding = kEncodingInt8;  // not part of version 4: neither written nor read
        v4.sign(*key);
        QVERIFY(!contains(v4.toJson(), "result_"));
        std::string extra = v4.toJson();
        extra.insert(1, "\"result_encoding\":\"int8\",\"result_block\":256,");
        auto back4 = Manifest::fromJson(extra);
        QVERIFY2(back4.ok(), back4.ok() ? "" : back4.error().message.c_str());
        QCOMPARE(back4->resultEncoding, kEncodingFp16);
    }
    // Version 6: a sharded run's "shards", signed with the rest; every refusal.
    void shardsVersions() {
        auto key = SigningKey::generate();
        Manifest m = sampleManifest();
        const int64_t P = m.model.parameterCount();
        for (const PieceRange& r : pieceRanges(P, 3))
            m.shards.push_back({r, "https://agg" + std::to_string(m.shards.size()) +
                                       ".example:8443/v1/results/42/pieces/" +
                                       std::to_string(m.shards.size())});
        m.sign(*key);
        const std::string text = m.toJson();
        QVERIFY(contains(
            text, "\"shards\":[{\"begin\":0,\"end\":" + std::to_string(m.shards[0].range.end) +
                      ",\"upload_url\":\"https://agg0.example:8443/v1/results/42/"
                      "pieces/0\"}"));
        auto back = Manifest::fromJson(text);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back->shards, m.shards);
        QVERIFY(back->verify(key->publicKey()));
        // Signed: another URL or range does not verify.
        Manifest tampered = *back;
        tampered.shards[1].uploadUrl = "https://evil.example/v1/results/42/pieces/1";
        QVERIFY(!tampered.verify(key->publicKey()));
        tampered = *back;
        tampered.shards.pop_back();
        QVERIFY(!tampered.verify(key->publicKey()));

        // Below version 6 shards are neither written nor read.
        Manifest v5 = m;
        v5.protocol = 5;
        QVERIFY(!contains(v5.toJson(), "shards"));
        // A run of one shard: a version 6 manifest without shards.
        Manifest one = sampleManifest();
        QVERIFY(!contains(one.toJson(), "shards"));
        auto oneBack = Manifest::fromJson(one.toJson());
        QVERIFY(oneBack.ok());
        QVERIFY(oneBack->shards.empty());

        auto refused = [&](Manifest bad, const char* part) {
            bad.sign(*key);
            auto r = Manifest::fromJson(bad.toJson());
            QVERIFY(!r);
            QVERIFY2(contains(r.error().message, part), r.error().message.c_str());
        };
        Manifest bad = m;
        bad.shards.resize(1);
        bad.shards[0].range = {0, P};
        refused(bad, "field 'shards' must list 2 to 64 shards, found 1");
        bad = m;
        bad.shards.clear();
        for (const PieceRange& r : pieceRanges(int64_t{1} << 30, 65))
            bad.shards.push_back({r, "https://a.example/p"});
        QCOMPARE(bad.shards.size(), size_t(0));  // pieceRanges refuses 65 shards: build by hand
        for (int k = 0; k < 65; ++k)
            bad.shards.push_back({{256 * k, 256 * (k + 1)}, "https://a.example/p"});
        refused(bad, "found 65");
        bad = m;
        bad.shards[1].range.begin += 256;
        bad.shards[0].range.end += 256;
        refused(bad, "field 'shards': shard 0 has parameters [0, ");
        bad = m;
        bad.shards[2].range.end -= 1;
        refused(bad, "shard 2 has parameters");
        bad = m;
        bad.shards.push_back({{P, P + 256}, "https://agg3.example/p"});
        refused(bad, "field 'shards': shard 0 has parameters");  // 4 shards split P otherwise
        bad = m;
        bad.shards[1].uploadUrl = "http://agg1.example/v1/results/42/pieces/1";
        refused(bad, "manifest shard 1: field 'upload_url' must be an absolute https:// URL");
        bad = m;
        bad.shards[0].uploadUrl = "/v1/results/42/pieces/0";
        refused(bad, "manifest shard 0: field 'upload_url' must be an absolute https:// URL");
        // A model another P than the shards were cut for.
        bad = m;
        bad.model = *ModelConfig::parse("small");
        bad.seqLen = bad.model.maxSeqLen;
        refused(bad, "shard 0 has parameters");
    }
    void progressAndReply() {
        ProgressReport p{12, 3.25f, 999.0};
        auto back = ProgressReport::fromJson(p.toJson());
        QVERIFY(back.ok());
        QCOMPARE(back->step, 12);
        QCOMPARE(back->loss, 3.25f);
        auto nanLoss = ProgressReport::fromJson(R"({"step":1,"loss":null,"tokens_per_second":1})");
        QVERIFY(contains(nanLoss.error().message, "'loss' must be a number, found null"));
        ProgressReply r{"abandon", "round closed"};
        auto rb = ProgressReply::fromJson(r.toJson());
        QCOMPARE(rb->action, std::string("abandon"));
        QCOMPARE(rb->reason, r.reason);
        QVERIFY(!ProgressReply::fromJson(R"({"action":"explode"})"));
        QCOMPARE(rb->minSteps, 0);  // not stated: not in the JSON either
        QVERIFY(!contains(r.toJson(), "min_steps"));
        ProgressReply stated{"continue", "", 5};
        QCOMPARE(stated.toJson(), std::string(R"({"action":"continue","min_steps":5})"));
        QCOMPARE(ProgressReply::fromJson(stated.toJson())->minSteps, 5);
        QVERIFY(contains(
            ProgressReply::fromJson(R"({"action":"continue","min_steps":-1})").error().message,
            "min_steps"));
    }
    void receiptSigned() {
        auto key = SigningKey::generate();
        Receipt r{
            42,           7,           3, 1024.0, 1800000000, sha256(std::string_view("h")), {},
            std::nullopt, std::nullopt};
        r.sign(*key);
        auto back = Receipt::fromJson(r.toJson());
        QVERIFY(back.ok());
        QVERIFY(back->verify(key->publicKey()));
        back->weight = 1025;
        QVERIFY(!back->verify(key->publicKey()));
        QVERIFY(!back->credit);  // a receipt without credit (older coordinators) stays without
        QVERIFY(r.toJson().find("credit") == std::string::npos);
        // The credit is signed: a receipt that claims more credit does not verify.
        Receipt late{42, 7,    3,           512.0, 1800000000, sha256(std::string_view("h")),
                     {}, 1024, std::nullopt};
        late.sign(*key);
        auto lateBack = Receipt::fromJson(late.toJson());
        QVERIFY(lateBack.ok());
        QCOMPARE(lateBack->credit, std::optional<int64_t>(1024));
        QCOMPARE(lateBack->weight, 512.0);
        QVERIFY(lateBack->verify(key->publicKey()));
        lateBack->credit = 2048;
        QVERIFY(!lateBack->verify(key->publicKey()));
        std::string negative = late.toJson();
        const auto at = negative.find("\"credit\":1024");
        QVERIFY(at != std::string::npos);
        negative.replace(at, 13, "\"credit\":-1");
        QVERIFY(!Receipt::fromJson(negative));
    }
    // Version 6: the receipt of a piece names its shard, under the signature.
    void receiptShard() {
        auto key = SigningKey::generate();
        Receipt r{42, 7, 3, 1024.0, 1800000000, sha256(std::string_view("h")), {}, 1024, 2};
        r.sign(*key);
        QVERIFY(contains(r.toJson(), "\"shard\":2"));
        auto back = Receipt::fromJson(r.toJson());
        QVERIFY(back.ok());
        QCOMPARE(back->shard, std::optional<int>(2));
        QVERIFY(back->verify(key->publicKey()));
        back->shard = 1;
        QVERIFY(!back->verify(key->publicKey()));
        back->shard.reset();
        QVERIFY(!back->verify(key->publicKey()));
        auto bad = Receipt::fromJson(
            std::string(r.toJson()).replace(r.toJson().find("\"shard\":2"), 9, "\"shard\":64"));
        QVERIFY(!bad);
        QVERIFY2(contains(bad.error().message, "shard"), bad.error().message.c_str());
        // A whole result's receipt has none.
        Receipt whole{42, 7,    3,           1024.0, 1800000000, sha256(std::string_view("h")),
                      {}, 1024, std::nullopt};
        QVERIFY(!contains(whole.toJson(), "shard"));
    }
    void statusRoundTrip() {
        RunStatus s;
        s.runId = 1;
        s.round = 2;
        s.model = *ModelConfig::parse("L=1,NH=2,C=8,T=4,V=300");  // an odd vocabulary
        s.activeWorkers = 3;
        s.totalTokens = 1 << 20;
        s.workUnitSeconds = 30;
        s.batch = 8;
        s.seqLen = 4;
        s.innerStepsMin = 5;
        s.innerStepsMax = 50;
        s.tokenBytes = 2;
        s.history = {{0, 5.5, 2, 1000}, {1, std::nullopt, 1, 500}};
        s.resultEncoding = "int8";
        s.weightDeltas = "fp16";
        auto back = RunStatus::fromJson(s.toJson());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back->workUnitSeconds, 30);
        QCOMPARE(back->model, s.model);
        QCOMPARE(back->batch, 8);
        QCOMPARE(back->seqLen, 4);
        QCOMPARE(back->innerStepsMin, 5);
        QCOMPARE(back->innerStepsMax, 50);
        QCOMPARE(back->tokenBytes, 2);
        QCOMPARE(back->resultEncoding, std::string("int8"));
        QCOMPARE(back->weightDeltas, std::string("fp16"));
        for (const char* bad : {"\"result_encoding\":\"int4\"", "\"weight_deltas\":\"bf16\""}) {
            std::string odd = s.toJson();
            const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
            const auto at = odd.find(key);
            odd.replace(at, odd.find(',', at) - at, bad);
            QVERIFY2(!RunStatus::fromJson(odd), bad);
        }
        std::string wide = s.toJson();
        wide.replace(wide.find("\"token_bytes\":2"), 15, "\"token_bytes\":5");
        QVERIFY(!RunStatus::fromJson(wide));
        // From a coordinator that does not say: 0.
        std::string older = s.toJson();
        for (const char* key :
             {"\"inner_steps_max\":50,", "\"inner_steps_min\":5,", "\"token_bytes\":2,",
              ",\"result_encoding\":\"int8\"", ",\"weight_deltas\":\"fp16\""})
            older.erase(older.find(key), std::strlen(key));
        older.erase(older.find(",\"work_unit_seconds\":30"), 23);
        older.erase(older.find("\"batch\":8,"), 10);
        older.erase(older.find(",\"seq_len\":4"), 12);
        auto olderBack = RunStatus::fromJson(older);
        QVERIFY2(olderBack.ok(), olderBack.ok() ? "" : olderBack.error().message.c_str());
        QCOMPARE(olderBack->workUnitSeconds, 0);
        QCOMPARE(olderBack->batch, 0);
        QCOMPARE(olderBack->seqLen, 0);
        QCOMPARE(olderBack->innerStepsMax, 0);
        QCOMPARE(olderBack->tokenBytes, 0);
        QVERIFY(olderBack->resultEncoding.empty() && olderBack->weightDeltas.empty());
        QCOMPARE(back->history.size(), size_t(2));
        QVERIFY(back->history[0] == s.history[0]);
        QVERIFY(!back->history[1].valLoss.has_value());
        QVERIFY(contains(s.toJson(), "\"val_loss\":null"));
    }
};

QTEST_APPLESS_MAIN(TestNetProtocol)
#include "test_net_protocol.moc"
