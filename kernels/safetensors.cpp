#include "safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

namespace tandem {

static_assert(std::endian::native == std::endian::little, "safetensors data is little endian");

using nlohmann::json;

namespace {

// Bytes per element of the dtypes the format defines; 0 for a name it does not define.
int dtypeBytes(const std::string& dtype) {
    static const std::map<std::string, int> sizes{
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
        {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
    auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

uint64_t readLe64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = (v << 8) | p[i];
    return v;
}

std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

Error bad(const std::string& what) {
    return Error{"safetensors: " + what};
}

// Parses the header JSON; `duplicate` gets the first key that appears twice in one object (the
// format forbids it, and nlohmann would silently keep the last one).
json parseHeaderJson(const std::string& text, std::string& duplicate) {
    std::vector<std::set<std::string>> keysPerObject;
    auto watch = [&](int, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::object_start)
            keysPerObject.emplace_back();
        else if (event == json::parse_event_t::object_end && !keysPerObject.empty())
            keysPerObject.pop_back();
        else if (event == json::parse_event_t::key && !keysPerObject.empty() &&
                 !keysPerObject.back().insert(parsed.get<std::string>()).second &&
                 duplicate.empty())
            duplicate = parsed.get<std::string>();
        return true;
    };
    return json::parse(text, watch, false);
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(const std::string& name) const {
    for (const auto& e : entries)
        if (e.name == name)
            return &e;
    return nullptr;
}

bool looksLikeSafetensors(std::span<const uint8_t> bytes) {
    if (bytes.size() < 9)
        return false;
    const uint64_t n = readLe64(bytes.data());
    return n >= 2 && n <= kSafetensorsMaxHeader && n <= bytes.size() - 8 && bytes[8] == '{';
}

Expected<SafetensorsHeader> parseSafetensorsHeader(std::span<const uint8_t> file) {
    if (file.size() < 8)
        return bad("the file has " + std::to_string(file.size()) +
                   " bytes, fewer than the 8-byte header length");
    const uint64_t n = readLe64(file.data());
    if (n > kSafetensorsMaxHeader)
        return bad("the header length " + std::to_string(n) + " exceeds the format's limit of " +
                   std::to_string(kSafetensorsMaxHeader) + " bytes");
    if (n > file.size() - 8)
        return bad("the header length " + std::to_string(n) + " runs past the end of the " +
                   std::to_string(file.size()) + "-byte file (truncated?)");
    if (n == 0 || file[8] != '{')
        return bad("the header does not start with '{'");
    const std::string text(reinterpret_cast<const char*>(file.data() + 8), n);
    std::string duplicate;
    json j = parseHeaderJson(text, duplicate);
    if (j.is_discarded() || !j.is_object())
        return bad("the header is not a JSON object");
    if (!duplicate.empty())
        return bad("the header names '" + duplicate + "' twice (keys must be unique)");
    SafetensorsHeader h;
    h.bufferStart = static_cast<int64_t>(8 + n);
    const int64_t bufferSize = static_cast<int64_t>(file.size()) - h.bufferStart;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        const json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object())
                return bad("__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    return bad("__metadata__ value '" + m.key() + "' is not a string");
                h.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
            !v.contains("data_offsets") || !v["dtype"].is_string() || !v["shape"].is_array() ||
            !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
            return bad("tensor '" + name + "' lacks dtype, shape or data_offsets [begin, end]");
        SafetensorsEntry e;
        e.name = name;
        e.dtype = v["dtype"].get<std::string>();
        const int elementBytes = dtypeBytes(e.dtype);
        if (elementBytes == 0)
            return bad("tensor '" + name + "' has the unknown dtype '" + e.dtype + "'");
        // Element count with an overflow guard: no real tensor comes near 2^62 bytes.
        int64_t count = 1;
        for (const json& d : v["shape"]) {
            if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
                return bad("tensor '" + name + "' has a shape entry that is not a size");
            e.shape.push_back(d.get<int64_t>());
            if (count > 0 && e.shape.back() > (int64_t{1} << 62) / count)
                return bad("tensor '" + name + "' has a shape too large to address");
            count *= e.shape.back();
        }
        for (const json& o : v["data_offsets"])
            if (!o.is_number_unsigned())
                return bad("tensor '" + name + "' has data_offsets that are not byte offsets");
        e.begin = v["data_offsets"][0].get<int64_t>();
        e.end = v["data_offsets"][1].get<int64_t>();
        if (e.begin > e.end || e.end > bufferSize)
            return bad("tensor '" + name + "' has data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] outside the " + std::to_string(bufferSize) +
                       "-byte buffer (truncated?)");
        if (e.end - e.begin != count * elementBytes)
            return bad("tensor '" + name + "' of " + e.dtype + " shape " + shapeText(e.shape) +
                       " needs " + std::to_string(count * elementBytes) +
                       " bytes, its offsets give " + std::to_string(e.end - e.begin));
        h.entries.push_back(std::move(e));
    }
    std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    int64_t expected = 0;
    for (const auto& e : h.entries) {
        if (e.begin != expected)
            return bad("tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
                       " of the buffer, expected " + std::to_string(expected) +
                       (e.begin < expected ? " (it overlaps another tensor)"
                                           : " (a hole between tensors)"));
        expected = e.end;
    }
    if (expected != bufferSize)
        return bad("the tensors cover " + std::to_string(expected) + " bytes of the " +
                   std::to_string(bufferSize) +
                   "-byte buffer; the format allows no trailing bytes");
    return h;
}

Expected<std::vector<float>> safetensorsFloats(std::span<const uint8_t> file,
                                               const SafetensorsHeader& header,
                                               const SafetensorsEntry& entry) {
    if (entry.dtype != "F32")
        return bad("tensor '" + entry.name + "' is " + entry.dtype + "; only F32 is supported");
    std::vector<float> out(static_cast<size_t>((entry.end - entry.begin) / 4));
    std::memcpy(out.data(), file.data() + header.bufferStart + entry.begin, out.size() * 4);
    return out;
}

std::vector<uint8_t> serializeSafetensors(const std::vector<SafetensorsTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
    // An ordered object, so the header lists the tensors in buffer order.
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    int64_t offset = 0;
    for (const auto& t : tensors) {
        const int64_t bytes = static_cast<int64_t>(t.data.size()) * 4;
        header[t.name] = {
            {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::vector<uint8_t> out(8 + text.size() + static_cast<size_t>(offset));
    const uint64_t n = text.size();
    for (int i = 0; i < 8; ++i)
        out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
    std::memcpy(out.data() + 8, text.data(), text.size());
    uint8_t* p = out.data() + 8 + text.size();
    for (const auto& t : tensors) {
        std::memcpy(p, t.data.data(), t.data.size() * 4);
        p += t.data.size() * 4;
    }
    return out;
}

}  // namespace tandem
