// Recovery after a restart: results on disk, the unit in work/, ledger rows without files.
#include "recovery.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

namespace tandem::core {

namespace fs = std::filesystem;

namespace {

// The results/ files of each unit: <id>.json and <id>.result, and a sharded run's pieces
// <id>.<k>.piece (counted as result files: without the .json they go as a .result does).
struct ResultFiles {
    bool info = false;
    bool result = false;
};

std::map<int64_t, ResultFiles> resultFilesByUnit(const DataDir& files) {
    std::map<int64_t, ResultFiles> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(files.resultsDir(), ec)) {
        const std::string ext = e.path().extension().string();
        if (ext != ".json" && ext != ".result" && ext != ".piece")
            continue;
        std::string stem = e.path().stem().string();
        if (ext == ".piece")
            stem = stem.substr(0, stem.find('.'));
        if (stem.empty() || stem.size() > 18 ||
            stem.find_first_not_of("0123456789") != std::string::npos)
            continue;  // not a file of ours
        auto& f = out[std::stoll(stem)];
        (ext == ".json" ? f.info : f.result) = true;
    }
    return out;
}

bool isSettled(WorkUnitState s) {
    return s == WorkUnitState::Accepted || s == WorkUnitState::Rejected ||
           s == WorkUnitState::Abandoned;
}

bool isFinished(WorkUnitState s) {
    return s == WorkUnitState::Trained || s == WorkUnitState::Uploading ||
           s == WorkUnitState::Uploaded;
}

// Finished results back into the upload queue; returns the units that have one. Each leftover
// state of a kill has its own answer: files of a settled unit (killed while removing them) and
// a .result whose .json was never written (killed while writing it) go quietly; a result that
// cannot be sent is dropped, both files, with an error.
std::set<int64_t> requeueResults(EngineShared& shared) {
    std::set<int64_t> haveResult;
    for (const auto& [id, f] : resultFilesByUnit(shared.files)) {
        const std::string key = wuKey(id);
        // Its ledger state; a unit without a row counts as unfinished.
        WorkUnitState state = WorkUnitState::Assigned;
        bool hasRow = false;
        if (auto row = shared.ledger.workUnit(key); row && *row) {
            state = (*row)->state;
            hasRow = true;
        }
        if (isSettled(state)) {
            removeResultFiles(shared.files, id);  // settled before the kill; only files were left
            continue;
        }
        if (!f.info && !isFinished(state)) {
            removeResultFiles(shared.files, id);
            shared.log(EventLevel::Info, "work unit " + key +
                                             ": removed a result file whose results/" + key +
                                             ".json was never written (stopped while writing it)");
            continue;
        }
        auto p = f.info
                     ? loadPendingResult(shared.files, shared.files.resultInfoFile(id), shared.key)
                     : Expected<PendingResult>(
                           makeError(shared.files.resultInfoFile(id).string() + " is missing"));
        if (!p) {
            shared.log(EventLevel::Error,
                       "dropping a result that cannot be sent: " + p.error().message);
            removeResultFiles(shared.files, id);
            continue;
        }
        haveResult.insert(p->workUnitId);
        if (hasRow && state != WorkUnitState::Trained)
            shared.transition(p->workUnitId, WorkUnitState::Trained, "restart: upload again");
        shared.log(EventLevel::Info, "work unit " + wuKey(p->workUnitId) +
                                         ": result on disk, waiting for its receipt");
        // It may have reached the coordinator before the restart: upload again (idempotent,
        // the stored receipt comes back) rather than ask, since the coordinator would answer
        // "abandon: already accepted" and the receipt would be lost.
        p->stillWantedChecked = true;
        shared.uploads.push(*p);
    }
    return haveResult;
}

// The unit that was in training, when its files can resume it; other units there are dropped.
std::optional<ActiveUnit> resumableUnit(EngineShared& shared,
                                        const std::optional<net::PublicKey>& coordinatorKey,
                                        const std::set<int64_t>& haveResult) {
    std::error_code ec;
    std::optional<ActiveUnit> active;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(shared.files.workDir(), ec))
        if (e.is_directory())
            dirs.push_back(e.path());
    // Oldest unit first (work/<id>, ids as numbers): the one in training, not the next unit
    // prefetched beside it.
    auto idOf = [](const fs::path& d) {
        const std::string n = d.filename().string();
        return n.empty() || n.size() > 18 || n.find_first_not_of("0123456789") != std::string::npos
                   ? INT64_MAX
                   : std::stoll(n);
    };
    std::sort(dirs.begin(), dirs.end(),
              [&](const fs::path& a, const fs::path& b) { return idOf(a) < idOf(b); });
    for (const auto& d : dirs) {
        const auto manifestText = readText(DataDir::manifestFile(d));
        std::optional<net::Manifest> m;
        if (manifestText) {
            auto parsed = net::Manifest::fromJson(*manifestText);
            if (parsed && coordinatorKey && parsed->verify(*coordinatorKey))
                m = *parsed;
        }
        if (!m || haveResult.count(m->workUnitId) || active) {
            if (m && !haveResult.count(m->workUnitId)) {
                shared.transition(m->workUnitId, WorkUnitState::Abandoned,
                                  "restart: another unit was in progress");
            }
            fs::remove_all(d, ec);
            continue;
        }
        ActiveUnit a;
        a.manifest = *m;
        a.dir = d;
        if (auto progress = readProgress(DataDir::progressFile(d)))
            static_cast<UnitProgress&>(a) = *progress;
        if (!a.checkpointFile.empty() && !fs::exists(d / a.checkpointFile, ec))
            a.restart();
        // Make sure the ledger has the unit (a crash may have come before its row).
        auto row = shared.ledger.workUnit(wuKey(m->workUnitId));
        if (row && !*row)
            shared.recordNewUnit(*m);
        shared.log(EventLevel::Info, "work unit " + wuKey(m->workUnitId) + ": resuming at step " +
                                         std::to_string(a.step) + " of " +
                                         std::to_string(m->innerSteps));
        active = a;
    }
    return active;
}

