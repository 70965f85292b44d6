// Token files as the coordinator opens them (kernels/token_shard.hpp): llm.c uint16 shards and
// byte text, memory-mapped from a path. Checks: an accepted shard's header and token count
// account for every byte, and firstTokenAtOrAbove agrees with a plain scan.
#include "fuzz_common.hpp"
#include "token_shard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const auto path = tandem::fuzz::scratchFile(in.rest());
    auto shard =
        (selector & 1) ? tandem::TokenShard::openBytes(path) : tandem::TokenShard::openLlmc(path);
    if (!shard)
        return 0;
    const tandem::TokenView tokens = shard->tokens();
    FUZZ_CHECK(shard->headerBytes() + tokens.count * shard->width() == shard->fileBytes());
    FUZZ_CHECK(shard->fileBytes() == static_cast<int64_t>(in.rest().size()));
    const int64_t limit = (selector >> 1) * 517;  // 0 .. 65,934: byte and uint16 limits
    int64_t first = -1;
    for (int64_t i = 0; i < tokens.count && first < 0; ++i)
        if (tokens[i] >= limit)
            first = i;
    FUZZ_CHECK(tandem::firstTokenAtOrAbove(tokens, limit) == first);
    return 0;
}
