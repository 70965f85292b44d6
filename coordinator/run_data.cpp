// A run's tokens: preparing a new run's corpus (every check before any write), writing it, and
// mapping it at every start.
#include "run_data.hpp"

#include "corpus.hpp"
#include "crypto.hpp"
#include "file_io.hpp"
#include "tokenizer.hpp"
#include "tokenizer_training.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace tandem::coord {
namespace fs = std::filesystem;

namespace {

constexpr size_t kScanChunk = size_t{16} << 20;  // bytes hashed and checked at a time

// Whether the --model text fixes V itself ("V=" given, or a preset whose V is not 256).
bool modelNamesVocab(std::string_view text, const ModelConfig& parsed) {
    return text.starts_with("V=") || text.find(",V=") != std::string_view::npos ||
           parsed.vocabSize != 256;
}

// train/val lengths of one sequence of n tokens: a tail of `fraction` held out, at least two
// windows each.
Expected<int64_t> validationTail(int64_t n, double fraction, int T, const char* unit) {
    const int64_t minPart = 2 * (int64_t{T} + 1);
    int64_t valLen = static_cast<int64_t>(static_cast<double>(n) * fraction);
    valLen = std::max(valLen, minPart);
    if (n - valLen < minPart)
        return makeError("the corpus has " + std::to_string(n) + " " + unit + "; at least " +
                         std::to_string(valLen + minPart) +
                         " are needed for training and validation windows of " +
                         std::to_string(T + 1) + " " + unit);
    return valLen;
}

// The text, encoded in pieces that end at a newline (SentencePiece is given lines, as it was
// trained on them), as uint16 ids.
Expected<std::vector<uint16_t>> encodeCorpus(const Tokenizer& tok,
                                             const std::vector<uint8_t>& text) {
    std::vector<uint16_t> out;
    out.reserve(text.size() / 3);
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = std::min(text.size(), pos + (size_t{1} << 20));
        while (end < text.size() && text[end - 1] != '\n')
            ++end;
        auto ids = tok.encode(
            std::string_view(reinterpret_cast<const char*>(text.data()) + pos, end - pos));
        if (!ids)
            return ids.error();
        for (int32_t id : *ids)
            out.push_back(static_cast<uint16_t>(id));
        pos = end;
    }
    return out;
}

