// A run's tokens (DESIGN.md §4). Three kinds of corpus: text files as byte tokens, text files
// tokenized once with the run's SentencePiece model into llm.c-format shards in the state
// directory, or the operator's own llm.c shards (used where they lie). A new run's data is
// checked in full (prepareNewRun) before anything is written, so a refused corpus leaves no
// half-made run; then written (writeRunData) and described by rows of data_shards; at every
// start it is memory-mapped (RunData) for work assignment, the data route and the validation
// loss.
//
// Dimensions: T sequence length, V vocabulary.
#pragma once

#include "run_setup.hpp"
#include "state_dir.hpp"
#include "token_shard.hpp"
#include "tokenizer.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::coord {

// The corpus kinds, as runs.config_json's "data" names them (absent: bytes).
inline constexpr std::string_view kDataBytes = "bytes";
inline constexpr std::string_view kDataSentencePiece = "sentencepiece";
inline constexpr std::string_view kDataLlmc = "llmc";

// A slice of one token file in one split: a row of data_shards.
struct ShardRow {
    std::string split;           // "train" or "val"
    int64_t number = 0;          // train: the shard number of manifests and data URLs
    std::filesystem::path path;  // relative: inside the state directory
    int tokenBytes = 2;
    int64_t headerBytes = 0;
    int64_t fileBytes = 0;
    int64_t firstToken = 0;  // the slice is tokens [firstToken, firstToken + tokens) of the file
    int64_t tokens = 0;
    std::string fileSha256;  // hex, of the whole file: the data route's ETag
};

// A new run's data, checked, nothing written yet.
struct PreparedData {
    std::string kind{kDataBytes};
    std::vector<uint8_t> trainBytes, valBytes;     // bytes
    std::vector<uint16_t> trainTokens, valTokens;  // sentencepiece
    std::filesystem::path tokenizerSource;         // sentencepiece: the operator's model
    std::vector<ShardRow> shards;                  // llmc: the operator's files (absolute paths)
};

struct NewRun {
    RunSettings settings;
    PreparedData data;
};

// Settings and data of a new run from the configuration: V from the tokenizer (a --model that
// names another V is refused, naming both), every llm.c shard's header, size and tokens checked
// against V. Writes nothing.
Expected<NewRun> prepareNewRun(const CoordinatorConfig& config);

// Writes what the state directory keeps of a prepared run's data. files: what was written, for
// removal when the create fails after this.
struct WrittenData {
    std::vector<ShardRow> rows;  // none for byte text (data/shard-0.bin, data/validation.bin)
    std::vector<std::filesystem::path> files;
};
Expected<WrittenData> writeRunData(const StateDir& dirs, const PreparedData& data);

// SHA-256 (hex) over the train rows' file digests and slices: runs.train_sha256 of a token run.
std::string trainFingerprint(std::span<const ShardRow> rows);

// One served train shard: a slice of a mapped token file.
struct TrainShard {
    int64_t number = 0;
    TokenView tokens;  // the slice
    int64_t firstToken = 0;
    int64_t headerBytes = 0;
    ServedFile file;
};

// The run's train and validation splits, memory-mapped.
class RunData {
  public:
    // Byte text: data/shard-0.bin, checked against the run's size and SHA-256, and
    // data/validation.bin.
    static Expected<RunData> openBytes(const StateDir& dirs, int64_t trainBytes,
                                       const std::string& trainSha256);
    // Token shards, each checked against its row (size, header, slice).
    static Expected<RunData> openShards(const StateDir& dirs, std::span<const ShardRow> rows);

    std::span<const TrainShard> train() const { return m_train; }
    std::span<const TokenView> validation() const { return m_validation; }
    int64_t trainTokens() const { return m_trainEnds.empty() ? 0 : m_trainEnds.back(); }
    // Where each train shard ends in the train tokens laid end to end.
    std::span<const int64_t> trainEnds() const { return m_trainEnds; }
    // The train shard that holds token `global` of the train tokens laid end to end.
    const TrainShard& shardAt(int64_t global) const;
    int64_t shardStart(const TrainShard& shard) const;

  private:
    std::vector<TokenShard> m_files;
    std::vector<TrainShard> m_train;
    std::vector<TokenView> m_validation;
    std::vector<int64_t> m_trainEnds;
};

// The run's tokenizer file, when it was created with one (see Coordinator::tokenizerPath).
// stateDir: the run's state directory (read without its lock).
std::optional<std::filesystem::path> runTokenizerFile(const std::filesystem::path& stateDir,
                                                      const RunSettings& run);
// The tokenizer samples are written with: the run's file, bytes for a byte-level run, else none.
Expected<std::unique_ptr<Tokenizer>> runTokenizer(const std::filesystem::path& stateDir,
                                                  const RunSettings& run);

}  // namespace tandem::coord
