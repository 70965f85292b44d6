// Recovery after a restart: results on disk, the unit in work/, ledger rows without files.
#include "engine_impl.hpp"

#include <algorithm>
#include <set>

namespace tandem::core {

namespace fs = std::filesystem;
using json = nlohmann::json;

void Engine::Impl::recover() {
    std::error_code ec;
    fs::create_directories(files.resultsDir(), ec);
    fs::create_directories(files.workDir(), ec);
    fs::create_directories(files.cacheDir(), ec);
    const std::optional<net::PublicKey> coordinatorKey = registrar.coordinatorKey();
    std::set<int64_t> haveResult;
    // Finished results.
    std::vector<fs::path> infos;
    for (const auto& e : fs::directory_iterator(files.resultsDir(), ec))
        if (e.path().extension() == ".json")
            infos.push_back(e.path());
    std::sort(infos.begin(), infos.end());
    for (const auto& info : infos) {
        auto p = loadPendingResult(files, info, key);
        if (!p) {
            log(EventLevel::Error, "dropping a result that cannot be sent: " + p.error().message);
            fs::remove(info, ec);
            continue;
        }
        haveResult.insert(p->workUnitId);
        auto row = ledger.workUnit(wuKey(p->workUnitId));
        if (row && *row &&
            ((*row)->state == WorkUnitState::Accepted ||
             (*row)->state == WorkUnitState::Rejected)) {
            removePendingResult(*p);  // settled before the crash; only the files were left
            continue;
        }
        if (row && *row && (*row)->state != WorkUnitState::Trained)
            transition(p->workUnitId, WorkUnitState::Trained, "restart: upload again");
        log(EventLevel::Info,
            "work unit " + wuKey(p->workUnitId) + ": result on disk, waiting for its receipt");
        // It may have reached the coordinator before the restart: upload again (idempotent,
        // the stored receipt comes back) rather than ask, since the coordinator would answer
        // "abandon: already accepted" and the receipt would be lost.
        p->stillWantedChecked = true;
        uploads.push(*p);
    }
    // The unit in training.
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(files.workDir(), ec))
        if (e.is_directory())
            dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
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
                transition(m->workUnitId, WorkUnitState::Abandoned,
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
        auto row = ledger.workUnit(wuKey(m->workUnitId));
        if (row && !*row)
            recordNewUnit(*m);
        log(EventLevel::Info, "work unit " + wuKey(m->workUnitId) + ": resuming at step " +
                                  std::to_string(a.step) + " of " + std::to_string(m->innerSteps));
        active = a;
    }
    // Rows the files cannot back any more.
    if (auto rows = ledger.workUnits(100000)) {
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
                transition(id, WorkUnitState::Abandoned, "restart: its files were gone");
            if (pendingState && !haveResult.count(id))
                transition(id, WorkUnitState::Failed, "restart: its result file was gone");
        }
    }
    refreshTotals();
}

}  // namespace tandem::core
