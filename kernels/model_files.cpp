#include "model_files.hpp"

#include "file_io.hpp"
#include "llmc_checkpoint.hpp"
#include "safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <map>
#include <set>

namespace tandem {

namespace fs = std::filesystem;

namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

Status fsyncDirectory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return makeError("cannot open " + dir.string() + " to flush it");
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0)
        return makeError("cannot flush " + dir.string());
    return {};
}

Status writeExportFiles(const ParameterLayout& layout, std::span<const float> parameters,
                        const ExportOptions& o, const fs::path& dir) {
    if (o.format == ModelFormat::Safetensors) {
        if (auto st = writeFileAtomically(dir / kSafetensorsFileName,
                                          serializeGpt2Safetensors(layout, parameters));
            !st)
            return st;
        const std::string config = gpt2ConfigJson(layout.config(), o.special);
        if (auto st = writeFileAtomically(
                dir / kGpt2ConfigFileName,
                std::span(reinterpret_cast<const uint8_t*>(config.data()), config.size()));
            !st)
            return st;
    } else {
        if (auto st = writeFileAtomically(dir / kLlmcFileName, serializeLlmc(layout, parameters));
            !st)
            return st;
    }
    if (o.tokenizer) {
        auto bytes = readFile(*o.tokenizer);
        if (!bytes)
            return makeError("tokenizer: " + bytes.error().message);
        if (auto st = writeFileAtomically(dir / o.tokenizer->filename(), *bytes); !st)
            return st;
    }
    return fsyncDirectory(dir);
}

// Hugging Face names as saved by GPT2Model ("wte.weight") or GPT2LMHeadModel
// ("transformer.wte.weight"); the attention mask buffers and the tied lm_head are not weights.
bool isIgnoredGpt2Name(const std::string& name) {
    return name == "lm_head.weight" || name.ends_with(".attn.bias") ||
           name.ends_with(".attn.masked_bias");
}

Expected<std::vector<float>> importSafetensors(std::span<const uint8_t> bytes,
                                               const ParameterLayout& layout,
                                               const std::string& what) {
    auto header = parseSafetensorsHeader(bytes);
    if (!header)
        return makeError(what + ": " + header.error().message);
    const std::string prefix =
        header->find("wte.weight") == nullptr && header->find("transformer.wte.weight") != nullptr
            ? "transformer."
            : "";
    const auto tensors = gpt2Tensors(layout);
    std::set<std::string> known;
    std::vector<const SafetensorsEntry*> entries;
    // Every shape first, so that a mismatch is found before any value is copied.
    for (const auto& t : tensors) {
        const std::string name = prefix + t.hfName;
        known.insert(name);
        const SafetensorsEntry* e = header->find(name);
        if (!e)
            return makeError(what + ": tensor " + name + " is missing (expected shape " +
                             shapeText(t.shape) + ")");
        if (e->shape != t.shape)
            return makeError(what + ": tensor " + name + " has shape " + shapeText(e->shape) +
                             ", the run's model expects " + shapeText(t.shape));
        if (e->dtype != "F32")
            return makeError(what + ": tensor " + name + " is " + e->dtype +
                             "; only F32 weights can be imported");
        entries.push_back(e);
    }
    for (const auto& e : header->entries) {
        const std::string bare = e.name.starts_with(prefix) ? e.name.substr(prefix.size()) : e.name;
        if (!known.count(e.name) && !isIgnoredGpt2Name(bare) && !isIgnoredGpt2Name(e.name))
            return makeError(what + ": tensor " + e.name +
                             " is not part of a GPT-2 model of this shape (" +
                             layout.config().describe() + ")");
    }
    std::vector<float> params(static_cast<size_t>(layout.parameterCount()), 0.0f);
    for (size_t i = 0; i < tensors.size(); ++i) {
        auto values = safetensorsFloats(bytes, *header, *entries[i]);
        if (!values)
            return makeError(what + ": " + values.error().message);
        gpt2ToTandem(tensors[i], values->data(), params.data() + tensors[i].tandem->offset);
    }
    return params;
}

}  // namespace