// The llm.c shards named by paths: files as given, directories' *.bin files sorted by path.
Expected<std::vector<fs::path>> shardFiles(std::span<const fs::path> paths) {
    std::vector<fs::path> files;
    for (const fs::path& p : paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> below;
            for (auto it = fs::recursive_directory_iterator(p, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                if (it->is_regular_file(ec) && it->path().extension() == ".bin")
                    below.push_back(it->path());
            if (ec)
                return makeError("cannot list shard directory '" + p.string() +
                                 "': " + ec.message());
            if (below.empty())
                return makeError("shard directory '" + p.string() +
                                 "' holds no .bin files; expected llm.c token shards");
            std::sort(below.begin(), below.end());
            files.insert(files.end(), below.begin(), below.end());
        } else if (fs::is_regular_file(p, ec)) {
            files.push_back(p);
        } else {
            return makeError("token shard '" + p.string() +
                             "' does not exist; expected an llm.c shard or a directory of them");
        }
    }
    return files;
}

// Opens and checks one llm.c shard against V, hashing it on the way (one pass).
Expected<ShardRow> checkShard(const fs::path& path, int V) {
    auto shard = TokenShard::openLlmc(path);
    if (!shard)
        return shard.error();
    const auto bytes = std::span<const uint8_t>(shard->tokens().data - shard->headerBytes(),
                                                static_cast<size_t>(shard->fileBytes()));
    net::Sha256 hash;
    hash.update(bytes.first(static_cast<size_t>(shard->headerBytes())));
    const TokenView tokens = shard->tokens();
    const int64_t perChunk = static_cast<int64_t>(kScanChunk / 2);
    for (int64_t first = 0; first < tokens.count; first += perChunk) {
        const TokenView part = tokens.slice(first, std::min(perChunk, tokens.count - first));
        hash.update(part.bytes());
        if (const int64_t at = firstTokenAtOrAbove(part, V); at >= 0) {
            const int64_t offset = first + at;
            return makeError("token shard '" + path.string() + "': token " +
                             std::to_string(part[at]) + " at token offset " +
                             std::to_string(offset) + " (byte " +
                             std::to_string(kLlmcHeaderBytes + 2 * offset) +
                             ") is not below the model's vocabulary size V=" + std::to_string(V) +
                             "; give --model with the V the shards were tokenized for");
        }
    }
    ShardRow row;
    row.split = path.filename().string().find("_val_") != std::string::npos ? "val" : "train";
    row.path = fs::absolute(path);
    row.tokenBytes = 2;
    row.headerBytes = kLlmcHeaderBytes;
    row.fileBytes = shard->fileBytes();
    row.tokens = tokens.count;
    row.fileSha256 = net::toHex(hash.finish());
    return row;
}

Expected<PreparedData> prepareShards(const CoordinatorConfig& cfg, int V, int T) {
    if (V > 65536)
        return makeError("the model's vocabulary V=" + std::to_string(V) +
                         " does not fit llm.c's uint16 token shards (at most 65536 ids)");
    auto files = shardFiles(cfg.shards);
    if (!files)
        return files.error();
    PreparedData d;
    d.kind = kDataLlmc;
    std::vector<ShardRow> train, val;
    for (const fs::path& f : *files) {
        auto row = checkShard(f, V);
        if (!row)
            return row.error();
        if (row->tokens < int64_t{T} + 1)
            return makeError("token shard '" + f.string() + "' holds " +
                             std::to_string(row->tokens) + " tokens, fewer than one window of " +
                             std::to_string(T + 1));
        (row->split == "val" ? val : train).push_back(std::move(*row));
    }
    if (train.empty())
        return makeError(
            "every token shard given is a validation shard (its name contains "
            "'_val_'); expected at least one train shard");
    if (val.empty()) {
        // A held-out tail of the last train shard: the fraction of all train tokens, at most
        // half that shard, at least two windows.
        int64_t total = 0;
        for (const auto& r : train)
            total += r.tokens;
        ShardRow& last = train.back();
        const int64_t minPart = 2 * (int64_t{T} + 1);
        const int64_t want =
            static_cast<int64_t>(static_cast<double>(total) * cfg.validationFraction);
        const int64_t valLen = std::max(minPart, std::min(want, last.tokens / 2));
        if (last.tokens - valLen < int64_t{T} + 1)
            return makeError("no validation shard (no name contains '_val_') and the last shard '" +
                             last.path.string() + "' holds " + std::to_string(last.tokens) +
                             " tokens, too few to hold out a validation tail of " +
                             std::to_string(valLen));
        ShardRow tail = last;
        tail.split = "val";
        tail.firstToken = last.tokens - valLen;
        tail.tokens = valLen;
        last.tokens -= valLen;
        val.push_back(std::move(tail));
    }
    for (size_t i = 0; i < train.size(); ++i)
        train[i].number = static_cast<int64_t>(i);
    for (size_t i = 0; i < val.size(); ++i)
        val[i].number = static_cast<int64_t>(i);
    d.shards = std::move(train);
    d.shards.insert(d.shards.end(), val.begin(), val.end());
    return d;
}

}  // namespace

