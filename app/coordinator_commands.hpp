// tandem-coordinator's commands beside serving: `export` (a run's weights as safetensors or an
// llm.c checkpoint, coordinator/run_export.hpp) and `status` (the run in a state directory and
// where its latest export is) and `sample` (what a version writes after a prompt). All read
// the state directory and work while the coordinator serves it.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace tandem::app {

struct CoordinatorCommands {
    CLI::App* exportCommand = nullptr;
    CLI::App* statusCommand = nullptr;
    CLI::App* sampleCommand = nullptr;
    std::string prompt;
    int sampleTokens = 64;
    int64_t seed = 1;
    int64_t runId = 0;  // 0: the state directory's run
    std::optional<int64_t> version;
    std::string format;
    std::filesystem::path out;
    std::filesystem::path tokenizer;
};

// Adds the subcommands to the program's command line; `commands` receives their values.
void addCoordinatorCommands(CLI::App& cli, CoordinatorCommands& commands);

// Runs the subcommand that was given (nullopt: none was, serve).
// databaseUrl: --db (empty: the state directory's coordinator.db).
std::optional<int> runCoordinatorCommand(const CoordinatorCommands& commands,
                                         const std::filesystem::path& stateDir,
                                         const std::string& databaseUrl);

}  // namespace tandem::app
