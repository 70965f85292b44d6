// Writes the seed corpus of every fuzz target: small valid inputs made by the project's own
// writers (so they follow the formats as they change), plus hand-written requests and text.
// Usage: tandem-fuzz-seeds <directory>; writes <directory>/<target>/seed-<n>.
#include "checkpoint.hpp"
#include "gpt2_tokenizer.hpp"
#include "held_work.hpp"
#include "llmc_checkpoint.hpp"
#include "model.hpp"
#include "protocol.hpp"
#include "result_format.hpp"
#include "safetensors.hpp"
#include "settings.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

// token_shard.hpp repeats llmc_checkpoint.hpp's kLlmcHeaderBytes: its writer is declared here.
namespace tandem {
std::vector<uint8_t> llmcShardBytes(std::span<const uint16_t> tokens);
}

namespace {

using namespace tandem;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

std::map<std::string, std::vector<Bytes>> g_seeds;

void add(const std::string& target, uint8_t selector, std::string_view body) {
    Bytes b{selector};
    b.insert(b.end(), body.begin(), body.end());
    g_seeds[target].push_back(std::move(b));
}
void add(const std::string& target, Bytes prefix, const Bytes& body) {
    prefix.insert(prefix.end(), body.begin(), body.end());
    g_seeds[target].push_back(std::move(prefix));
}

ModelConfig tinyModel() {
    ModelConfig c;
    c.layers = 1;
    c.heads = 1;
    c.channels = 4;
    c.maxSeqLen = 4;
    c.vocabSize = 8;
    return c;
}

std::vector<float> ramp(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = 0.01f * static_cast<float>(i) - 1.0f;
    return v;
}

void httpSeeds() {
    add("fuzz_http_text", 0, "hello w\xc3\xb6rld\n\x01\\ \xff\xc2\x85 end");
    add("fuzz_http_text", 1, "120");
    add("fuzz_http_text", 1, "Wed, 21 Oct 2026 07:28:00 GMT");
    add("fuzz_http_text", 2, "bytes 100-199/1000");
    add("fuzz_http_text", 2, "bytes */1000");
    add("fuzz_http_text", 3, "abc-DEF_123");
    for (const char* r : {
             "GET /v1/files/1 HTTP/1.1\r\nHost: x\r\nRange: bytes=10-20\r\n\r\n",
             "GET /v1/files/1 HTTP/1.1\r\nRange: bytes=-5\r\nIf-Range: \"abc\"\r\n\r\n",
             "GET /v1/files/99999999999999999999 HTTP/1.1\r\n\r\n",
             "GET /v1/speedtest?bytes=%ff HTTP/1.1\r\n\r\n",
             "GET /v1/speedtest?bytes=12&x=%e2%82%ac HTTP/1.1\r\n\r\n",
             "GET /v1/%ff%0a HTTP/1.1\r\n\r\n",
             "POST /v1/clients HTTP/1.1\r\nContent-Length: +5\r\n\r\nabcde",
             "PUT /v1/results/5 HTTP/1.1\r\nAuthorization: Bearer abc\r\nContent-Length: "
             "10\r\n\r\n0123456789",
             "PUT /v1/results/5 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
             "PUT /v1/results/5 HTTP/1.1\r\nTransfer-Encoding: "
             "chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
         })
        g_seeds["fuzz_http_request"].push_back(Bytes(r, r + std::strlen(r)));
}

void protocolSeeds() {
    auto key = net::SigningKey::generate();
    add("fuzz_protocol_json", 0, net::ApiError{"not_found", "no such unit"}.toJson());
    net::RegisterRequest reg{"alice's laptop", key->publicKey(), "cpu: 8 cores"};
    add("fuzz_protocol_json", 1, reg.toJson());
    add("fuzz_protocol_json", 2, net::RegisterResponse{7, "token", key->publicKey()}.toJson());
    add("fuzz_protocol_json", 3, net::WorkRequest{"cpu", 1 << 30, 1234.5, 1 << 30}.toJson());
    net::Manifest m;
    m.workUnitId = 42;
    m.runId = 1;
    m.baseVersion = 3;
    m.model = *ModelConfig::parse("tiny");
    m.weightsUrl = "/v1/runs/1/weights/3";
    m.weightsSha256 = net::sha256(std::string_view("w"));
    m.weightsBytes = 123456;
    m.weightsUrls = {"/blobs/sha256/" + net::toHex(m.weightsSha256),
                     "https://mirror.example/blobs/sha256/" + net::toHex(m.weightsSha256)};
    m.dataUrls = {"/blobs/sha256/" + net::toHex(net::sha256(std::string_view("shard")))};
    m.dataUrl = "/v1/runs/1/data/0";
    m.dataLength = 5000;
    m.dataTokenBytes = 2;
    m.dataHeaderBytes = 1024;
    m.dataSha256 = net::sha256(std::string_view("d"));
    m.innerSteps = 50;
    m.batch = 8;
    m.seqLen = m.model.maxSeqLen;
    m.lr = LrSchedule{6e-4f, 6e-5f, 5, 50};
    m.seed = 12345;
    m.deadlineUnix = 1800000000;
    m.heartbeatSeconds = 30;
    m.uploadUrl = "/v1/results/42";
    m.maxUploadBytes = 999999;
    m.sign(*key);
    add("fuzz_protocol_json", 4, m.toJson());
    add("fuzz_protocol_json", 5, net::ProgressReport{10, 3.5f, 900}.toJson());
    add("fuzz_protocol_json", 6, net::ProgressReply{"abandon", "the round closed"}.toJson());
    net::Receipt r{42, 7, 3, 1000, 1800000000, net::sha256(std::string_view("r")), {}, 2000, 1};
    r.sign(*key);
    add("fuzz_protocol_json", 7, r.toJson());
    net::RunStatus s;
    s.runId = 1;
    s.round = 3;
    s.model = m.model;
    s.history = {{1, 5.5, 2, 1000}, {2, std::nullopt, 1, 500}};
    s.latestExport = net::ExportInfo{"/srv/model.safetensors", "safetensors", 2, 1800000000};
    s.latestSample = net::SampleSummary{2, "Once", " upon a time"};
    add("fuzz_protocol_json", 8, s.toJson());
    net::HeldWorkUnits held{{{42, "req-1", 3, 10, 1800000000, 1800000600}}};
    add("fuzz_protocol_json", 9, held.toJson());
    add("fuzz_protocol_json", 10, "L=2,NH=4,C=128,T=64,V=50257");
}

void fileSeeds() {
    const ParameterLayout layout(tinyModel());
    const auto params = ramp(layout.parameterCount());

    Checkpoint ckpt{tinyModel(), params, std::nullopt};
    add("fuzz_checkpoint", Bytes{1}, serializeCheckpoint(ckpt));
    ckpt.optimizer =
        OptimizerState{ramp(layout.parameterCount()), ramp(layout.parameterCount()), 9};
    add("fuzz_checkpoint", Bytes{1}, serializeCheckpoint(ckpt));

    const auto a = ramp(6), b = ramp(4);
    g_seeds["fuzz_safetensors"].push_back(
        serializeSafetensors({{"wte", {2, 3}, a}, {"ln.bias", {4}, b}}, {{"format", "pt"}}));

    g_seeds["fuzz_llmc_checkpoint"].push_back(serializeLlmc(layout, params));

    const std::vector<uint16_t> tokens = {1, 2, 3, 300, 50256, 65535};
    add("fuzz_token_shard", Bytes{0}, llmcShardBytes(tokens));
    add("fuzz_token_shard", 1, "byte text");

    net::ResultHeader h;
    h.workUnitId = 7;
    h.parameterCount = 8;
    h.tokens = 4096;
    h.steps = 2;
    h.lossFirst = 5.5f;
    h.lossLast = 5.0f;
    h.lossMean = 5.2f;
    const std::vector<uint16_t> halves = {0x3c00, 0xbc00, 0,      0x8000,
                                          0x7bff, 0x0001, 0x3555, 0x4000};
    add("fuzz_result_upload", Bytes{3, 16}, net::buildResult(h, halves));
    add("fuzz_result_upload", Bytes{3 | 4, 1}, net::buildResult(h, halves));
    // A pieced result (format version 2) of 600 fp16 values in 2 pieces: header, table, piece 0.
    h.parameterCount = 600;
    const std::vector<uint8_t> wide(1200, 0x3c);
    const auto ranges = net::pieceRanges(600, 2);
    if (auto pieced = net::buildPiecedResult(h, wide, ranges))
        add("fuzz_result_upload", Bytes{2 << 3, 64}, net::pieceBody(*pieced, wide, 0));
}

void tokenizerSeeds() {
    // llm.c's tokenizer file, version 2: the 256 bytes, three merges, end-of-text.
    const std::vector<std::string> merges = {"th", " t", "the", "<|endoftext|>"};
    std::vector<uint32_t> header(256, 0);
    header[0] = kGpt2TokenizerMagic;
    header[1] = 2;
    header[2] = static_cast<uint32_t>(256 + merges.size());
    header[3] = header[2] - 1;
    Bytes file(reinterpret_cast<const uint8_t*>(header.data()),
               reinterpret_cast<const uint8_t*>(header.data() + header.size()));
    for (int i = 0; i < 256; ++i)
        file.insert(file.end(), {1, static_cast<uint8_t>(i)});
    for (const auto& m : merges) {
        file.push_back(static_cast<uint8_t>(m.size()));
        file.insert(file.end(), m.begin(), m.end());
    }
    const std::string text = "the theory, isn't it? 42 \xc3\xa9t\xc3\xa9";
    Bytes withText = file;
    withText.insert(withText.end(), text.begin(), text.end());
    add("fuzz_tokenizer", Bytes{0, static_cast<uint8_t>(text.size())}, withText);
    add("fuzz_tokenizer", Bytes{1, static_cast<uint8_t>(text.size())}, withText);
    add("fuzz_tokenizer", 2, "I'm   here's 123abc!!  \n\tend");
}

// A JSON text and a binary file as one input: [selector, length / 4, JSON padded to 4n, binary].
void addPair(uint8_t selector, std::string json, const Bytes& binary) {
    json.resize((json.size() + 3) / 4 * 4, ' ');
    Bytes b{selector, static_cast<uint8_t>(json.size() / 4)};
    b.insert(b.end(), json.begin(), json.end());
    b.insert(b.end(), binary.begin(), binary.end());
    g_seeds["fuzz_worker_files"].push_back(std::move(b));
}

void workerFileSeeds() {
    const std::string t = "fuzz_worker_files";
    add(t, 0,
        std::string(1, '\0') +
            R"({"step":3,"sampler":"12345","loss_sum":1.5,"tokens":100,)"
            R"("compute_seconds":2.5,"checkpoint":"ckpt-3.ckpt","loss_first":5.5,)"
            R"("loss_last":5.0})");
    const std::string info = R"({"work_unit_id":7,"upload_url":"/v1/results/7","run_id":1,)"
                             R"("base_version":3})";
    add(t, 1, std::string(1, '\0') + info);
    net::ResultHeader h;
    h.workUnitId = 7;
    h.parameterCount = 4;
    h.tokens = 100;
    h.steps = 2;
    const std::vector<uint16_t> halves = {0x3c00, 0xbc00, 0, 0x8000};
    addPair(2, info, net::buildResult(h, halves));
    add(t, 3, std::string(1, '\0') + R"({"request_id":"0123456789abcdef"})");
    const ParameterLayout layout(tinyModel());
    Checkpoint ckpt{
        tinyModel(), ramp(layout.parameterCount()),
        OptimizerState{ramp(layout.parameterCount()), ramp(layout.parameterCount()), 4}};
    addPair(4, R"({"run_id":1,"device":"cpu","model":")" + tinyModel().describe() + "\"}",
            serializeCheckpoint(ckpt));
}