Expected<NewRun> prepareNewRun(const CoordinatorConfig& cfg) {
    if (cfg.corpus.empty() && cfg.shards.empty())
        return makeError("the state directory " + cfg.stateDir.string() +
                         " holds no run yet; give --corpus with text files or directories");
    if (!cfg.corpus.empty() && !cfg.shards.empty())
        return makeError("give either --corpus (text) or --shards (llm.c token shards), not both");
    auto parsed = ModelConfig::parse(cfg.model);
    if (!parsed)
        return parsed.error();
    std::unique_ptr<Tokenizer> tok;
    std::optional<int> vocab;
    if (!cfg.tokenizer.empty()) {
        auto loaded = loadTokenizer(cfg.tokenizer);
        if (!loaded)
            return loaded.error();
        const int V = (*loaded)->vocabSize();
        if (modelNamesVocab(cfg.model, *parsed) && parsed->vocabSize != V)
            return makeError("the tokenizer '" + cfg.tokenizer.string() +
                             "' has V=" + std::to_string(V) + " tokens, but --model '" + cfg.model +
                             "' has V=" + std::to_string(parsed->vocabSize) +
                             "; give a model with V=" + std::to_string(V) + " or leave V out");
        if (!cfg.shards.empty() && parsed->vocabSize != V)
            return makeError("the tokenizer '" + cfg.tokenizer.string() +
                             "' has V=" + std::to_string(V) + " tokens, but --model '" + cfg.model +
                             "' has V=" + std::to_string(parsed->vocabSize) +
                             "; the shards' tokenizer must match the model");
        if (V > 65536)
            return makeError("the tokenizer '" + cfg.tokenizer.string() +
                             "' has V=" + std::to_string(V) +
                             " tokens; token shards hold uint16 ids (at most 65536)");
        vocab = V;
        tok = std::move(*loaded);
    }
    auto settings = settingsForNewRun(cfg, vocab);
    if (!settings)
        return settings.error();
    NewRun run{*settings, {}};
    const int T = settings->seqLen;
    if (!cfg.shards.empty()) {
        auto d = prepareShards(cfg, settings->model.vocabSize, T);
        if (!d)
            return d.error();
        run.data = std::move(*d);
        run.data.tokenizerSource = cfg.tokenizer;  // decodes samples; goes beside exports
    } else {
        auto text = loadTextCorpus(cfg.corpus);
        if (!text)
            return makeError("corpus: " + text.error().message);
        if (tok) {
            auto tokens = encodeCorpus(*tok, *text);
            if (!tokens)
                return tokens.error();
            const int64_t n = static_cast<int64_t>(tokens->size());
            auto valLen = validationTail(n, cfg.validationFraction, T, "tokens");
            if (!valLen)
                return valLen.error();
            run.data.kind = kDataSentencePiece;
            run.data.trainTokens.assign(tokens->begin(), tokens->end() - *valLen);
            run.data.valTokens.assign(tokens->end() - *valLen, tokens->end());
            run.data.tokenizerSource = cfg.tokenizer;
        } else {
            const int64_t n = static_cast<int64_t>(text->size());
            auto valLen = validationTail(n, cfg.validationFraction, T, "bytes");
            if (!valLen)
                return valLen.error();
            run.data.trainBytes.assign(text->begin(), text->end() - *valLen);
            run.data.valBytes.assign(text->end() - *valLen, text->end());
        }
    }
    run.settings.dataKind = run.data.kind;
    return run;
}

Expected<WrittenData> writeRunData(const StateDir& dirs, const PreparedData& d) {
    WrittenData w;
    auto write = [&](const fs::path& path, std::span<const uint8_t> bytes) -> Status {
        if (auto st = writeFileAtomically(path, bytes); !st)
            return st;
        w.files.push_back(path);
        return {};
    };
    auto fail = [&](const Error& e) -> Expected<WrittenData> {
        std::error_code ec;
        for (const auto& f : w.files)
            fs::remove(f, ec);
        return e;
    };
    if (d.kind == kDataBytes) {
        if (auto st = write(dirs.trainShard(), d.trainBytes); !st)
            return fail(st.error());
        if (auto st = write(dirs.validationText(), d.valBytes); !st)
            return fail(st.error());
        return w;
    }
    if (d.kind == kDataLlmc) {
        w.rows = d.shards;
        if (!d.tokenizerSource.empty()) {
            auto model = readFile(d.tokenizerSource);
            if (!model)
                return fail(model.error());
            if (auto st = write(dirs.tokenizerModel(), *model); !st)
                return fail(st.error());
        }
        return w;
    }
    auto model = readFile(d.tokenizerSource);
    if (!model)
        return fail(model.error());
    if (auto st = write(dirs.tokenizerModel(), *model); !st)
        return fail(st.error());
    int64_t number = 0;
    for (const auto* part : {&d.trainTokens, &d.valTokens}) {
        const bool train = part == &d.trainTokens;
        const auto bytes = llmcShardBytes(*part);
        const fs::path relative =
            fs::path("data") / (train ? "tokens_train_000000.bin" : "tokens_val_000000.bin");
        if (auto st = write(dirs.root() / relative, bytes); !st)
            return fail(st.error());
        ShardRow row;
        row.split = train ? "train" : "val";
        row.number = train ? number : 0;
        row.path = relative;
        row.headerBytes = kLlmcHeaderBytes;
        row.fileBytes = static_cast<int64_t>(bytes.size());
        row.tokens = static_cast<int64_t>(part->size());
        row.fileSha256 = net::toHex(net::sha256(bytes));
        w.rows.push_back(std::move(row));
    }
    return w;
}

