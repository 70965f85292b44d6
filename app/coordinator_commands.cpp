#include "coordinator_commands.hpp"

#include "command_line.hpp"
#include "replication.hpp"
#include "run_data.hpp"
#include "run_export.hpp"
#include "samples.hpp"

#include <cstdio>
#include <ctime>

namespace tandem::app {

namespace {

std::string timeText(int64_t unix) {
    const std::time_t t = static_cast<std::time_t>(unix);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return text;
}

int fail(const std::string& message) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", message.c_str());
    return 1;
}

int runExport(const CoordinatorCommands& c, const std::filesystem::path& stateDir,
              const std::string& databaseUrl) {
    auto format = parseModelFormat(c.format);
    if (!format)
        return usageError("tandem-coordinator", "--format: " + format.error().message);
    coord::ExportRequest r;
    r.stateDir = stateDir;
    if (c.runId == 0) {
        auto run = coord::readStoredRun(stateDir, std::nullopt, databaseUrl);
        if (!run)
            return fail(run.error().message);
        r.runId = run->id;
    } else {
        r.runId = c.runId;
    }
    r.version = c.version;
    r.format = *format;
    r.out = c.out;
    if (!c.tokenizer.empty())
        r.tokenizer = c.tokenizer;
    auto record = coord::exportRun(r, databaseUrl);
    if (!record)
        return fail(record.error().message);
    std::printf("exported version %lld of run %lld as %s to %s\n",
                static_cast<long long>(record->version), static_cast<long long>(record->runId),
                record->format.c_str(), record->path.c_str());
    return 0;
}

int runStatus(const CoordinatorCommands& c, const std::filesystem::path& stateDir,
              const std::string& databaseUrl) {
    auto run = coord::readStoredRun(
        stateDir, c.runId == 0 ? std::nullopt : std::optional<int64_t>(c.runId), databaseUrl);
    if (!run)
        return fail(run.error().message);
    std::printf("run %lld in %s\nmodel %s (%lld parameters)\nround %lld open\n",
                static_cast<long long>(run->id), stateDir.c_str(),
                run->settings.model.describe().c_str(),
                static_cast<long long>(run->settings.model.parameterCount()),
                static_cast<long long>(run->version));
    std::string kept;
    for (int64_t v : run->keptVersions)
        kept += (kept.empty() ? "" : ", ") + std::to_string(v);
    std::printf("weights versions kept: %s\n", kept.empty() ? "none" : kept.c_str());
    auto e = coord::readLatestExport(stateDir);
    if (e && e->runId == run->id)
        std::printf("latest export: %s (%s, version %lld, %s)\n", e->path.c_str(),
                    e->format.c_str(), static_cast<long long>(e->version),
                    timeText(e->exportedUnix).c_str());
    else
        std::printf("latest export: none\n");
    auto twins = coord::readTwinSummary(stateDir, run->id, databaseUrl);
    if (!twins)
        return fail(twins.error().message);
    std::printf(
        "replication spot-checks: %lld agreed, %lld disagreed, %lld result(s) waiting for "
        "their twin\n",
        static_cast<long long>(twins->agreed), static_cast<long long>(twins->disagreed),
        static_cast<long long>(twins->waiting));
    if (twins->blocked.empty())
        std::printf("blocked clients: none\n");
    for (const auto& b : twins->blocked)
        std::printf("blocked client %lld (%s) since %s: %lld disagreement(s), %lld agreement(s)\n",
                    static_cast<long long>(b.id), b.name.c_str(), timeText(b.blockedUnix).c_str(),
                    static_cast<long long>(b.disagreements), static_cast<long long>(b.agreements));
    return 0;
}

int runSample(const CoordinatorCommands& c, const std::filesystem::path& stateDir,
              const std::string& databaseUrl) {
    auto run = coord::readStoredRun(
        stateDir, c.runId == 0 ? std::nullopt : std::optional<int64_t>(c.runId), databaseUrl);
    if (!run)
        return fail(run.error().message);
    const int64_t version = c.version.value_or(run->version);
    auto weights = coord::readRunWeights(stateDir, *run, version);
    if (!weights)
        return fail(weights.error().message);
    auto tokenizer = coord::runTokenizer(stateDir, run->settings);
    if (!tokenizer)
        return fail(tokenizer.error().message);
    coord::SampleConfig config;
    config.prompts = {c.prompt};
    config.tokens = c.sampleTokens;
    config.seed = static_cast<uint64_t>(c.seed);
    auto samples =
        coord::writeSamples(run->settings.model, *weights, **tokenizer, config, version, 2);
    if (!samples)
        return fail(samples.error().message);
    std::printf("%s%s\n", c.prompt.c_str(), samples->front().text.c_str());
    std::fprintf(stderr, "version %lld of run %lld, %d tokens in %.1f s\n",
                 static_cast<long long>(version), static_cast<long long>(run->id), c.sampleTokens,
                 samples->front().seconds);
    return 0;
}

}  // namespace

