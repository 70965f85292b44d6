// The engine's data directory files (core/unit_files.hpp): where each file lives, progress.json,
// results/<id>.json and the result file, and the moments kept across units. Each format is
// written and read back; a truncated, damaged or incomplete file gives an error that names the
// file, never a crash.
#include "unit_files.hpp"

#include "file_io.hpp"
#include "result_format.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tandem;
using namespace tandem::core;
namespace fs = std::filesystem;

namespace {

void writeRaw(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

std::string readRaw(const fs::path& path) {
    auto bytes = readFile(path);
    return bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
}

bool mentions(const Error& error, const fs::path& path) {
    return error.message.find(path.string()) != std::string::npos;
}

net::Manifest tinyManifest() {
    net::Manifest m;
    m.workUnitId = 17;
    m.runId = 3;
    m.model = ModelConfig::parse("L=1,NH=2,C=16,T=16").value();
    m.weightsSha256.fill(0xab);
    m.dataSha256.fill(0x01);
    m.uploadUrl = "/api/v1/work/17/result";
    return m;
}

}  // namespace

class TestUnitFiles : public QObject {
    Q_OBJECT

  private slots:
    void layout() {
        const DataDir d("/data");
        QCOMPARE(d.registrationFile(), fs::path("/data/registration.json"));
        QCOMPARE(d.resultFile(17), fs::path("/data/results/17.result"));
        QCOMPARE(d.resultInfoFile(17), fs::path("/data/results/17.json"));
        QCOMPARE(d.unitDir(17), fs::path("/data/work/17"));
        QCOMPARE(DataDir::manifestFile(d.unitDir(17)), fs::path("/data/work/17/manifest.json"));
        QCOMPARE(DataDir::progressFile(d.unitDir(17)), fs::path("/data/work/17/progress.json"));
        const net::Manifest m = tinyManifest();
        std::string abs, ones;
        for (int i = 0; i < 32; ++i) {
            abs += "ab";
            ones += "01";
        }
        QCOMPARE(d.weightsFile(m), fs::path("/data/cache/" + abs + ".weights"));
        QCOMPARE(d.dataFile(m), fs::path("/data/cache/" + ones + ".data"));
        QCOMPARE(d.optimizerFile(), fs::path("/data/optimizer.ckpt"));
        QCOMPARE(d.optimizerInfoFile(), fs::path("/data/optimizer.json"));
        QCOMPARE(DataDir::checkpointName(12), std::string("ckpt-12.ckpt"));
        QVERIFY(DataDir::isCheckpointName("ckpt-12.ckpt"));
        QVERIFY(!DataDir::isCheckpointName("progress.json"));
    }

    void progressRoundTrip() {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "progress.json";
        UnitProgress p;
        p.step = 12;
        p.samplerState = 0xfedcba9876543210ull;  // above 2^53: kept exact (as text)
        p.lossFirst = 5.5f;
        p.lossLast = 3.25f;
        p.lossSum = 51.75;
        p.tokens = 12 * 64;
        p.computeSeconds = 1.5;
        p.checkpointFile = "ckpt-12.ckpt";
        QVERIFY(writeProgress(file, p).ok());
        auto back = readProgress(file);
        QVERIFY2(back, back ? "" : back.error().message.c_str());
        QVERIFY(*back == p);
        // The losses are optional (no step trained yet).
        p.lossFirst.reset();
        p.lossLast.reset();
        QVERIFY(writeProgress(file, p).ok());
        back = readProgress(file);
        QVERIFY(back && *back == p);
        // The names on disk, which a build after this one must still read.
        const std::string text = readRaw(file);
        for (const char* key : {"\"step\":12", "\"sampler\":\"18364758544493064720\"",
                                "\"checkpoint\":\"ckpt-12.ckpt\"", "\"tokens\":768"})
            QVERIFY2(text.find(key) != std::string::npos, text.c_str());
    }

