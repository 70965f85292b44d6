// Replication spot-checks (docs/protocol.md, "Replication spot-checks"): the rules as pure
// functions (which units get a twin, how far apart two results of one unit are, when a client is
// blocked) and the operator's summary read from a state directory. The coordinator's side (twins
// assigned, results held until their twin arrives, pairs compared and committed) is
// Coordinator::Impl in replication.cpp.
//
// Dimensions: P parameters.
#pragma once

#include "expected.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace tandem::coord {

// Whether work unit `workUnitId` of a run with seed `runSeed` gets a twin: a fixed function of
// the two (so a restart chooses the same), true for about `fraction` of the ids; never for
// fraction <= 0.
bool chosenForTwin(uint64_t runSeed, int64_t workUnitId, double fraction);

// How far apart two pseudo-gradients (P each) of one unit are: ||a - b|| / max(||a||, ||b||),
// accumulated in double; 0 when both are zero. 0 for equal results, |k - 1| / max(k, 1) for
// b = k a (k > 0), 2 for b = -a, about 1.41 for unrelated ones of equal norm.
double twinDistance(std::span<const float> a, std::span<const float> b);

// The same, fed in consecutive pieces of both (two stored payloads read in chunks); the sums run
// in the same order, so the value is bit-identical to twinDistance.
class TwinDistanceAccumulator {
  public:
    void add(std::span<const float> a, std::span<const float> b);
    double value() const;

  private:
    double m_diff = 0, m_na = 0, m_nb = 0;
};

// A client whose results disagreed with their twins' `disagreements` times and agreed
// `agreements` times is blocked once it has at least `strikes` disagreements and more of them
// than agreements: an honest client meets a disagreeing twin only when its twin's worker is the
// faulty one, so while fewer than half of the workers are faulty its agreements outnumber them.
bool blockedByTwins(int64_t agreements, int64_t disagreements, int strikes);

// For `tandem-coordinator status`: the checks of a run and its blocked clients.
struct BlockedClient {
    int64_t id = 0;
    std::string name;  // as registered, made printable (net::quotable)
    int64_t agreements = 0, disagreements = 0;
    int64_t blockedUnix = 0;
};
struct TwinSummary {
    int64_t agreed = 0, disagreed = 0;  // decided checks
    int64_t waiting = 0;                // results held until their twin arrives
    std::vector<BlockedClient> blocked;
};
Expected<TwinSummary> readTwinSummary(const std::filesystem::path& stateDir, int64_t runId,
                                      const std::string& databaseUrl = {});

}  // namespace tandem::coord