std::string trainFingerprint(std::span<const ShardRow> rows) {
    std::string text;
    for (const auto& r : rows)
        if (r.split == "train")
            text += r.fileSha256 + ":" + std::to_string(r.firstToken) + "+" +
                    std::to_string(r.tokens) + ";";
    return net::toHex(net::sha256(text));
}

Expected<RunData> RunData::openBytes(const StateDir& dirs, int64_t trainBytes,
                                     const std::string& trainSha256) {
    RunData d;
    auto train = TokenShard::openBytes(dirs.trainShard());
    if (!train)
        return train.error();
    const auto digest = net::sha256(train->tokens().bytes());
    if (train->fileBytes() != trainBytes || net::toHex(digest) != trainSha256)
        return makeError(dirs.trainShard().string() +
                         " does not match the run (size or SHA-256 differ); the state directory "
                         "is damaged");
    auto val = TokenShard::openBytes(dirs.validationText());
    if (!val)
        return val.error();
    d.m_train.push_back(
        TrainShard{0, train->tokens(), 0, 0, ServedFile{dirs.trainShard(), trainBytes, digest}});
    d.m_validation.push_back(val->tokens());
    d.m_trainEnds.push_back(trainBytes);
    d.m_files.push_back(std::move(*train));
    d.m_files.push_back(std::move(*val));
    return d;
}

Expected<RunData> RunData::openShards(const StateDir& dirs, std::span<const ShardRow> rows) {
    RunData d;
    int64_t end = 0;
    for (const ShardRow& r : rows) {
        const fs::path path = r.path.is_relative() ? dirs.root() / r.path : r.path;
        auto shard = TokenShard::openLlmc(path);
        if (!shard)
            return makeError("the run's " + shard.error().message +
                             " (the run reads its shards where they were when it was created)");
        auto digest = net::digestFromHex(r.fileSha256);
        if (shard->fileBytes() != r.fileBytes || !digest ||
            r.firstToken + r.tokens > shard->tokens().count)
            return makeError("the run's token shard '" + path.string() +
                             "' has changed since the run was created (expected " +
                             std::to_string(r.fileBytes) + " bytes, found " +
                             std::to_string(shard->fileBytes()) + ")");
        const TokenView slice = shard->tokens().slice(r.firstToken, r.tokens);
        if (r.split == "train") {
            d.m_train.push_back(TrainShard{r.number, slice, r.firstToken, r.headerBytes,
                                           ServedFile{path, r.fileBytes, *digest}});
            end += r.tokens;
            d.m_trainEnds.push_back(end);
        } else {
            d.m_validation.push_back(slice);
        }
        d.m_files.push_back(std::move(*shard));
    }
    if (d.m_train.empty() || d.m_validation.empty())
        return makeError(
            "database: the run's data_shards rows name no train or no validation "
            "shard; the state directory is damaged");
    return d;
}

const TrainShard& RunData::shardAt(int64_t global) const {
    const auto it = std::upper_bound(m_trainEnds.begin(), m_trainEnds.end(), global);
    const size_t i = std::min(static_cast<size_t>(it - m_trainEnds.begin()), m_train.size() - 1);
    return m_train[i];
}

int64_t RunData::shardStart(const TrainShard& shard) const {
    const size_t i = static_cast<size_t>(&shard - m_train.data());
    return i == 0 ? 0 : m_trainEnds[i - 1];
}

std::optional<std::filesystem::path> runTokenizerFile(const std::filesystem::path& stateDir,
                                                      const RunSettings& run) {
    const auto file = StateDir::tokenizerModelIn(stateDir);
    std::error_code ec;
    if (run.dataKind == kDataBytes || !std::filesystem::exists(file, ec))
        return std::nullopt;
    return file;
}

Expected<std::unique_ptr<Tokenizer>> runTokenizer(const std::filesystem::path& stateDir,
                                                  const RunSettings& run) {
    if (run.dataKind == kDataBytes)
        return makeByteTokenizer();
    auto file = runTokenizerFile(stateDir, run);
    if (!file)
        return makeError(
            "the run has no tokenizer (its llm.c shards were given without "
            "--tokenizer), so what its model writes cannot be read");
    return loadTokenizer(*file);
}

}  // namespace tandem::coord
