// Model export and import (kernels/model_files.hpp and the formats under it): round trips
// bit-exact in both formats, the safetensors reader against hand-built files, and every kind
// of bad input refused with a message that names what was expected and what was found, leaving
// nothing behind. The exported files' meaning is checked independently by check_export.py.
#include "llmc_checkpoint.hpp"
#include "model_files.hpp"
#include "random.hpp"
#include "safetensors.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace tandem;
namespace fs = std::filesystem;

namespace {

const ModelConfig kModel{2, 2, 8, 6, 300};  // L, NH, C, T, V

std::vector<float> randomParameters(const ParameterLayout& layout, uint64_t seed) {
    std::vector<float> p(static_cast<size_t>(layout.parameterCount()));
    Rng rng(seed);
    for (float& x : p)
        x = rng.normal();
    // The padded wte rows are zero in every model (initialised so, never trained).
    const ModelConfig& m = layout.config();
    std::fill(p.begin() + int64_t{m.vocabSize} * m.channels,
              p.begin() + int64_t{m.paddedVocab()} * m.channels, 0.0f);
    return p;
}

std::vector<uint8_t> bytesOf(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void writeBytes(const fs::path& path, std::span<const uint8_t> bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a header written by hand and a buffer.
std::vector<uint8_t> handMade(const std::string& header, std::span<const uint8_t> buffer) {
    std::vector<uint8_t> out(8);
    for (int i = 0; i < 8; ++i)
        out[static_cast<size_t>(i)] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), buffer.begin(), buffer.end());
    return out;
}

std::string errorOf(std::span<const uint8_t> bytes, const ParameterLayout& layout) {
    auto r = importModelBytes(bytes, layout, "input");
    return r ? std::string("(no error)") : r.error().message;
}

bool reportContains(const std::string& text, const std::string& part) {
    if (text.find(part) != std::string::npos)
        return true;
    qWarning("'%s' lacks '%s'", text.c_str(), part.c_str());
    return false;
}

#define EXPECT_CONTAINS(text, part) QVERIFY(reportContains((text), (part)))

}  // namespace

class TestModelFiles : public QObject {
    Q_OBJECT

  private slots:
    void formatNames() {
        QVERIFY(parseModelFormat("safetensors") &&
                *parseModelFormat("safetensors") == ModelFormat::Safetensors);
        QVERIFY(parseModelFormat("llmc") && *parseModelFormat("llmc") == ModelFormat::Llmc);
        auto bad = parseModelFormat("gguf");
        QVERIFY(!bad);
        EXPECT_CONTAINS(bad.error().message, "'gguf'; expected safetensors or llmc");
    }

