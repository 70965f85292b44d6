// Asking for work and downloading its weights and data.
#include "work_fetcher.hpp"

#include "held_weights.hpp"
#include "platform_probe.hpp"
#include "weight_rebuild.hpp"

#include <algorithm>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

// The uplink as the last result uploads went (bytes/s): the newest of the last 50 transfers
// that was a whole result of at least 64 KiB (below that, latency dominates); 0 when none. The
// pieces of a sharded run's result go in parallel and are recorded each with the same start: the
// pieces that started together count as one transfer (their bytes over the longest duration).
double measuredUplink(Ledger& ledger) {
    auto recent = ledger.recentTransfers(50);
    if (!recent)
        return 0;
    auto isResult = [](const Transfer& t) {
        return t.direction == Direction::Up && t.purpose == "result" && t.ok;
    };
    for (size_t i = 0; i < recent->size(); ++i) {
        const Transfer& t = (*recent)[i];
        if (!isResult(t))
            continue;
        int64_t bytes = 0, durationMs = 0;
        for (const Transfer& u : *recent)
            if (isResult(u) && u.atMs == t.atMs && u.workUnitId == t.workUnitId) {
                bytes += u.bytes;
                durationMs = std::max(durationMs, u.durationMs);
            }
        if (bytes >= 64 * 1024 && durationMs > 0)
            return static_cast<double>(bytes) * 1000.0 / static_cast<double>(durationMs);
    }
    return 0;
}

// Whether a unit's weights come from deltas: the chain from the version held, or why not (empty
// when there was nothing to say: no deltas listed, nothing held, or a version not newer).
struct DeltaPlan {
    std::optional<std::vector<net::WeightDeltaRef>> chain;
    std::string whyWhole;
};

DeltaPlan deltaPlan(const net::Manifest& m, const std::optional<HeldWeights>& held) {
    DeltaPlan plan;
    if (!held || m.weightDeltas.empty() || held->version >= m.baseVersion)
        return plan;
    auto chain = weightDeltaChain(m, held->version);
    if (!chain) {
        plan.whyWhole = "the manifest lists no deltas from version " +
                        std::to_string(held->version) + ", the one held";
    } else if (const int64_t bytes = weightDeltaChainBytes(*chain); bytes >= m.weightsBytes) {
        plan.whyWhole = "its " + std::to_string(chain->size()) + " deltas from version " +
                        std::to_string(held->version) + " are not smaller (" +
                        std::to_string(bytes) + " bytes)";
    } else {
        plan.chain = std::move(chain);
    }
    return plan;
}

}  // namespace

void WorkFetcher::failHere(FetchMode mode, const std::string& why) {
    if (mode == FetchMode::Foreground)
        m_backoff.failLocal(why);
    else  // the foreground asks or downloads again, and backs off if it fails too
        m_shared.log(EventLevel::Info, "prefetch: " + why);
}

