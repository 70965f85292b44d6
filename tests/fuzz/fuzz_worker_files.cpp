// The files the worker keeps in its data directory and reads back after a crash or a restart
// (core/unit_files.hpp): work/<id>/progress.json, results/<id>.json with its .result,
// work_request.json, and optimizer.json with optimizer.ckpt. A damaged file must give an error
// naming it, never a crash or undefined behaviour. Checks: what reads back is written to text
// that reads to the same value.
#include "checkpoint.hpp"
#include "fuzz_common.hpp"
#include "unit_files.hpp"

#include <fstream>

namespace {

using namespace tandem;
namespace fs = std::filesystem;

void write(const fs::path& path, std::span<const uint8_t> bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    // The input is one file, or (selectors 2 and 4) a JSON file of `split` bytes and a binary one.
    const size_t split = std::min<size_t>(static_cast<size_t>(in.byte()) * 4, in.rest().size());
    const auto rest = in.rest();
    const fs::path root = fuzz::scratchFile({}).parent_path() / "data";
    const core::DataDir files(root);
    switch (selector % 5) {
        case 0: {
            const fs::path path = root / "progress.json";
            write(path, rest);
            auto p = core::readProgress(path);
            if (!p)
                return 0;
            FUZZ_CHECK(core::writeProgress(path, *p).ok());
            auto again = core::readProgress(path);
            FUZZ_CHECK(again.ok() && *again == *p);
            return 0;
        }
        case 1: {
            const fs::path path = root / "info.json";
            write(path, rest);
            auto info = core::readResultInfo(path);
            if (!info)
                return 0;
            FUZZ_CHECK(core::writeResultInfo(path, *info).ok());
            auto again = core::readResultInfo(path);
            FUZZ_CHECK(again.ok() && *again == *info);
            return 0;
        }
        case 2: {
            const fs::path info = root / "results" / "pending.json";
            write(info, rest.first(split));
            auto parsed = core::readResultInfo(info);
            if (!parsed || parsed->workUnitId < 0 || parsed->workUnitId > 1'000'000)
                return 0;  // the result file is named after the unit: keep the names few
            write(files.resultFile(parsed->workUnitId), rest.subspan(split));
            static const net::SigningKey key = [] {
                auto k = net::SigningKey::generate();
                return std::move(*k);
            }();
            auto pending = core::loadPendingResult(files, info, key);
            if (pending) {
                FUZZ_CHECK(pending->bytes == static_cast<int64_t>(rest.size() - split));
                FUZZ_CHECK(
                    net::verifySignature(key.publicKey(), pending->digest, pending->signature));
            }
            core::removeResultFiles(files, parsed->workUnitId);
            return 0;
        }
        case 3: {
            write(files.unitRequestFile(), rest);
            auto id = core::readUnitRequest(files);
            if (id && *id)
                FUZZ_CHECK(net::isRequestId(**id));
            return 0;
        }
        default: {
            write(files.optimizerInfoFile(), rest.first(split));
            write(files.optimizerFile(), rest.subspan(split));
            net::Manifest m;
            m.runId = 1;
            m.model = *ModelConfig::parse("L=1,NH=1,C=4,T=4,V=8");
            auto moments = core::carriedMoments(files, m, "cpu");
            if (moments)
                FUZZ_CHECK(moments->m.size() == moments->v.size());
            return 0;
        }
    }
}