    // The reader against a file written by hand from the specification: two tensors, metadata,
    // header padded with spaces.
    void safetensorsReaderHandMade() {
        const float a[2] = {1.5f, -2.0f};
        const float b[3] = {3.0f, 4.25f, 0.5f};
        std::vector<uint8_t> buffer(20);
        std::memcpy(buffer.data(), b, 12);  // b first in the buffer, a after it
        std::memcpy(buffer.data() + 12, a, 8);
        const std::string header =
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
            R"("__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[3,1],"data_offsets":[0,12]}}   )";
        const auto file = handMade(header, buffer);
        QVERIFY(looksLikeSafetensors(file));
        auto h = parseSafetensorsHeader(file);
        QVERIFY2(h, h ? "" : h.error().message.c_str());
        QCOMPARE(h->metadata.at("format"), std::string("pt"));
        QCOMPARE(h->entries.size(), size_t{2});
        QCOMPARE(h->entries[0].name, std::string("b"));  // in buffer order
        QCOMPARE(h->entries[0].shape, (std::vector<int64_t>{3, 1}));
        auto va = safetensorsFloats(file, *h, *h->find("a"));
        QVERIFY(va);
        QCOMPARE(*va, (std::vector<float>{1.5f, -2.0f}));
        auto vb = safetensorsFloats(file, *h, *h->find("b"));
        QCOMPARE(*vb, (std::vector<float>{3.0f, 4.25f, 0.5f}));
    }

    void safetensorsWriterLayout() {
        const std::vector<float> x{1, 2, 3, 4, 5, 6};
        const auto bytes = serializeSafetensors(
            {{"x", {2, 3}, x}, {"y", {1}, std::span(x).first(1)}}, {{"k", "v"}});
        uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        QCOMPARE(n % 8, uint64_t{0});  // the buffer starts 8-aligned
        QCOMPARE(bytes.size(), size_t(8 + n + 28));
        float first = 0;
        std::memcpy(&first, bytes.data() + 8 + n + 20, 4);  // x[5] at buffer bytes 20..24
        QCOMPARE(first, 6.0f);
        auto h = parseSafetensorsHeader(bytes);
        QVERIFY(h);
        QCOMPARE(h->find("y")->begin, int64_t{24});
    }

    void safetensorsBadHeaders() {
        const std::vector<uint8_t> eight(8, 0);
        struct Case {
            const char* header;
            size_t buffer;
            const char* message;
        } cases[] = {
            {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8, "not a JSON object"},
            {R"([1,2])", 0, "does not start with '{'"},
            {R"({"a":{"dtype":"F32","shape":[2]}})", 8, "lacks dtype, shape or data_offsets"},
            {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'Q4'"},
            {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
             "needs 12 bytes, its offsets give 8"},
            {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             8, "overlaps"},
            {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "a hole"},
            {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8, "no trailing bytes"},
            {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8,
             "outside the 8-byte buffer (truncated?)"},
            {R"({"__metadata__":{"n":1}})", 0, "is not a string"},
            // The specification forbids duplicate keys; nlohmann alone would keep the last one.
            {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
             8, "names 'a' twice"},
            {R"({"a":{"dtype":"F32","shape":[2],"shape":[2],"data_offsets":[0,8]}})", 8,
             "names 'shape' twice"},
        };
        for (const auto& c : cases) {
            auto h = parseSafetensorsHeader(handMade(c.header, std::span(eight).first(c.buffer)));
            QVERIFY2(!h, c.header);
            EXPECT_CONTAINS(h.error().message, c.message);
        }
        std::vector<uint8_t> huge(16, 0);
        huge[4] = 0x10;  // 2^36 bytes of header
        auto h = parseSafetensorsHeader(huge);
        QVERIFY(!h);
        EXPECT_CONTAINS(h.error().message, "exceeds the format's limit of 100000000 bytes");
        auto shortFile = parseSafetensorsHeader(std::span(eight).first(5));
        EXPECT_CONTAINS(shortFile.error().message, "fewer than the 8-byte header length");
    }

    void roundTripSafetensors() { roundTrip(ModelFormat::Safetensors, kSafetensorsFileName); }
    void roundTripLlmc() { roundTrip(ModelFormat::Llmc, kLlmcFileName); }

    void llmcHeader() {
        const ParameterLayout layout(kModel);
        const auto bytes = serializeLlmc(layout, randomParameters(layout, 3));
        auto h = parseLlmcHeader(bytes);
        QVERIFY(h);
        QCOMPARE(h->maxT, 6);
        QCOMPARE(h->vocab, 300);
        QCOMPARE(h->layers, 2);
        QCOMPARE(h->heads, 2);
        QCOMPARE(h->channels, 8);
        QCOMPARE(h->paddedVocab, 320);  // every stored wte row: 300 padded to a multiple of 64
        QCOMPARE(bytes.size(), size_t(1024 + 4 * layout.parameterCount()));
    }

    void llmcBadInputs() {
        const ParameterLayout layout(kModel);
        const auto good = serializeLlmc(layout, randomParameters(layout, 4));
        auto withWord = [&](int index, int32_t value) {
            auto b = good;
            std::memcpy(b.data() + 4 * index, &value, 4);
            return b;
        };
        auto magic = parseLlmcHeader(withWord(0, 20240328));
        EXPECT_CONTAINS(magic.error().message, "magic 20240328, expected 20240326");
        EXPECT_CONTAINS(errorOf(withWord(0, 20240328), layout), "neither a safetensors file");
        EXPECT_CONTAINS(errorOf(withWord(1, 5), layout), "version 5 (bf16), expected 3 (fp32)");
        EXPECT_CONTAINS(errorOf(std::span(good).first(good.size() - 4), layout), "(truncated)");
        EXPECT_CONTAINS(errorOf(std::span(good).first(100), layout),
                        "fewer than the 1024-byte header");
        EXPECT_CONTAINS(errorOf(withWord(6, 16), layout),
                        "tensor wte has shape (320, 16), the run's model expects (320, 8)");
        EXPECT_CONTAINS(errorOf(withWord(2, 12), layout),
                        "tensor wpe has shape (12, 8), the run's model expects (6, 8)");
        EXPECT_CONTAINS(errorOf(withWord(4, 3), layout),
                        "tensor ln1w has shape (3, 8), the run's model expects (2, 8)");
        EXPECT_CONTAINS(errorOf(withWord(3, 256), layout),
                        "vocabulary V 256, the run's model has V 300");
        EXPECT_CONTAINS(errorOf(withWord(5, 4), layout), "4 attention heads");
    }

    // An llm.c file with padded rows (Vp > V): the real rows are taken, the padding dropped.
    void llmcPaddedVocabulary() {
        const ModelConfig padded{2, 2, 8, 6, 320};  // as if V were 300 padded to 320
        const ParameterLayout paddedLayout(padded);
        auto params = randomParameters(paddedLayout, 5);
        auto bytes = serializeLlmc(paddedLayout, params);
        const int32_t v = 300;
        std::memcpy(bytes.data() + 12, &v, 4);  // header V = 300, padded V stays 320
        const ParameterLayout layout(kModel);
        auto imported = importModelBytes(bytes, layout, "padded");
        QVERIFY2(imported, imported ? "" : imported.error().message.c_str());
        const int64_t C = 8;
        for (int64_t i = 0; i < 300 * C; ++i)
            QCOMPARE((*imported)[size_t(i)], params[size_t(i)]);
        // Past wte the tensors follow at the right places: wpe and the final LayerNorm.
        QCOMPARE((*imported)[size_t(layout.wpe())], params[size_t(paddedLayout.wpe())]);
        QCOMPARE(imported->back(), params.back());
    }

    void safetensorsImportChecks() {
        const ParameterLayout layout(kModel);
        const auto params = randomParameters(layout, 6);
        const auto good = serializeGpt2Safetensors(layout, params);
        // Another model's file: the first tensor whose shape differs is named with both shapes.
        const ModelConfig wider{2, 2, 16, 6, 300};
        const ParameterLayout widerLayout(wider);
        const auto other = serializeGpt2Safetensors(widerLayout, randomParameters(widerLayout, 7));
        EXPECT_CONTAINS(errorOf(other, layout),
                        "tensor wte.weight has shape (300, 16), the run's model expects (300, 8)");
        const ModelConfig deeper{3, 2, 8, 6, 300};
        const ParameterLayout deeperLayout(deeper);
        EXPECT_CONTAINS(
            errorOf(serializeGpt2Safetensors(deeperLayout, randomParameters(deeperLayout, 8)),
                    layout),
            "tensor h.2.ln_1.weight is not part of a GPT-2 model");
        EXPECT_CONTAINS(errorOf(serializeGpt2Safetensors(layout, params), ParameterLayout(deeper)),
                        "tensor h.2.ln_1.weight is missing (expected shape (8))");
        EXPECT_CONTAINS(errorOf(std::span(good).first(good.size() - 1), layout), "(truncated?)");
        // Saved by GPT2LMHeadModel: "transformer." names, the tied lm_head and the mask buffers.
        std::vector<std::vector<float>> keep;
        std::vector<SafetensorsTensor> renamed;
        auto h = parseSafetensorsHeader(good);
        for (const auto& e : h->entries) {
            keep.push_back(*safetensorsFloats(good, *h, e));
            renamed.push_back({"transformer." + e.name, e.shape, keep.back()});
        }
        const std::vector<float> mask(36, 1.0f);
        renamed.push_back({"transformer.h.0.attn.bias", {1, 1, 6, 6}, mask});
        renamed.push_back({"lm_head.weight", h->find("wte.weight")->shape, keep.front()});
        auto imported = importModelBytes(serializeSafetensors(renamed, {}), layout, "hf");
        QVERIFY2(imported, imported ? "" : imported.error().message.c_str());
        QVERIFY(*imported == params);
    }

    void exportLeavesNothingOnFailure() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const ParameterLayout layout(kModel);
        const auto params = randomParameters(layout, 9);
        ExportOptions o;
        o.outDir = root / "out";
        o.tokenizer = root / "missing.model";
        auto st = exportModel(layout, params, o);
        QVERIFY(!st);
        EXPECT_CONTAINS(st.error().message, "missing.model is not a file");
        QCOMPARE(std::distance(fs::directory_iterator(root), fs::directory_iterator()), 0L);
        o.tokenizer.reset();
        fs::create_directory(root / "out");
        st = exportModel(layout, params, o);
        EXPECT_CONTAINS(st.error().message, "exists already");
        QVERIFY(fs::is_empty(root / "out"));
        o.outDir = root / "no" / "such" / "folder";
        st = exportModel(layout, params, o);
        EXPECT_CONTAINS(st.error().message, "does not exist");
        EXPECT_CONTAINS(errorOf(std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, layout),
                        "neither a safetensors file");
    }

  private:
    void roundTrip(ModelFormat format, const char* fileName) {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const ParameterLayout layout(kModel);
        const auto params = randomParameters(layout, 11);
        writeBytes(root / "spm.model", std::vector<uint8_t>{'s', 'p', 'm', 0, 1, 2});
        ExportOptions o;
        o.format = format;
        o.outDir = root / "first";
        o.tokenizer = root / "spm.model";
        auto st = exportModel(layout, params, o);
        QVERIFY2(st, st ? "" : st.error().message.c_str());
        QCOMPARE(bytesOf(root / "first" / "spm.model"), bytesOf(root / "spm.model"));
        QCOMPARE(fs::exists(root / "first" / kGpt2ConfigFileName),
                 format == ModelFormat::Safetensors);
        // Nothing but the export itself: no temporary folder left beside it.
        QCOMPARE(std::distance(fs::directory_iterator(root), fs::directory_iterator()), 2L);
        auto imported = importModel(root / "first", layout);  // the folder
        QVERIFY2(imported, imported ? "" : imported.error().message.c_str());
        QVERIFY(std::memcmp(imported->data(), params.data(), params.size() * 4) == 0);
        auto fromFile = importModel(root / "first" / fileName, layout);
        QVERIFY(fromFile && *fromFile == *imported);
        o.outDir = root / "second";
        o.tokenizer.reset();
        QVERIFY(exportModel(layout, *imported, o));
        QCOMPARE(bytesOf(root / "second" / fileName), bytesOf(root / "first" / fileName));
    }
};

QTEST_GUILESS_MAIN(TestModelFiles)
#include "test_model_files.moc"