void addCoordinatorCommands(CLI::App& cli, CoordinatorCommands& c) {
    auto runOption = [&c](CLI::App* sub) {
        addInteger(*sub, "--run", c.runId, 1, (1LL << 53) - 1, "R",
                   "the run (default: the state directory's run)");
    };
    c.exportCommand =
        cli.add_subcommand("export",
                           "write a version of the run's weights for other tools and exit:\n"
                           "safetensors (Hugging Face GPT-2: model.safetensors + config.json) or\n"
                           "llmc (llm.c's model.bin), in the folder --out");
    c.exportCommand->fallthrough();  // --state-dir may follow the subcommand
    runOption(c.exportCommand);
    c.exportCommand
        ->add_option_function<long long>(
            "--version", [&c](long long v) { c.version = v; },
            "the weights version (default: the newest)")
        ->type_name("N")
        ->check(CLI::Range(0LL, (1LL << 53) - 1));
    c.exportCommand->add_option("--format", c.format, "safetensors or llmc")
        ->type_name("FORMAT")
        ->required();
    c.exportCommand->add_option("--out", c.out, "the folder to create (it must not exist yet)")
        ->type_name("PATH")
        ->required();
    c.exportCommand
        ->add_option("--tokenizer", c.tokenizer, "a tokenizer file to copy beside the weights")
        ->type_name("FILE");
    c.statusCommand = cli.add_subcommand(
        "status", "print the state directory's run and where its latest export is, and exit");
    c.statusCommand->fallthrough();
    runOption(c.statusCommand);
    c.sampleCommand = cli.add_subcommand(
        "sample", "print what a version of the model writes after --prompt, and exit");
    c.sampleCommand->fallthrough();
    runOption(c.sampleCommand);
    c.sampleCommand->add_option("--prompt", c.prompt, "the text the model continues")
        ->type_name("TEXT")
        ->required();
    c.sampleCommand
        ->add_option_function<long long>(
            "--version", [&c](long long v) { c.version = v; },
            "the weights version (default: the newest)")
        ->type_name("N")
        ->check(CLI::Range(0LL, (1LL << 53) - 1));
    addInteger(*c.sampleCommand, "--tokens", c.sampleTokens, 1, 4096, "N",
               "tokens to write (default 64)");
    addInteger(*c.sampleCommand, "--seed", c.seed, 0, (1LL << 53) - 1, "N",
               "seed of the top-40 draws (default 1)");
}

std::optional<int> runCoordinatorCommand(const CoordinatorCommands& c,
                                         const std::filesystem::path& stateDir,
                                         const std::string& databaseUrl) {
    if (c.exportCommand && c.exportCommand->parsed())
        return runExport(c, stateDir, databaseUrl);
    if (c.statusCommand && c.statusCommand->parsed())
        return runStatus(c, stateDir, databaseUrl);
    if (c.sampleCommand && c.sampleCommand->parsed())
        return runSample(c, stateDir, databaseUrl);
    return std::nullopt;
}

}  // namespace tandem::app