// Rows the files cannot back any more.
void closeRowsWithoutFiles(EngineShared& shared, const std::optional<ActiveUnit>& active,
                           const std::set<int64_t>& haveResult) {
    if (auto rows = shared.ledger.workUnits(100000)) {
        for (const auto& r : *rows) {
            const auto s = r.unit.state;
            const bool open = s == WorkUnitState::Assigned || s == WorkUnitState::Downloading ||
                              s == WorkUnitState::Training;
            const bool pendingState = s == WorkUnitState::Trained ||
                                      s == WorkUnitState::Uploading || s == WorkUnitState::Uploaded;
            int64_t id = 0;
            try {
                id = std::stoll(r.unit.id);
            } catch (...) {
                continue;
            }
            if (open && !(active && active->manifest.workUnitId == id))
                shared.transition(id, WorkUnitState::Abandoned, "restart: its files were gone");
            if (pendingState && !haveResult.count(id))
                shared.transition(id, WorkUnitState::Failed, "restart: its result file was gone");
        }
    }
}

}  // namespace

std::optional<ActiveUnit> recoverDataDir(EngineShared& shared,
                                         const std::optional<net::PublicKey>& coordinatorKey) {
    std::error_code ec;
    fs::create_directories(shared.files.resultsDir(), ec);
    fs::create_directories(shared.files.workDir(), ec);
    fs::create_directories(shared.files.cacheDir(), ec);
    const std::set<int64_t> haveResult = requeueResults(shared);
    std::optional<ActiveUnit> active = resumableUnit(shared, coordinatorKey, haveResult);
    closeRowsWithoutFiles(shared, active, haveResult);
    shared.refreshTotals();
    return active;
}

}  // namespace tandem::core