std::optional<ActiveUnit> WorkFetcher::fetch(double tokensPerSecond, FetchMode mode) {
    const bool fg = mode == FetchMode::Foreground;
    auto failLocal = [&](const std::string& why) { failHere(mode, why); };
    if (fg)
        m_shared.setState(EngineState::Fetching, "asking for work",
                          NextAction(NextStep::RequestWork));
    net::WorkRequest req;
    req.device = m_shared.cfg.deviceDescription.empty() ? m_shared.cfg.device
                                                        : m_shared.cfg.deviceDescription;
    req.memoryBytes = m_shared.cfg.deviceMemoryBytes;
    req.tokensPerSecond = tokensPerSecond;
    req.uplinkBytesPerSecond = measuredUplink(m_shared.ledger);
    if (auto d = PlatformProbe::diskSpace(m_shared.files.root()))
        req.freeDiskBytes = d->freeBytes;
    // The request id is on disk before the request leaves: a worker killed after the
    // coordinator assigned the unit, before it is recorded here, asks again with the same id
    // and gets the same unit instead of leaving it orphaned.
    std::string requestId;
    auto stored = readUnitRequest(m_shared.files);
    if (!stored)
        m_shared.log(EventLevel::Warning, stored.error().message + "; using a new request id");
    if (stored && *stored) {
        requestId = **stored;
    } else {
        requestId = net::newRequestId();
        if (auto st = writeUnitRequest(m_shared.files, requestId); !st) {
            failLocal("cannot store the work request id: " + st.error().message);
            return std::nullopt;
        }
    }
    const int64_t startMs = m_shared.now();
    auto res = m_shared.deps.api->requestWork(req, requestId);
    m_shared.checkCrash();
    if (!res) {
        if (!fg) {
            failLocal("asking for the next work unit failed: " + res.error().message);
            return std::nullopt;
        }
        if (res.error().httpStatus == 401) {
            m_registrar.drop("the coordinator does not know our token");
            return std::nullopt;
        }
        m_backoff.fail("asking for work failed", res.error());
        return std::nullopt;
    }
    if (!res->manifest && !fg)
        return std::nullopt;  // no work yet: the foreground asks again and waits as told
    if (!res->manifest) {
        const int64_t atMs = m_shared.now() + std::max<int64_t>(res->retryAfterMs, 1000);
        m_backoff.idleUntil(atMs, "no work available");
        m_shared.log(EventLevel::Info,
                     "no work available; asking again " + m_shared.describe(atMs));
        return std::nullopt;
    }
    const net::Manifest& m = *res->manifest;
    m_shared.recordTransfer(Direction::Down, "manifest",
                            static_cast<int64_t>(res->manifestJson.size()), startMs, true,
                            m.workUnitId, {});
    if (!m.verify(m_registrar.coordinatorKey().value())) {
        failLocal("the manifest of work unit " + wuKey(m.workUnitId) +
                  " is not signed by the coordinator key pinned at registration; refused");
        return std::nullopt;
    }
    if (m.seqLen > m.model.maxSeqLen || m.batch <= 0 || m.innerSteps <= 0 ||
        m.dataLength <= m.seqLen) {
        failLocal("work unit " + wuKey(m.workUnitId) + " has an impossible shape (B=" +
                  std::to_string(m.batch) + ", T=" + std::to_string(m.seqLen) + ", data " +
                  std::to_string(m.dataLength) + " tokens)");
        return std::nullopt;
    }
    if (auto row = m_shared.ledger.workUnit(wuKey(m.workUnitId)); row && *row) {
        // The stored id had been answered and recorded before (killed before its file was
        // removed): the unit it names is ours already. Ask again with a new id.
        removeUnitRequest(m_shared.files);
        m_shared.log(EventLevel::Info, "work unit " + wuKey(m.workUnitId) +
                                           " is already ours; asking again with a new request id");
        return std::nullopt;
    }
    ActiveUnit a;
    a.manifest = m;
    a.dir = m_shared.files.unitDir(m.workUnitId);
    std::error_code ec;
    fs::create_directories(a.dir, ec);
    if (auto st = writeTextAtomically(DataDir::manifestFile(a.dir), res->manifestJson); !st) {
        failLocal(st.error().message);
        return std::nullopt;
    }
    m_shared.recordNewUnit(m);
    removeUnitRequest(m_shared.files);  // answered and recorded
    if (fg)
        m_backoff.succeeded();
    m_shared.log(EventLevel::Info, std::string(fg ? "" : "prefetched ") + "work unit " +
                                       wuKey(m.workUnitId) + ": " + std::to_string(m.innerSteps) +
                                       " steps of " + std::to_string(m.batch) + "x" +
                                       std::to_string(m.seqLen) + " on " + m.model.describe() +
                                       ", from version " + std::to_string(m.baseVersion));
    return a;
}

