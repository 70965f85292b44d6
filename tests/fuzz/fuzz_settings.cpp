// settings.json as the worker and the app read it (core/settings.hpp), and the HH:MM times of
// its rules. Checks: no parser throws; settings that parse are written back to text that parses
// to equal settings (unknown keys included), and validation gives an answer either way.
#include "fuzz_common.hpp"
#include "settings.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const std::string_view text = in.restText();
    if (selector % 4 == 3) {
        auto minute = tandem::core::parseTimeOfDay(text);
        if (minute)
            FUZZ_CHECK(*minute >= 0 && *minute < 24 * 60);
        return 0;
    }
    auto loaded = tandem::core::parseSettings(text);
    if (!loaded)
        return 0;
    const auto issues = tandem::core::validate(loaded->settings);
    FUZZ_CHECK(issues.empty() == tandem::core::validateSettings(loaded->settings).ok());
    for (const auto& issue : issues)
        FUZZ_CHECK(!issue.message.empty());
    const std::string written = tandem::core::serializeSettings(loaded->settings);
    auto again = tandem::core::parseSettings(written);
    if (!again)
        std::fprintf(stderr, "refused its own writing: %s\n", written.c_str());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->settings == loaded->settings);
    return 0;
}