    void damagedProgressIsAnError() {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "progress.json";
        UnitProgress p;
        p.step = 3;
        p.checkpointFile = "ckpt-3.ckpt";
        QVERIFY(writeProgress(file, p).ok());
        const std::string whole = readRaw(file);

        writeRaw(file, whole.substr(0, whole.size() / 2));  // truncated
        auto r = readProgress(file);
        QVERIFY(!r);
        QVERIFY2(mentions(r.error(), file), r.error().message.c_str());

        writeRaw(file, "");
        r = readProgress(file);
        QVERIFY(!r && mentions(r.error(), file));

        writeRaw(file, R"({"step": 3})");  // incomplete
        r = readProgress(file);
        QVERIFY(!r);
        QVERIFY2(mentions(r.error(), file), r.error().message.c_str());

        writeRaw(file, R"({"step": "three", "sampler": "1", "loss_sum": 0, "tokens": 0,
                           "compute_seconds": 0, "checkpoint": ""})");  // wrong type
        r = readProgress(file);
        QVERIFY(!r && mentions(r.error(), file));

        writeRaw(file, R"({"step": 3, "sampler": "x", "loss_sum": 0, "tokens": 0,
                           "compute_seconds": 0, "checkpoint": ""})");  // not a number
        r = readProgress(file);
        QVERIFY(!r && mentions(r.error(), file));

