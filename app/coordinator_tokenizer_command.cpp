// The coordinator's `tokenizer train` subcommand.
#include "coordinator_tokenizer_command.hpp"

#include "command_line.hpp"

#include <cstdio>

namespace tandem::app {

void addTokenizerCommand(CLI::App& cli, TokenizerCommand& command) {
    CLI::App* tokenizer = cli.add_subcommand(
        "tokenizer", "the run's SentencePiece tokenizer (see 'tokenizer train --help')");
    tokenizer->require_subcommand(1);
    command.train = tokenizer->add_subcommand(
        "train",
        "trains a BPE model (byte fallback: any text encodes) on text files or directories;\n"
        "a new run given --tokenizer MODEL tokenizes its --corpus with it");
    addInteger(*command.train, "--vocab-size", command.spec.vocabSize, 320, 65536, "N",
               "tokens in the vocabulary, V (256 of them are byte pieces)")
        ->required();
    command.train->add_option("--out", command.spec.output, "the model file to write")
        ->type_name("MODEL")
        ->required();
    command.train->add_option("files", command.spec.corpus, "text files or directories")
        ->type_name("PATH")
        ->required()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

int runTokenizerTrain(const coord::TokenizerTraining& spec) {
    std::fprintf(stderr, "tandem-coordinator: training a %d-token BPE tokenizer...\n",
                 spec.vocabSize);
    if (auto st = coord::trainTokenizer(spec); !st) {
        std::fprintf(stderr, "tandem-coordinator: %s\n", st.error().message.c_str());
        return 1;
    }
    std::printf("wrote %s\n", spec.output.c_str());
    return 0;
}

}  // namespace tandem::app