void settingsSeeds() {
    add("fuzz_settings", 0, core::serializeSettings(core::Settings{}));
    core::Settings s;
    s.device = "cuda:0";
    s.uploadLimitBytesPerSecond = 1 << 20;
    s.proxy = "socks5h://user:pw@proxy:1080";
    s.coordinatorUrl = "https://coord.example:8443/base";
    s.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    s.unknownKeys["rules.future"] = "[1,2]";
    add("fuzz_settings", 0, core::serializeSettings(s));
    add("fuzz_settings", 3, "18:05");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
        return 2;
    }
    httpSeeds();
    protocolSeeds();
    fileSeeds();
    tokenizerSeeds();
    settingsSeeds();
    workerFileSeeds();
    size_t written = 0;
    for (const auto& [target, seeds] : g_seeds) {
        const fs::path dir = fs::path(argv[1]) / target;
        fs::create_directories(dir);
        for (size_t i = 0; i < seeds.size(); ++i) {
            std::ofstream out(dir / ("seed-" + std::to_string(i)),
                              std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char*>(seeds[i].data()),
                      static_cast<std::streamsize>(seeds[i].size()));
            if (!out) {
                std::fprintf(stderr, "cannot write %s\n", (dir / "seed").c_str());
                return 1;
            }
            ++written;
        }
    }
    std::printf("wrote %zu seeds for %zu targets under %s\n", written, g_seeds.size(), argv[1]);
    return 0;
}
