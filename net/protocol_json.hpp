// What the protocol's JSON parsers share (net/ internal): the field Reader that remembers the
// first problem, the bounds, and the model and object helpers. protocol.cpp parses the work
// messages, run_status.cpp the run's status and samples.
#pragma once

#include "expected.hpp"
#include "model_config.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::net::protocol_json {

using nlohmann::json;

// Reads fields of one JSON object and remembers the first problem, so that a parser reads like
// a list of fields and reports "field 'x': expected ..., found ...".
class Reader {
  public:
    Reader(const json& object, std::string context) : m_j(object), m_context(std::move(context)) {}

    bool failed() const { return m_error.has_value(); }
    Error error() const { return *m_error; }

    const json* field(const char* name) {
        if (failed())
            return nullptr;
        auto it = m_j.find(name);
        if (it == m_j.end()) {
            fail(std::string("field '") + name + "' is missing");
            return nullptr;
        }
        return &*it;
    }

    std::string string(const char* name, size_t minLen, size_t maxLen) {
        const json* v = field(name);
        if (!v)
            return {};
        if (!v->is_string())
            return typeError(name, "a string", *v), std::string();
        std::string s = v->get<std::string>();
        if (s.size() < minLen || s.size() > maxLen)
            fail(std::string("field '") + name + "' must be " + std::to_string(minLen) + " to " +
                 std::to_string(maxLen) + " characters long, found " + std::to_string(s.size()));
        return s;
    }

    int64_t integer(const char* name, int64_t lo, int64_t hi) {
        const json* v = field(name);
        if (!v)
            return 0;
        if (!v->is_number_integer())
            return typeError(name, "an integer", *v), 0;
        if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
            return rangeError(name, lo, hi, v->dump()), 0;
        int64_t x = v->get<int64_t>();
        if (x < lo || x > hi)
            rangeError(name, lo, hi, std::to_string(x));
        return x;
    }

    double number(const char* name, double lo, double hi) {
        const json* v = field(name);
        if (!v)
            return 0;
        if (!v->is_number())
            return typeError(name, "a number", *v), 0.0;
        double x = v->get<double>();
        if (!std::isfinite(x) || x < lo || x > hi)
            fail(std::string("field '") + name + "' must be a finite number in [" + num(lo) + ", " +
                 num(hi) + "], found " + v->dump());
        return x;
    }

    // The object in field `name`, or nullptr when the field is absent (fields newer senders add).
    const json* optionalObject(const char* name) {
        if (failed() || !m_j.contains(name))
            return nullptr;
        return object(name);
    }

    std::optional<double> optionalNumber(const char* name) {
        if (failed())
            return std::nullopt;
        auto it = m_j.find(name);
        if (it == m_j.end() || it->is_null())
            return std::nullopt;
        return number(name, -std::numeric_limits<double>::max(),
                      std::numeric_limits<double>::max());
    }

    Sha256Digest digest(const char* name) {
        std::string s = string(name, 0, 1000);
        if (failed())
            return {};
        auto d = digestFromHex(s);
        if (!d)
            return fail(std::string("field '") + name + "': " + d.error().message), Sha256Digest{};
        return *d;
    }

    PublicKey publicKey(const char* name) {
        std::string s = string(name, 0, 1000);
        if (failed())
            return {};
        auto k = publicKeyFromBase64(s);
        if (!k)
            return fail(std::string("field '") + name + "': " + k.error().message), PublicKey{};
        return *k;
    }

    Signature signature(const char* name) {
        std::string s = string(name, 0, 1000);
        if (failed())
            return {};
        auto k = signatureFromBase64(s);
        if (!k)
            return fail(std::string("field '") + name + "': " + k.error().message), Signature{};
        return *k;
    }

    const json* object(const char* name) {
        const json* v = field(name);
        if (v && !v->is_object())
            return typeError(name, "an object", *v), nullptr;
        return v;
    }

    const json* array(const char* name) {
        const json* v = field(name);
        if (v && !v->is_array())
            return typeError(name, "an array", *v), nullptr;
        return v;
    }

    void fail(std::string message) {
        if (!m_error)
            m_error = makeError(m_context + ": " + std::move(message));
    }

  private:
    static std::string num(double x) {
        json j = x;
        return j.dump();
    }
    static const char* typeName(const json& v) { return v.type_name(); }
    void typeError(const char* name, const char* expected, const json& v) {
        fail(std::string("field '") + name + "' must be " + expected + ", found " + typeName(v));
    }
    void rangeError(const char* name, int64_t lo, int64_t hi, const std::string& found) {
        fail(std::string("field '") + name + "' must be in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], found " + found);
    }

    const json& m_j;
    std::string m_context;
    std::optional<Error> m_error;
};

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxSeed = (int64_t{1} << 53) - 1;

// The body as a JSON object, or "<what>: the body is not valid JSON" and the like.
Expected<json> parseObject(std::string_view text, const char* what);
json modelToJson(const ModelConfig& c);
// The model object in field `name`, validated; problems go to r.
ModelConfig modelFromJson(Reader& r, const char* name);

}  // namespace tandem::net::protocol_json
