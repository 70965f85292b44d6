// llm.c GPT-2 checkpoints (kernels/llmc_checkpoint.hpp), imported by the coordinator. The model
// the file is checked against is taken from its own header when that is small, so the fuzzer
// reaches the tensor-shape and size checks. Checks: what parses, written back with
// serializeLlmc, parses to the same parameters.
#include "fuzz_common.hpp"
#include "llmc_checkpoint.hpp"
#include "model.hpp"

#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> file(data, size);
    tandem::looksLikeLlmc(file);
    auto header = tandem::parseLlmcHeader(file);
    if (!header)
        return 0;
    FUZZ_CHECK(header->maxT > 0 && header->vocab > 0 && header->layers > 0 && header->heads > 0 &&
               header->channels > 0);
    // Small models only: a big header makes a layout of gigabytes before the size check.
    if (header->layers > 2 || header->channels > 16 || header->maxT > 16 || header->vocab > 128)
        return 0;
    tandem::ModelConfig config;
    config.layers = header->layers;
    config.heads = header->heads;
    config.channels = header->channels;
    config.maxSeqLen = header->maxT;
    config.vocabSize = header->vocab;
    if (!config.validate())
        return 0;
    const tandem::ParameterLayout layout(config);
    auto parameters = tandem::parseLlmc(file, layout);
    if (!parameters)
        return 0;
    FUZZ_CHECK(static_cast<int64_t>(parameters->size()) == layout.parameterCount());
    const auto written = tandem::serializeLlmc(layout, *parameters);
    auto again = tandem::parseLlmc(written, layout);
    FUZZ_CHECK(again.ok() && again->size() == parameters->size());
    FUZZ_CHECK(std::memcmp(again->data(), parameters->data(), parameters->size() * 4) == 0);
    return 0;
}
