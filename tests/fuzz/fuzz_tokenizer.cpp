// The tokenizer loaders (kernels/tokenizer.hpp, gpt2_tokenizer.hpp): llm.c's GPT-2 tokenizer
// file and SentencePiece models as loadTokenizer reads them, then encoding and decoding with
// what was loaded. Checks: GPT-2's byte-level BPE gives back the exact bytes it encoded, with
// ids inside the vocabulary, and its pre-tokenizer's pieces join to the text.
#include "fuzz_common.hpp"
#include "gpt2_tokenizer.hpp"
#include "tokenizer.hpp"

#include <string>
#include <vector>

namespace {

void checkPieces(std::string_view text) {
    std::string joined;
    for (auto piece : tandem::Gpt2Tokenizer::splitPieces(text)) {
        FUZZ_CHECK(!piece.empty());
        joined += piece;
    }
    FUZZ_CHECK(joined == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const size_t textBytes = std::min<size_t>(in.byte(), in.rest().size());
    const auto rest = in.rest();
    // The last textBytes bytes are the text to encode, the rest the tokenizer file.
    const auto file = rest.first(rest.size() - textBytes);
    const std::string text(reinterpret_cast<const char*>(rest.data()) + file.size(), textBytes);
    switch (selector % 3) {
        case 0: {
            auto gpt2 = tandem::Gpt2Tokenizer::parse(file);
            if (!gpt2)
                return 0;
            const auto ids = gpt2->encode(text);
            for (int32_t id : ids)
                FUZZ_CHECK(id >= 0 && id < gpt2->vocabSize());
            FUZZ_CHECK(gpt2->decode(ids) == text);
            return 0;
        }
        case 1: {
            // By path and magic, as the coordinator and the worker load a run's tokenizer.
            auto loaded = tandem::loadTokenizer(tandem::fuzz::scratchFile(file));
            if (!loaded)
                return 0;
            auto ids = (*loaded)->encode(text);
            if (!ids)
                return 0;
            for (int32_t id : *ids)
                FUZZ_CHECK(id >= 0 && id < (*loaded)->vocabSize());
            FUZZ_CHECK(tandem::fuzz::isUtf8((*loaded)->decode(*ids)));
            return 0;
        }
        default:
            checkPieces(in.restText());
            return 0;
    }
}
