// The eager start (manifest start_blend, docs/protocol.md): a unit whose manifest says b > 0
// starts from (1 - b) x the weights it downloaded + b x the worker's own end point of its last
// unit of the run, and its result stays relative to the downloaded weights. The oracle replays
// the units with a CPU backend of its own (same data, seeds, schedule and AdamW moments) and
// compares the uploaded fp16 pseudo-gradients byte for byte.
#include "engine_harness.hpp"

#include "corpus.hpp"
#include "model.hpp"

#include <QTest>

#include <cstring>

using namespace tandem;
using namespace tandem::testing;

namespace {

// The fp16 payloads of units 1 and 2 as the worker uploaded them.
std::map<int64_t, std::vector<uint8_t>> engineResults(float startBlend) {
    FakeCoordinator api;
    api.startBlend = startBlend;
    Harness h(api);
    h.cfg.maxWorkUnits = 2;
    h.cfg.checkpointIntervalMs = 5 * 60 * 1000;  // the test clock stands still: no checkpoints
    std::map<int64_t, std::vector<uint8_t>> out;
    if (!h.make().ok())
        return out;
    h.engine->start();
    if (!h.waitState(EngineState::Stopped))
        return out;
    std::lock_guard lock(api.mu);
    for (const auto& [id, body] : api.accepted)
        out[id].assign(body.begin() + net::kResultHeaderBytes, body.end());
    return out;
}

// The same two units trained here: unit 1 from the weights W with zero moments, unit 2 from
// W + blend x (E1 - W), E1 unit 1's end point, with unit 1's moments; each uploads W - end.
std::map<int64_t, std::vector<uint8_t>> replay(float blend) {
    FakeCoordinator api;  // for its manifests, weights and text (nothing is requested)
    const ModelConfig& model = api.model();
    std::vector<float> weights(static_cast<size_t>(model.parameterCount()));
    initParameters(ParameterLayout(model), weights, 7);  // what FakeCoordinator serves
    auto backend = makeCpuBackend("cpu", 1).value();
    const net::Manifest first = api.manifestFor(1);
    if (!backend->allocate(model, first.batch, first.seqLen))
        return {};
    OptimizerState zero;
    zero.m.assign(weights.size(), 0.0f);
    zero.v.assign(weights.size(), 0.0f);
    if (!backend->loadOptimizerState(zero))
        return {};
    const core::EngineConfig defaults;
    std::map<int64_t, std::vector<uint8_t>> out;
    std::vector<float> start = weights;
    for (int64_t id : {1, 2}) {
        const net::Manifest m = api.manifestFor(id);
        if (id == 2) {
            std::vector<float> end(weights.size());
            if (!backend->storeParameters(end))
                return {};
            for (size_t i = 0; i < start.size(); ++i)
                start[i] = weights[i] + blend * (end[i] - weights[i]);
        }
        if (!backend->loadParameters(start))
            return {};
        const TokenView tokens(api.text().data() + m.dataOffset, m.dataLength, 1);
        BatchSampler sampler(tokens, m.seed);
        std::vector<int32_t> inputs(static_cast<size_t>(m.batch) * m.seqLen),
            targets(inputs.size());
        for (int step = 0; step < m.innerSteps; ++step) {
            sampler.next(m.batch, m.seqLen, inputs, targets);
            if (!backend->forward(inputs, targets, m.batch, m.seqLen) || !backend->backward() ||
                !backend->adamwStep(defaults.adamw, m.learningRate(step)))
                return {};
        }
        std::vector<uint16_t> payload(weights.size());
        if (!backend->encodePseudoGradient(weights, payload))
            return {};
        auto& bytes = out[id];
        bytes.resize(payload.size() * 2);
        for (size_t i = 0; i < payload.size(); ++i) {  // little-endian, as the result format
            bytes[2 * i] = static_cast<uint8_t>(payload[i] & 0xff);
            bytes[2 * i + 1] = static_cast<uint8_t>(payload[i] >> 8);
        }
    }
    return out;
}

}  // namespace

class TestEngineStartBlend : public QObject {
    Q_OBJECT

  private slots:
    // start_blend 0 (and a manifest of protocol 2) is today's start: the downloaded weights.
    void zeroStartsFromTheWeights() {
        const auto worker = engineResults(0.0f);
        const auto expected = replay(0.0f);
        QCOMPARE(worker.size(), size_t{2});
        QCOMPARE(expected.size(), size_t{2});
        QVERIFY(worker.at(1) == expected.at(1));
        QVERIFY(worker.at(2) == expected.at(2));
    }

    // Unit 1 has no end point to blend with (the first unit of the run): it starts from the
    // weights. Unit 2 starts from the blend; a replay with another blend gives other bytes, so
    // the comparison would see a worker that ignored the field.
    void blendStartsBetweenTheWeightsAndTheLastEndPoint() {
        const auto worker = engineResults(0.5f);
        const auto expected = replay(0.5f);
        QCOMPARE(worker.size(), size_t{2});
        QVERIFY(worker.at(1) == expected.at(1));
        QVERIFY(worker.at(2) == expected.at(2));
        QVERIFY(replay(0.0f).at(2) != expected.at(2));
        QVERIFY(replay(1.0f).at(2) != expected.at(2));
    }

    // Blend 1: the unit continues from the worker's own end point (DiLoCo's rule for a worker
    // whose result did not reach the weights).
    void oneContinuesFromTheLastEndPoint() {
        const auto worker = engineResults(1.0f);
        const auto expected = replay(1.0f);
        QCOMPARE(worker.size(), size_t{2});
        QVERIFY(worker.at(2) == expected.at(2));
    }
};

QTEST_GUILESS_MAIN(TestEngineStartBlend)
#include "test_engine_start_blend.moc"