        fs::remove(file);
        QVERIFY(!readProgress(file));
    }

    void restartKeepsTheUnitAndDropsItsProgress() {
        ActiveUnit a;
        a.manifest = tinyManifest();
        a.dir = "/data/work/17";
        a.downloaded = true;
        a.step = 5;
        a.lossFirst = 2;
        a.checkpointFile = "ckpt-5.ckpt";
        a.restart();
        QCOMPARE(a.manifest.workUnitId, int64_t{17});
        QCOMPARE(a.manifest.uploadUrl, tinyManifest().uploadUrl);
        QCOMPARE(a.dir, fs::path("/data/work/17"));
        QVERIFY(a.downloaded);
        QVERIFY(static_cast<const UnitProgress&>(a) == UnitProgress{});
    }

    void resultInfoRoundTripAndDamage() {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "17.json";
        const ResultInfo info{17, "/api/v1/work/17/result", 3, 9, {}};
        QVERIFY(writeResultInfo(file, info).ok());
        auto back = readResultInfo(file);
        QVERIFY(back && *back == info);

        const std::string whole = readRaw(file);
        writeRaw(file, whole.substr(0, whole.size() - 3));
        auto r = readResultInfo(file);
        QVERIFY(!r);
        QVERIFY2(mentions(r.error(), file), r.error().message.c_str());

        writeRaw(file, R"({"work_unit_id": 17})");  // no upload URL
        r = readResultInfo(file);
        QVERIFY(!r);
        QVERIFY2(mentions(r.error(), file), r.error().message.c_str());

        writeRaw(file, R"([17, "/x"])");  // not an object
        QVERIFY(!readResultInfo(file));
    }

    // A sharded run's result: results/<id>.result holds the header (version 2) and the table,
    // each piece its own file; every one is checked, and removing the result takes them all.
    void piecedPendingResult() {
        QTemporaryDir tmp;
        const DataDir files(fs::path(tmp.path().toStdString()));
        fs::create_directories(files.resultsDir());
        net::ResultHeader h;
        h.workUnitId = 17;
        h.parameterCount = 700;
        h.tokens = 64;
        h.steps = 4;
        std::vector<uint8_t> payload(1400);
        for (size_t i = 0; i < payload.size(); ++i)
            payload[i] = static_cast<uint8_t>(i % 2 ? 0x3c : i % 251);
        const auto ranges = net::pieceRanges(700, 3);
        auto pieced = net::buildPiecedResult(h, payload, ranges);
        QVERIFY(pieced);
        ResultInfo info{17, "https://a0/p/0", 3, 9, {}};
        for (size_t k = 0; k < 3; ++k) {
            info.shards.push_back({ranges[k], "https://a" + std::to_string(k) + "/p"});
            QVERIFY(writeFileAtomically(files.pieceFile(17, int(k)),
                                        net::pieceBody(*pieced, payload, k))
                        .ok());
        }
        auto head = net::serializeResultHeader(pieced->header);
        std::vector<uint8_t> headFile(head.begin(), head.end());
        headFile.insert(headFile.end(), pieced->table.begin(), pieced->table.end());
        QVERIFY(writeFileAtomically(files.resultFile(17), headFile).ok());
        QVERIFY(writeResultInfo(files.resultInfoFile(17), info).ok());
        QCOMPARE(readResultInfo(files.resultInfoFile(17)).value(), info);
        auto key = net::SigningKey::generate();
        QVERIFY(key);
        auto p = loadPendingResult(files, files.resultInfoFile(17), *key);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QCOMPARE(p->pieces.size(), size_t(3));
        QCOMPARE(p->pieces[2].uploadUrl, std::string("https://a2/p"));
        QCOMPARE(p->pieces[1].file, files.pieceFile(17, 1));
        int64_t bytes = 0;
        for (const auto& piece : p->pieces)
            bytes += piece.bytes;
        QCOMPARE(p->bytes, bytes);
        QCOMPARE(p->digest, net::resultDigest(pieced->header));
        QVERIFY(net::verifySignature(key->publicKey(), p->digest, p->signature));

        // A damaged piece, or one missing: not sendable, the file named.
        auto body = readFile(files.pieceFile(17, 1)).value();
        body.back() ^= 1;
        QVERIFY(writeFileAtomically(files.pieceFile(17, 1), body).ok());
        auto damaged = loadPendingResult(files, files.resultInfoFile(17), *key);
        QVERIFY(!damaged);
        QVERIFY2(mentions(damaged.error(), files.pieceFile(17, 1)),
                 damaged.error().message.c_str());
        fs::remove(files.pieceFile(17, 1));
        QVERIFY(!loadPendingResult(files, files.resultInfoFile(17), *key));

        removeResultFiles(files, 17);
        QVERIFY(!fs::exists(files.resultInfoFile(17)));
        QVERIFY(!fs::exists(files.resultFile(17)));
        QVERIFY(!fs::exists(files.pieceFile(17, 0)));
        QVERIFY(!fs::exists(files.pieceFile(17, 2)));
    }

    void pendingResultIsCheckedAndSigned() {
        QTemporaryDir tmp;
        const DataDir files(fs::path(tmp.path().toStdString()));
        fs::create_directories(files.resultsDir());
        net::ResultHeader h;
        h.workUnitId = 17;
        h.parameterCount = 8;
        h.tokens = 64;
        h.steps = 4;
        h.lossFirst = 5;
        h.lossLast = 4;
        h.lossMean = 4.5f;
        const std::vector<uint16_t> payload = {1, 2, 3, 4, 5, 6, 7, 8};
        const std::vector<uint8_t> body = net::buildResult(h, payload);
        QVERIFY(writeFileAtomically(files.resultFile(17), body).ok());
        QVERIFY(writeResultInfo(files.resultInfoFile(17), {17, "/up/17", 3, 9, {}}).ok());
        auto key = net::SigningKey::generate();
        QVERIFY(key);

        auto p = loadPendingResult(files, files.resultInfoFile(17), *key);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QCOMPARE(p->workUnitId, int64_t{17});
        QCOMPARE(p->uploadUrl, std::string("/up/17"));
        QCOMPARE(p->file, files.resultFile(17));
        QCOMPARE(p->bytes, static_cast<int64_t>(body.size()));
        QCOMPARE(p->steps, int64_t{4});
        QCOMPARE(p->lossLast, 4.0f);
        auto header = net::parseResultHeader(body);
        QVERIFY(header);
        QVERIFY(p->digest == net::resultDigest(*header));
        QVERIFY(net::verifySignature(key->publicKey(), p->digest, p->signature));
        QVERIFY(!p->stillWantedChecked);

        // One payload byte changed: damaged.
        std::vector<uint8_t> bad = body;
        bad.back() ^= 1;
        QVERIFY(writeFileAtomically(files.resultFile(17), bad).ok());
        auto r = loadPendingResult(files, files.resultInfoFile(17), *key);
        QVERIFY(!r);
        QVERIFY2(r.error().message.find("damaged") != std::string::npos &&
                     mentions(r.error(), files.resultFile(17)),
                 r.error().message.c_str());
        // Truncated: the header no longer matches the size.
        bad.assign(body.begin(), body.end() - 2);
        QVERIFY(writeFileAtomically(files.resultFile(17), bad).ok());
        QVERIFY(!loadPendingResult(files, files.resultInfoFile(17), *key));
        // Shorter than a header.
        bad.assign(body.begin(), body.begin() + 20);
        QVERIFY(writeFileAtomically(files.resultFile(17), bad).ok());
        r = loadPendingResult(files, files.resultInfoFile(17), *key);
        QVERIFY(!r && mentions(r.error(), files.resultFile(17)));
        // No result file beside its .json.
        QVERIFY(writeFileAtomically(files.resultFile(17), body).ok());
        QVERIFY(loadPendingResult(files, files.resultInfoFile(17), *key));
        removePendingResult(*p);
        QVERIFY(!fs::exists(files.resultFile(17)));
        QVERIFY(!fs::exists(files.resultInfoFile(17)));
        QVERIFY(!loadPendingResult(files, files.resultInfoFile(17), *key));
    }

    void momentsCarryOnlyToTheSameRunModelAndDevice() {
        QTemporaryDir tmp;
        const DataDir files(fs::path(tmp.path().toStdString()));
        const net::Manifest m = tinyManifest();
        const size_t P = static_cast<size_t>(m.model.parameterCount());
        Checkpoint ck;
        ck.config = m.model;
        ck.parameters.assign(P, 0.5f);
        OptimizerState opt;
        opt.m.assign(P, 0.25f);
        opt.v.assign(P, 0.125f);
        opt.step = 7;
        ck.optimizer = opt;
        QVERIFY(!carriedMoments(files, m, "cpu"));  // nothing kept yet
        QVERIFY(saveMoments(files, m, "cpu", ck).ok());

        auto carried = carriedMoments(files, m, "cpu");
        QVERIFY(carried);
        QCOMPARE(carried->step, int64_t{7});
        QVERIFY(carried->m == opt.m && carried->v == opt.v);

        QVERIFY(!carriedMoments(files, m, "cuda:0"));  // another device
        net::Manifest otherRun = m;
        otherRun.runId = 4;
        QVERIFY(!carriedMoments(files, otherRun, "cpu"));
        net::Manifest otherModel = m;
        otherModel.model = ModelConfig::parse("L=2,NH=2,C=16,T=16").value();
        QVERIFY(!carriedMoments(files, otherModel, "cpu"));

        // A damaged description or checkpoint carries nothing (and does not throw).
        const std::string info = readRaw(files.optimizerInfoFile());
        writeRaw(files.optimizerInfoFile(), info.substr(0, info.size() / 2));
        QVERIFY(!carriedMoments(files, m, "cpu"));
        writeRaw(files.optimizerInfoFile(), info);
        QVERIFY(carriedMoments(files, m, "cpu"));
        fs::resize_file(files.optimizerFile(), 16);
        QVERIFY(!carriedMoments(files, m, "cpu"));
    }

    void jsonReaderRefusesWhatIsNotAnObject() {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "x.json";
        writeRaw(file, R"({"a": 1})");
        auto j = readJson(file);
        QVERIFY(j && (*j)["a"] == 1);
        writeRaw(file, "42");
        QVERIFY(!readJson(file));
        writeRaw(file, "{\"a\":");
        auto r = readJson(file);
        QVERIFY(!r && mentions(r.error(), file));
    }
};

QTEST_APPLESS_MAIN(TestUnitFiles)
#include "test_unit_files.moc"