bool WorkFetcher::download(ActiveUnit& unit, FetchMode mode, const net::Manifest* training) {
    const bool fg = mode == FetchMode::Foreground;
    auto failLocal = [&](const std::string& why) { failHere(mode, why); };
    const net::Manifest& m = unit.manifest;
    const fs::path wp = m_shared.files.weightsFile(m), dp = m_shared.files.dataFile(m);
    const fs::path keepW = training ? m_shared.files.weightsFile(*training) : wp;
    const fs::path keepD = training ? m_shared.files.dataFile(*training) : dp;
    const bool haveWeights = fileHasDigest(wp, m.weightsSha256);
    const bool haveData = fileHasDigest(dp, m.dataSha256);
    if (haveWeights && haveData) {
        holdWeights(m_shared.files, m, keepW);
        unit.downloaded = true;
        return true;
    }
    // The weights held from an earlier unit of this run, to rebuild these from deltas; those of
    // another run are let go (the clean-up below removes their file).
    std::optional<HeldWeights> held = readHeldWeights(m_shared.files);
    std::error_code ec;
    if (held && !held->sameRun(m)) {
        fs::remove(m_shared.files.heldWeightsFile(), ec);
        held.reset();
    }
    const DeltaPlan plan = haveWeights ? DeltaPlan{} : deltaPlan(m, held);
    const auto& chain = plan.chain;
    const int64_t weightsNeed =
        haveWeights ? 0 : (chain ? weightDeltaChainBytes(*chain) : m.weightsBytes);
    int64_t need = weightsNeed + (haveData ? 0 : m.dataByteLength());
    if (fg ? !m_gate.waitUntilClear(true, need, nullptr, true) : !m_gate.clearNow(need))
        return false;
    // Keep the cache to what this unit (and the unit in training) needs, and the weights held.
    const fs::path keepHeld = held ? held->file(m_shared.files) : wp;
    for (const auto& e : fs::directory_iterator(m_shared.files.cacheDir(), ec)) {
        if (e.path() != wp && e.path() != dp && e.path() != keepW && e.path() != keepD &&
            e.path() != keepHeld && e.path().string().find(".part") == std::string::npos)
            fs::remove(e.path(), ec);
    }
    m_shared.transition(m.workUnitId, WorkUnitState::Downloading, fg ? "" : "prefetch");
    auto showTotal = [&] {
        if (!fg)
            return;
        std::lock_guard lock(m_shared.mu);
        if (m_shared.snap.current)
            m_shared.snap.current->downloadBytesTotal = need;
    };
    if (fg) {
        m_shared.setState(EngineState::Downloading, "downloading weights and data",
                          NextAction(NextStep::Train, std::nullopt, wuKey(m.workUnitId)));
        std::lock_guard lock(m_shared.mu);
        m_shared.snap.current = currentInfo(unit);
    }
    showTotal();
    int64_t doneBefore = 0;
    auto progress = [&](int64_t done, int64_t, double) {
        m_shared.hook("download");
        if (m_shared.crashed.load())
            return false;
        std::lock_guard lock(m_shared.mu);
        if (fg && m_shared.snap.current)
            m_shared.snap.current->downloadBytesDone = doneBefore + done;
        return !m_shared.quitRequested && !m_shared.pauseRequested;
    };
    auto stopping = [&] {
        std::lock_guard lock(m_shared.mu);
        return m_shared.quitRequested || m_shared.pauseRequested;
    };
    auto one = [&](bool isWeights) -> bool {
        const int64_t startMs = m_shared.now();
        auto res = isWeights ? m_shared.deps.api->downloadWeights(m, wp, progress)
                             : m_shared.deps.api->downloadData(m, dp, progress);
        m_shared.checkCrash();
        const char* what = isWeights ? "weights" : "data";
        if (!res) {
            m_shared.recordTransfer(Direction::Down, what, res.error().bytesTransferred, startMs,
                                    false, m.workUnitId, res.error().message);
            if (!stopping() && fg)
                m_backoff.fail(std::string("downloading the ") + what + " failed", res.error());
            else if (!stopping())
                failLocal(std::string("downloading the ") + what +
                          " failed: " + res.error().message);
            return false;
        }
        m_shared.recordTransfer(Direction::Down, what, res->bytesTransferred, startMs, true,
                                m.workUnitId, {});
        doneBefore += isWeights ? m.weightsBytes : m.dataByteLength();
        return true;
    };
    if (!haveWeights) {
        bool rebuilt = false;
        if (chain) {
            // Each delta is a transfer of the unit's weights in the ledger, failed ones too.
            auto fetchDelta = [&](const net::WeightDeltaRef& d,
                                  const fs::path& dest) -> Expected<int64_t> {
                const int64_t startMs = m_shared.now();
                auto res = m_shared.deps.api->downloadWeightDelta(m, d, dest, progress);
                m_shared.checkCrash();
                if (!res) {
                    m_shared.recordTransfer(Direction::Down, "weights",
                                            res.error().bytesTransferred, startMs, false,
                                            m.workUnitId, res.error().message);
                    return makeError(res.error().message);
                }
                m_shared.recordTransfer(Direction::Down, "weights", res->bytesTransferred, startMs,
                                        true, m.workUnitId, {});
                doneBefore += d.bytes;
                return res->bytesTransferred;
            };
            auto got = rebuildWeightsFromDeltas(m, held->file(m_shared.files), held->version,
                                                *chain, unit.dir, fetchDelta, wp);
            if (got) {
                rebuilt = true;
                m_shared.log(EventLevel::Info,
                             "work unit " + wuKey(m.workUnitId) + ": weights of version " +
                                 std::to_string(m.baseVersion) + " rebuilt from " +
                                 std::to_string(got->deltas) +
                                 (got->deltas == 1 ? " delta (" : " deltas (") +
                                 std::to_string(got->bytesDownloaded) + " bytes) instead of " +
                                 std::to_string(m.weightsBytes) + " bytes");
            } else if (stopping()) {
                return false;
            } else {
                m_shared.log(EventLevel::Warning,
                             "work unit " + wuKey(m.workUnitId) + ": weights of version " +
                                 std::to_string(m.baseVersion) + " not rebuilt from deltas: " +
                                 got.error().message + "; downloading the whole file (" +
                                 std::to_string(m.weightsBytes) + " bytes)");
                need += m.weightsBytes - weightsNeed;
                doneBefore = 0;
                showTotal();
            }
        }
        if (!rebuilt && !plan.whyWhole.empty())
            m_shared.log(EventLevel::Info,
                         "work unit " + wuKey(m.workUnitId) + ": weights of version " +
                             std::to_string(m.baseVersion) + " downloaded whole: " + plan.whyWhole);
        if (!rebuilt && !one(true))
            return false;
    }
    if (!haveData && !one(false))
        return false;
    if (!fileHasDigest(wp, m.weightsSha256) || !fileHasDigest(dp, m.dataSha256)) {
        fs::remove(wp, ec);
        fs::remove(dp, ec);
        failLocal("a download does not match the SHA-256 of the manifest; removed it");
        return false;
    }
    holdWeights(m_shared.files, m, keepW);
    unit.downloaded = true;
    return true;
}

}  // namespace tandem::core
