// The command lines of the Qt-free programs (tandem-worker, tandem-coordinator) on CLI11: the
// --help layout (usage lines, what the program does, every option with its explanation and
// default, notes), integer and number options whose bad values are refused as "--name expects
// ..., found 'x'", and one place that turns a parse into an exit code. The GUI keeps
// QCommandLineParser.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace tandem::app {

// For an app made as CLI::App(description, programName): usage lines first (instead of CLI11's
// generated "Usage: prog [OPTIONS]"), then the description, the options (each "--name VALUE
// explanation (default ...)"), the subcommands and the footer; -h/--help and --version
// ("programName version"). Scalar options given twice keep the last value.
void setUpCommandLine(CLI::App& app, std::string usage, std::string footer,
                      const std::string& version);

// The value of an integer option in [lo, hi] (strtoll's syntax), or nullopt.
std::optional<long long> parseInteger(const std::string& text, long long lo, long long hi);
// "--name expects <expectation>, found 'text'"; expectation defaults to "an integer in [lo, hi]".
std::string integerError(const std::string& name, const std::string& text, long long lo,
                         long long hi, const std::string& expectation = {});
// A number >= 0 (strtod's syntax), or nullopt.
std::optional<double> parseNonNegative(const std::string& text);
// "--name expects a non-negative number, found 'text'".
std::string nonNegativeError(const std::string& name, const std::string& text);

// Thrown from an option's callback: the command line is wrong; the message says why.
CLI::ValidationError badValue(const std::string& message);

// An integer option `--name VALUE` into target, refused with integerError when out of range.
template <class Integer>
CLI::Option* addInteger(CLI::App& app, const std::string& name, Integer& target, long long lo,
                        long long hi, const std::string& valueName, const std::string& help,
                        std::string expectation = {}) {
    auto set = [&target, name, lo, hi, expectation](const std::string& text) {
        const auto n = parseInteger(text, lo, hi);
        if (!n)
            throw badValue(integerError(name, text, lo, hi, expectation));
        target = static_cast<Integer>(*n);
    };
    return app.add_option_function<std::string>(name, set, help)->type_name(valueName);
}

// A number option >= 0 into target (double or float), refused with nonNegativeError.
template <class Number>
CLI::Option* addNonNegative(CLI::App& app, const std::string& name, Number& target,
                            const std::string& valueName, const std::string& help) {
    auto set = [&target, name](const std::string& text) {
        const auto d = parseNonNegative(text);
        if (!d)
            throw badValue(nonNegativeError(name, text));
        target = static_cast<Number>(*d);
    };
    return app.add_option_function<std::string>(name, set, help)->type_name(valueName);
}

// Parses argv. nullopt: go on. Otherwise the program exits with the value: 0 after --help
// (the help on stdout) or --version ("program VERSION" on stdout), 2 after a command-line error
// ("program: message (see --help)" on stderr).
std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv);

// "program: message (see --help)" on stderr; returns 2.
int usageError(const std::string& program, const std::string& message);

}  // namespace tandem::app