Expected<ModelFormat> parseModelFormat(std::string_view text) {
    if (text == "safetensors")
        return ModelFormat::Safetensors;
    if (text == "llmc")
        return ModelFormat::Llmc;
    return makeError("unknown model format '" + std::string(text) +
                     "'; expected safetensors or llmc");
}

const char* modelFormatName(ModelFormat format) {
    return format == ModelFormat::Safetensors ? "safetensors" : "llmc";
}

std::vector<uint8_t> serializeGpt2Safetensors(const ParameterLayout& layout,
                                              std::span<const float> parameters) {
    const auto tensors = gpt2Tensors(layout);
    std::vector<std::vector<float>> values;
    std::vector<SafetensorsTensor> out;
    values.reserve(tensors.size());
    for (const auto& t : tensors) {
        int64_t n = 1;
        for (int64_t d : t.shape)
            n *= d;
        values.emplace_back(static_cast<size_t>(n));
        tandemToGpt2(t, parameters.data() + t.tandem->offset, values.back().data());
        out.push_back({t.hfName, t.shape, values.back()});
    }
    return serializeSafetensors(out, {{"format", "pt"}});
}

Status exportModel(const ParameterLayout& layout, std::span<const float> parameters,
                   const ExportOptions& o) {
    if (static_cast<int64_t>(parameters.size()) != layout.parameterCount())
        return makeError("export: " + std::to_string(parameters.size()) +
                         " parameters given, the model has " +
                         std::to_string(layout.parameterCount()));
    std::error_code ec;
    if (fs::exists(o.outDir, ec))
        return makeError("export: " + o.outDir.string() +
                         " exists already; choose a path that does not");
    const fs::path parent = o.outDir.parent_path().empty() ? fs::path(".") : o.outDir.parent_path();
    if (!fs::is_directory(parent, ec))
        return makeError("export: the folder " + parent.string() + " does not exist");
    if (o.tokenizer && !fs::is_regular_file(*o.tokenizer, ec))
        return makeError("export: the tokenizer " + o.tokenizer->string() + " is not a file");
    const fs::path temp =
        parent / ("." + o.outDir.filename().string() + ".partial-" + std::to_string(::getpid()));
    fs::remove_all(temp, ec);
    if (!fs::create_directory(temp, ec))
        return makeError("export: cannot create " + temp.string() + ": " + ec.message());
    Status st = writeExportFiles(layout, parameters, o, temp);
    // RENAME_NOREPLACE: never replace a folder that appeared in the meantime.
    if (st &&
        ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, o.outDir.c_str(), RENAME_NOREPLACE) != 0)
        st = makeError("export: cannot rename " + temp.string() + " to " + o.outDir.string() +
                       ": " + std::error_code(errno, std::generic_category()).message());
    if (!st) {
        fs::remove_all(temp, ec);
        return st;
    }
    return fsyncDirectory(parent);
}

Expected<std::vector<float>> importModelBytes(std::span<const uint8_t> bytes,
                                              const ParameterLayout& layout,
                                              const std::string& what) {
    if (looksLikeLlmc(bytes)) {
        auto p = parseLlmc(bytes, layout);
        if (!p)
            return makeError(what + ": " + p.error().message);
        return p;
    }
    if (bytes.size() >= 9 && bytes[8] == '{')
        return importSafetensors(bytes, layout, what);
    if (bytes.size() >= 4 && bytes.size() < 9)
        return makeError(what + ": " + std::to_string(bytes.size()) +
                         " bytes are too few for a safetensors or llm.c model file");
    return makeError(what +
                     ": neither a safetensors file (8-byte header length, then '{') nor "
                     "an llm.c checkpoint (magic " +
                     std::to_string(kLlmcMagic) + ")");
}

Expected<std::vector<float>> importModel(const fs::path& path, const ParameterLayout& layout) {
    std::error_code ec;
    fs::path file = path;
    if (fs::is_directory(path, ec)) {
        file = path / kSafetensorsFileName;
        if (!fs::exists(file, ec))
            file = path / kLlmcFileName;
        if (!fs::exists(file, ec))
            return makeError(path.string() + " holds neither " + kSafetensorsFileName + " nor " +
                             kLlmcFileName);
    }
    auto bytes = readFile(file);
    if (!bytes)
        return bytes.error();
    return importModelBytes(*bytes, layout, file.string());
}

}  // namespace tandem
