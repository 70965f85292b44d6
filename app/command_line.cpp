#include "command_line.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace tandem::app {

namespace {

// CLI11's layout with the program's own usage lines in place of the generated one.
class HelpFormatter final : public CLI::Formatter {
  public:
    explicit HelpFormatter(std::string usage) : m_usage(std::move(usage)) {}
    std::string make_usage(const CLI::App*, std::string) const override { return {}; }
    std::string make_description(const CLI::App* app) const override {
        return m_usage + "\n" + app->get_description() + "\n";
    }

  private:
    std::string m_usage;
};

}  // namespace

void setUpCommandLine(CLI::App& app, std::string usage, std::string footer,
                      const std::string& version) {
    auto formatter = std::make_shared<HelpFormatter>(std::move(usage));
    formatter->column_width(27);
    app.formatter(formatter);
    app.footer(std::move(footer));
    app.set_help_flag("-h,--help", "this text");
    app.set_version_flag("--version", app.get_name() + " " + version, "the version");
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

std::optional<long long> parseInteger(const std::string& text, long long lo, long long hi) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
        return std::nullopt;
    return n;
}

std::string integerError(const std::string& name, const std::string& text, long long lo,
                         long long hi, const std::string& expectation) {
    return name + " expects " +
           (expectation.empty()
                ? "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"
                : expectation) +
           ", found '" + text + "'";
}

CLI::ValidationError badValue(const std::string& message) {
    return CLI::ValidationError(message);
}

std::optional<double> parseNonNegative(const std::string& text) {
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(d >= 0))
        return std::nullopt;
    return d;
}

std::string nonNegativeError(const std::string& name, const std::string& text) {
    return name + " expects a non-negative number, found '" + text + "'";
}

int usageError(const std::string& program, const std::string& message) {
    std::fprintf(stderr, "%s: %s (see --help)\n", program.c_str(), message.c_str());
    return 2;
}

std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::CallForVersion& e) {
        std::printf("%s\n", e.what());
        return 0;
    } catch (const CLI::ParseError& e) {
        return usageError(app.get_name(), e.what());
    }
    return std::nullopt;
}

}  // namespace tandem::app
