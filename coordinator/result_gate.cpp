// The Byzantine gate applied to an upload (robust_gate.hpp has the rules): the reference norm
// from the accepted results of recent rounds (kept in the database, so a restart keeps it), the
// reference direction (the last outer step), and replays.
#include "coordinator_impl.hpp"

#include "checkpoint.hpp"

namespace tandem::coord {

GateConfig Coordinator::Impl::gateConfig() const {
    GateConfig g;
    g.maxNormRatio = cfg.maxNormRatio;
    g.clipRatio = cfg.clipNormRatio;
    g.maxRelativeNorm = cfg.maxRelativeNorm;
    g.maxAbsoluteNorm = cfg.maxAbsoluteNorm;
    g.minCosine = cfg.minCosine;
    g.referenceRounds = cfg.referenceRounds;
    return g;
}

double Coordinator::Impl::normReference(int64_t workUnitId) {
    // Only accepted results have rows, so refused ones never move the reference.
    // Not the unit's own (another piece of a sharded run's result may have recorded it).
    auto q =
        db.prepare("SELECT norm FROM results WHERE round > ? AND round <= ? AND work_unit_id <> ?");
    if (!q)
        return 0;
    q->bind(1, version - std::max(1, cfg.referenceRounds)).bind(2, version).bind(3, workUnitId);
    std::vector<double> norms;
    while (q->step())
        norms.push_back(q->real(0));
    return robustReference(std::move(norms)).value_or(0);
}

GateVerdict Coordinator::Impl::gateResult(const UploadSession::State& s) {
    const UploadStream& upload = s.stream;
    if (cfg.refuseRepeatedPayloads) {
        auto q = db.prepare(
            "SELECT work_unit_id FROM results WHERE payload_sha256 = ? AND work_unit_id <> ? "
            "LIMIT 1");
        if (q) {
            q->bind(1, std::span<const uint8_t>(upload.header().payloadSha256)).bind(2, s.wuId);
            if (q->step()) {
                GateVerdict v;
                v.code = "replayed_result";
                v.message = "this payload was already accepted for work unit " +
                            std::to_string(q->integer(0)) + "; a result is accepted once";
                v.weightFactor = 0;
                return v;
            }
        }
    }
    if (thetaNormVersion != version) {
        thetaNorm = l2Norm(theta);
        thetaNormVersion = version;
    }
    GateInput in;
    in.norm = upload.norm();
    in.weightsNorm = thetaNorm;
    if (const double ref = normReference(s.wuId); ref > 0)
        in.reference = ref;
    // The last outer step points the way: it was made of results that passed the gate, and
    // nothing uploaded to the open round can turn it (the round's running sum could be: in
    // tandem-bench-diloco one accepted noise upload first in each round made honest results
    // look unrelated to it). Absent in the run's first round.
    if (!lastOuterStep || cfg.minCosine <= -1) {
        // No direction yet, or the check is off (no cosine is below -1).
    } else if (upload.direction() == lastOuterStep) {
        in.cosine = upload.cosine();  // measured as it streamed
    } else {
        // A round closed during the upload: the direction moved; measured again from the file.
        auto reader = PayloadReader::open(upload.stagingFile(), payloadLayout());
        if (!reader)
            return GateVerdict{"internal", reader.error().message, 0};
        CosineAccumulator cosine;
        for (;;) {
            auto chunk = reader->next();
            if (!chunk)
                return GateVerdict{"internal", chunk.error().message, 0};
            if (chunk->empty())
                break;
            cosine.add(*chunk, std::span(*lastOuterStep)
                                   .subspan(static_cast<size_t>(reader->offset()), chunk->size()));
        }
        in.cosine = cosine.value();
    }
    return judgeResult(in, gateConfig());
}

void Coordinator::Impl::rememberOuterStep(std::span<const float> before,
                                          std::span<const float> after) {
    auto step = std::make_shared<std::vector<float>>(before.size());
    for (size_t i = 0; i < before.size(); ++i)
        (*step)[i] = before[i] - after[i];  // the sign of a delta: start - end
    lastOuterStep = std::move(step);
}

void Coordinator::Impl::restoreOuterStep() {
    lastOuterStep.reset();
    if (version == 0)
        return;
    std::error_code ec;
    if (!fs::exists(dirs.weights(version - 1), ec))
        return;  // removed beyond the staleness bound: the round's own results will point the way
    auto older = loadCheckpoint(dirs.weights(version - 1), run.model);
    if (!older || older->parameters.size() != theta.size()) {
        log("the last outer step is unavailable for the direction check: " +
            (older ? std::string("wrong size") : older.error().message));
        return;
    }
    rememberOuterStep(older->parameters, theta);
}

}  // namespace tandem::coord
