// `tandem-coordinator tokenizer train --vocab-size N --out MODEL FILES...`: trains the
// SentencePiece BPE model that a run created with --tokenizer MODEL tokenizes its corpus with.
#pragma once

#include "tokenizer_training.hpp"

#include <CLI/CLI.hpp>

namespace tandem::app {

struct TokenizerCommand {
    CLI::App* train = nullptr;  // parsed when *train is true
    coord::TokenizerTraining spec;
};

// Adds the `tokenizer` subcommand (with `train`) to the coordinator's command line; `command`
// receives the options and must outlive parsing.
void addTokenizerCommand(CLI::App& cli, TokenizerCommand& command);

// Trains and writes the model; the exit code (0, or 1 with the reason on stderr).
int runTokenizerTrain(const coord::TokenizerTraining& spec);

}  // namespace tandem::app
