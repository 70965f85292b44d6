// Every JSON body of protocol v2 (net/protocol.hpp, net/held_work.hpp) and the model
// configuration text, as the coordinator and the worker parse them: the selector byte picks the
// type, the rest is the body. Checks: no crash or exception escapes a parser, and whatever a
// parser accepts survives its writer: toJson(parse(toJson(x))) == toJson(x), so neither side
// writes what the other refuses.
#include "fuzz_common.hpp"
#include "held_work.hpp"
#include "model_config.hpp"
#include "protocol.hpp"

namespace {

using namespace tandem;

template <class T>
void roundTrip(std::string_view text) {
    auto parsed = T::fromJson(text);
    if (!parsed)
        return;
    const std::string once = parsed->toJson();
    auto again = T::fromJson(once);
    if (!again)
        std::fprintf(stderr, "refused its own writing: %s\n%s\n", once.c_str(),
                     again.error().message.c_str());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->toJson() == once);
}

// Signed documents: the signature over the canonical text checks out with the key that made it.
template <class T>
void signedRoundTrip(std::string_view text) {
    roundTrip<T>(text);
    auto parsed = T::fromJson(text);
    if (!parsed)
        return;
    static const net::SigningKey key = [] {
        auto k = net::SigningKey::generate();
        return std::move(*k);
    }();
    parsed->verify(key.publicKey());  // any answer, no crash
    parsed->sign(key);
    FUZZ_CHECK(parsed->verify(key.publicKey()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const std::string_view text = in.restText();
    switch (selector % 11) {
        case 0:
            return roundTrip<net::ApiError>(text), 0;
        case 1:
            return roundTrip<net::RegisterRequest>(text), 0;
        case 2:
            return roundTrip<net::RegisterResponse>(text), 0;
        case 3:
            return roundTrip<net::WorkRequest>(text), 0;
        case 4:
            return signedRoundTrip<net::Manifest>(text), 0;
        case 5:
            return roundTrip<net::ProgressReport>(text), 0;
        case 6:
            return roundTrip<net::ProgressReply>(text), 0;
        case 7:
            return signedRoundTrip<net::Receipt>(text), 0;
        case 8:
            return roundTrip<net::RunStatus>(text), 0;
        case 9:
            return roundTrip<net::HeldWorkUnits>(text), 0;
        default: {
            auto config = ModelConfig::parse(text);
            if (config)
                static_cast<void>(config->validate());  // any answer, no crash
            return 0;
        }
    }
}
