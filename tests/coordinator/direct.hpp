// A coordinator driven by direct calls, without HTTP: a hand-driven clock, clients with their
// own keys, work requests and whole uploads. For the tests of the coordinator's parts.
#pragma once

#include "codec.hpp"
#include "harness.hpp"

#include <QTemporaryDir>

#include <fstream>
#include <iterator>
#include <memory>

namespace tandem::testing {

// A 1-layer model (P = 7,664) in units of at most 8 steps of 2 x 16 tokens; a fixed quorum of 3,
// no background threads.
inline coord::CoordinatorConfig directConfig() {
    coord::CoordinatorConfig c;
    c.model = "L=1,NH=2,C=16,T=16";
    c.innerSteps = 8;
    c.minInnerSteps = 2;
    c.batch = 2;
    c.quorum = 3;
    c.targetWorkUnitSeconds = 100;
    c.roundTimeoutSeconds = 600;
    c.maxStaleness = 1;
    c.heartbeatSeconds = 30;
    c.heartbeatTimeoutSeconds = 180;
    c.backgroundThreads = false;
    c.threads = 1;
    c.refuseRepeatedPayloads = false;  // the tests upload one payload many times
    c.newClientWorkUnits = 1000;       // and give new clients several units
    return c;
}

// A pseudo-gradient of P values scale x 0.001 x (i % 7 - 3), in fp16: one direction, any length.
inline std::vector<uint16_t> patternDelta(int64_t P, float scale = 1) {
    std::vector<uint16_t> d(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i)
        d[static_cast<size_t>(i)] = floatToHalf(scale * 0.001f * float(i % 7 - 3));
    return d;
}

struct DirectClient {
    int64_t id = 0;
    net::SigningKey key;
};

class DirectCoordinator {
  public:
    std::shared_ptr<int64_t> clock = std::make_shared<int64_t>(1'000'000);

    // withServer: also serve it over HTTPS (t().connect()), for the read-only routes.
    explicit DirectCoordinator(coord::CoordinatorConfig c = directConfig(),
                               size_t corpusBytes = 200000, bool withServer = false) {
        auto now = clock;
        c.clock = [now] { return *now; };
        const auto corpus = std::filesystem::path(m_corpusDir.path().toStdString()) / "corpus.txt";
        writeCorpus(corpus, corpusBytes);
        c.corpus = {corpus};
        m_t = std::make_unique<TestCoordinator>(c, withServer);
    }

    TestCoordinator& t() { return *m_t; }
    coord::Coordinator& coordinator() { return m_t->coordinator(); }

    DirectClient registerClient(const std::string& name) {
        DirectClient client{0, net::SigningKey::generate().value()};
        auto r = coordinator().registerClient(
            net::RegisterRequest{name, client.key.publicKey(), "test"}.toJson());
        if (r.ok())
            client.id = r.value().clientId;
        return client;
    }
    coord::Outcome<coord::WorkOffer> request(const DirectClient& client, double tokensPerSecond) {
        net::WorkRequest w;
        w.device = "cpu";
        w.tokensPerSecond = tokensPerSecond;
        return coordinator().requestWork(client.id, w.toJson());
    }
    net::Manifest work(const DirectClient& client, double tokensPerSecond = 0) {
        auto offer = request(client, tokensPerSecond);
        if (!offer.ok() || !offer.value().manifest)
            return {};
        return *offer.value().manifest;
    }
    // Begins, feeds (whole) and finishes an upload: the receipt JSON, or the first refusal.
    coord::Outcome<std::string> upload(const DirectClient& client, const BuiltResult& r) {
        auto session = coordinator().beginUpload(client.id, r.header.workUnitId,
                                                 static_cast<int64_t>(r.body.size()), r.signature);
        if (!session.ok())
            return session.refusal();
        if (auto answer = session.value()->feed(r.body))
            return *answer;
        return session.value()->finish(true);
    }

    std::vector<uint8_t> readStateFile(const std::filesystem::path& relative) {
        std::ifstream in(m_t->stateDir() / relative, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), {}};
    }
    bool logged(const std::string& part) {
        for (const auto& line : m_t->log())
            if (line.find(part) != std::string::npos)
                return true;
        return false;
    }

  private:
    QTemporaryDir m_corpusDir;
    std::unique_ptr<TestCoordinator> m_t;
};

}  // namespace tandem::testing
