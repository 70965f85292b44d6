// Asking for work and downloading its weights and data.
#include "engine_impl.hpp"

#include "file_io.hpp"

#include "platform_probe.hpp"

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

void Engine::Impl::fetch() {
    setState(EngineState::Fetching, "asking for work", "request a work unit");
    net::WorkRequest req;
    req.device = cfg.deviceDescription.empty() ? cfg.device : cfg.deviceDescription;
    req.memoryBytes = cfg.deviceMemoryBytes;
    req.tokensPerSecond = measuredTokensPerSecond;
    if (auto d = PlatformProbe::diskSpace(files.root()))
        req.freeDiskBytes = d->freeBytes;
    const int64_t startMs = now();
    auto res = deps.api->requestWork(req);
    checkCrash();
    if (!res) {
        if (res.error().httpStatus == 401) {
            registrar.drop("the coordinator does not know our token");
            return;
        }
        backoff.fail("asking for work failed", res.error());
        return;
    }
    if (!res->manifest) {
        const int64_t atMs = now() + std::max<int64_t>(res->retryAfterMs, 1000);
        backoff.idleUntil(atMs, "no work available");
        log(EventLevel::Info, "no work available; asking again at " + describe(atMs));
        return;
    }
    const net::Manifest& m = *res->manifest;
    recordTransfer(Direction::Down, "manifest", static_cast<int64_t>(res->manifestJson.size()),
                   startMs, true, m.workUnitId, {});
    if (!m.verify(registrar.coordinatorKey().value())) {
        backoff.failLocal("the manifest of work unit " + wuKey(m.workUnitId) +
                          " is not signed by the coordinator key pinned at registration; refused");
        return;
    }
    if (m.seqLen > m.model.maxSeqLen || m.batch <= 0 || m.innerSteps <= 0 ||
        m.dataLength <= m.seqLen) {
        backoff.failLocal("work unit " + wuKey(m.workUnitId) + " has an impossible shape (B=" +
                          std::to_string(m.batch) + ", T=" + std::to_string(m.seqLen) + ", data " +
                          std::to_string(m.dataLength) + " bytes)");
        return;
    }
    ActiveUnit a;
    a.manifest = m;
    a.dir = files.unitDir(m.workUnitId);
    std::error_code ec;
    fs::create_directories(a.dir, ec);
    if (auto st = writeTextAtomically(DataDir::manifestFile(a.dir), res->manifestJson); !st) {
        backoff.failLocal(st.error().message);
        return;
    }
    recordNewUnit(m);
    backoff.succeeded();
    log(EventLevel::Info, "work unit " + wuKey(m.workUnitId) + ": " + std::to_string(m.innerSteps) +
                              " steps of " + std::to_string(m.batch) + "x" +
                              std::to_string(m.seqLen) + " on " + m.model.describe() +
                              ", from version " + std::to_string(m.baseVersion));
    active = a;
}

bool Engine::Impl::download() {
    const net::Manifest& m = active->manifest;
    const fs::path wp = files.weightsFile(m), dp = files.dataFile(m);
    const bool haveWeights = fileHasDigest(wp, m.weightsSha256);
    const bool haveData = fileHasDigest(dp, m.dataSha256);
    if (haveWeights && haveData) {
        active->downloaded = true;
        return true;
    }
    const int64_t need = (haveWeights ? 0 : m.weightsBytes) + (haveData ? 0 : m.dataLength);
    if (!ruleGate.waitUntilClear(true, need, nullptr, true))
        return false;
    // Keep the cache to what this unit needs.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(files.cacheDir(), ec)) {
        if (e.path() != wp && e.path() != dp &&
            e.path().string().find(".part") == std::string::npos)
            fs::remove(e.path(), ec);
    }
    transition(m.workUnitId, WorkUnitState::Downloading);
    setState(EngineState::Downloading, "downloading weights and data",
             "train work unit " + wuKey(m.workUnitId));
    {
        std::lock_guard lock(mu);
        snap.current = currentInfo(*active);
        snap.current->downloadBytesTotal = need;
    }
    int64_t doneBefore = 0;
    auto progress = [&](int64_t done, int64_t, double) {
        hook("download");
        if (crashed.load())
            return false;
        std::lock_guard lock(mu);
        if (snap.current)
            snap.current->downloadBytesDone = doneBefore + done;
        return !quitRequested && !pauseRequested;
    };
    auto one = [&](bool isWeights) -> bool {
        const int64_t startMs = now();
        auto res = isWeights ? deps.api->downloadWeights(m, wp, progress)
                             : deps.api->downloadData(m, dp, progress);
        checkCrash();
        const char* what = isWeights ? "weights" : "data";
        if (!res) {
            recordTransfer(Direction::Down, what, res.error().bytesTransferred, startMs, false,
                           m.workUnitId, res.error().message);
            bool stopping;
            {
                std::lock_guard lock(mu);
                stopping = quitRequested || pauseRequested;
            }
            if (!stopping)
                backoff.fail(std::string("downloading the ") + what + " failed", res.error());
            return false;
        }
        recordTransfer(Direction::Down, what, res->bytesTransferred, startMs, true, m.workUnitId,
                       {});
        doneBefore += isWeights ? m.weightsBytes : m.dataLength;
        return true;
    };
    if (!haveWeights && !one(true))
        return false;
    if (!haveData && !one(false))
        return false;
    if (!fileHasDigest(wp, m.weightsSha256) || !fileHasDigest(dp, m.dataSha256)) {
        fs::remove(wp, ec);
        fs::remove(dp, ec);
        backoff.failLocal("a download does not match the SHA-256 of the manifest; removed it");
        return false;
    }
    active->downloaded = true;
    return true;
}

}  // namespace tandem::core
