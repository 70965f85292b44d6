#include "gpt2_tokenizer.hpp"

#include "file_io.hpp"

#include <cstring>
#include <limits>

namespace tandem {

namespace {

constexpr size_t kHeaderBytes = 256 * sizeof(uint32_t);

uint32_t readU32(std::span<const uint8_t> bytes, size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);  // little-endian on every supported platform
    return v;
}

enum class CharClass { Letter, Digit, Space, Other };

CharClass classify(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80)
        return CharClass::Letter;
    if (c >= '0' && c <= '9')
        return CharClass::Digit;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
        return CharClass::Space;
    return CharClass::Other;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at text[i], or 0.
size_t contraction(std::string_view text, size_t i) {
    if (text[i] != '\'' || i + 1 >= text.size())
        return 0;
    const std::string_view rest = text.substr(i + 1);
    for (std::string_view two : {"re", "ve", "ll"})
        if (rest.starts_with(two))
            return 3;
    const char c = rest[0];
    return (c == 's' || c == 't' || c == 'm' || c == 'd') ? 2 : 0;
}

}  // namespace

Expected<Gpt2Tokenizer> Gpt2Tokenizer::load(const std::filesystem::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();  // names the path
    auto parsed = parse(*bytes);
    if (!parsed)
        return makeError(path.string() + ": " + parsed.error().message);
    return parsed;
}

Expected<Gpt2Tokenizer> Gpt2Tokenizer::parse(std::span<const uint8_t> file) {
    if (file.size() < kHeaderBytes)
        return makeError("not an llm.c tokenizer file: " + std::to_string(file.size()) +
                         " bytes, shorter than its 1024-byte header");
    const uint32_t magic = readU32(file, 0), version = readU32(file, 4);
    if (magic != kGpt2TokenizerMagic)
        return makeError("not an llm.c tokenizer file: magic " + std::to_string(magic) +
                         ", expected " + std::to_string(kGpt2TokenizerMagic));
    if (version != 1 && version != 2)
        return makeError("llm.c tokenizer version " + std::to_string(version) +
                         " is not supported (1 or 2)");
    const uint32_t count = readU32(file, 8);
    if (count < 256 || count > (1u << 20))
        return makeError("llm.c tokenizer: vocabulary size " + std::to_string(count) +
                         " is outside [256, 2^20]");
    Gpt2Tokenizer t;
    if (version == 2) {
        const uint32_t eot = readU32(file, 12);
        if (eot >= count)
            return makeError("llm.c tokenizer: end-of-text id " + std::to_string(eot) +
                             " is outside the vocabulary of " + std::to_string(count));
        t.m_endOfText = static_cast<int>(eot);
    }
    t.m_tokens.reserve(count);
    size_t at = kHeaderBytes;
    for (uint32_t i = 0; i < count; ++i) {
        if (at >= file.size())
            return makeError("llm.c tokenizer: truncated at token " + std::to_string(i) + " of " +
                             std::to_string(count));
        const size_t len = file[at++];
        if (len == 0 || at + len > file.size())
            return makeError("llm.c tokenizer: token " + std::to_string(i) +
                             (len == 0 ? " is empty" : " runs past the end of the file"));
        t.m_tokens.emplace_back(reinterpret_cast<const char*>(file.data() + at), len);
        at += len;
    }
    if (at != file.size())
        return makeError("llm.c tokenizer: " + std::to_string(file.size() - at) +
                         " bytes after the last token");
    for (int32_t id = 0; id < static_cast<int32_t>(count); ++id)
        if (id != t.m_endOfText)
            t.m_ids.emplace(t.m_tokens[id], id);  // keeps the lowest id of duplicate bytes
    for (int b = 0; b < 256; ++b) {
        auto it = t.m_ids.find(std::string(1, static_cast<char>(b)));
        if (it == t.m_ids.end())
            return makeError("llm.c tokenizer: no token for the byte " + std::to_string(b) +
                             ", so some text cannot be encoded");
        t.m_byteIds[b] = it->second;
    }
    return t;
}

std::vector<std::string_view> Gpt2Tokenizer::splitPieces(std::string_view text) {
    std::vector<std::string_view> pieces;
    const size_t n = text.size();
    auto cls = [&](size_t i) { return classify(static_cast<unsigned char>(text[i])); };
    auto runOf = [&](size_t i, CharClass c) {
        while (i < n && cls(i) == c)
            ++i;
        return i;
    };
    size_t i = 0;
    while (i < n) {
        size_t end;
        if (size_t len = contraction(text, i); len > 0) {
            end = i + len;
        } else if (cls(i) == CharClass::Space &&
                   !(text[i] == ' ' && i + 1 < n && cls(i + 1) != CharClass::Space)) {
            // \s+(?!\S)|\s+ : a run of white space leaves its last character to the word after.
            end = runOf(i, CharClass::Space);
            if (end < n && end - i > 1)
                --end;
        } else {
            const size_t start = text[i] == ' ' ? i + 1 : i;  // " ?" before a word
            end = runOf(start, cls(start));
        }
        pieces.push_back(text.substr(i, end - i));
        i = end;
    }
    return pieces;
}

void Gpt2Tokenizer::encodePiece(std::string_view piece, std::vector<int32_t>& out) const {
    // parts[k] is a byte range of the piece; merge the pair whose join has the lowest id.
    std::vector<std::string_view> parts;
    parts.reserve(piece.size());
    for (size_t k = 0; k < piece.size(); ++k)
        parts.push_back(piece.substr(k, 1));
    while (parts.size() > 1) {
        int32_t best = std::numeric_limits<int32_t>::max();
        size_t at = 0;
        for (size_t k = 0; k + 1 < parts.size(); ++k) {
            std::string joined(parts[k].data(), parts[k].size() + parts[k + 1].size());
            if (auto it = m_ids.find(joined); it != m_ids.end() && it->second < best) {
                best = it->second;
                at = k;
            }
        }
        if (best == std::numeric_limits<int32_t>::max())
            break;
        parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
        parts.erase(parts.begin() + static_cast<ptrdiff_t>(at) + 1);
    }
    for (std::string_view p : parts) {
        auto it = m_ids.find(std::string(p));
        if (it != m_ids.end()) {
            out.push_back(it->second);
        } else {  // cannot happen for single bytes, which parse() checked
            for (unsigned char b : p)
                out.push_back(m_byteIds[b]);
        }
    }
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
    std::vector<int32_t> out;
    for (std::string_view piece : splitPieces(text))
        encodePiece(piece, out);
    return out;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> tokens) const {
    std::string text;
    for (int32_t id : tokens)
        if (id >= 0 && id < vocabSize())
            text += m_tokens[static_cast<size_t>(id)];
    return text;
}

}  // namespace tandem
