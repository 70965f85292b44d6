// Getting work: asking the coordinator for a unit (its manifest must verify against the pinned
// key and have a shape that can run), then downloading its weights and data into cache/, named by
// their SHA-256 and checked against the manifest. The weights are rebuilt from the weights held
// (held_weights.hpp) and the manifest's weight deltas where it lists a chain from the version
// held that is smaller than the whole file (weight_rebuild.hpp); any failure of that falls back
// to the whole file, with one log line saying why. In the foreground (the engine thread) it shows
// its state and backs off on errors; as a prefetch (core/unit_prefetch.hpp, while another unit
// trains) it shows nothing, never waits at the rule gate and leaves errors to the foreground,
// which asks or downloads again. Internal to core/.
#pragma once

#include "engine_backoff.hpp"
#include "engine_shared.hpp"
#include "registration.hpp"
#include "rule_gate.hpp"
#include "unit_files.hpp"

#include <optional>

namespace tandem::core {

enum class FetchMode { Foreground, Prefetch };

class WorkFetcher {
  public:
    WorkFetcher(EngineShared& shared, RuleGate& gate, EngineBackoff& backoff, Registrar& registrar)
        : m_shared(shared), m_gate(gate), m_backoff(backoff), m_registrar(registrar) {}

    // Engine thread, registered. The unit offered, with its manifest.json written and its ledger
    // row; none when no work is offered (Idle until the coordinator's Retry-After), on an error
    // (backing off) or when the coordinator no longer knows the token (registration dropped).
    // tokensPerSecond: the measured speed, sent with the request.
    std::optional<ActiveUnit> fetch(double tokensPerSecond, FetchMode mode = FetchMode::Foreground);
    // Engine thread. The unit's weights and data, waiting first for the download cap; marks the
    // unit downloaded. False when held, stopped (pause, quit) or failed (backing off).
    // As a prefetch: only when the rules allow it now, keeping the files of `training` in cache/.
    bool download(ActiveUnit& unit, FetchMode mode = FetchMode::Foreground,
                  const net::Manifest* training = nullptr);

  private:
    // An error that is not the coordinator's answer: backs off in the foreground, logged only
    // for a prefetch.
    void failHere(FetchMode mode, const std::string& why);

    EngineShared& m_shared;
    RuleGate& m_gate;
    EngineBackoff& m_backoff;
    Registrar& m_registrar;
};

}  // namespace tandem::core
