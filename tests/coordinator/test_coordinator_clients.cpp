// The client registry alone, on its own database: registration stores only the token's SHA-256,
// authentication maps "Bearer <token>" to the client and refuses anything else with 401, and
// last_seen is kept in memory and written only in the coordinator's batches.
#include "client_registry.hpp"
#include "schema.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace tandem;
using namespace tandem::coord;

namespace {

struct Fixture {
    QTemporaryDir dir;
    std::optional<Database> db;
    int64_t clock = 1000;
    std::vector<std::string> log;
    std::optional<ClientRegistry> registry;

    Fixture() {
        storage::OpenOptions options;
        options.migrations = kMigrations;
        auto opened =
            Database::open(std::filesystem::path(dir.path().toStdString()) / "c.db", options);
        if (opened)
            db.emplace(std::move(*opened));
        if (db)
            registry.emplace(
                *db, [this] { return clock; },
                [this](const std::string& line) { log.push_back(line); });
    }

    int64_t lastSeen(int64_t id) {
        auto q = db->prepare("SELECT last_seen_unix FROM clients WHERE id = ?");
        q->bind(1, id);
        return q->step() ? q->integer(0) : -1;
    }
};

net::RegisterRequest request(const std::string& name) {
    net::RegisterRequest r;
    r.name = name;
    r.publicKey.fill(7);
    r.hardware = "test cpu";
    return r;
}

}  // namespace

class TestCoordinatorClients : public QObject {
    Q_OBJECT

  private slots:
    void registersAndAuthenticates() {
        Fixture f;
        QVERIFY(f.registry);
        net::PublicKey coordinatorKey;
        coordinatorKey.fill(9);
        auto a = f.registry->add(request("alice"), coordinatorKey);
        auto b = f.registry->add(request("bob"), coordinatorKey);
        QVERIFY(a.ok() && b.ok());
        QCOMPARE(a.value().clientId, int64_t{1});
        QCOMPARE(b.value().clientId, int64_t{2});
        QCOMPARE(a.value().token.size(), size_t(64));  // 32 random bytes in hex
        QVERIFY(a.value().token != b.value().token);
        QVERIFY(a.value().coordinatorPublicKey == coordinatorKey);
        QCOMPARE(f.log.size(), size_t(2));
        QVERIFY(f.log[0].find("\"alice\" (test cpu)") != std::string::npos);

        auto idA = f.registry->authenticate("Bearer " + a.value().token);
        auto idB = f.registry->authenticate("Bearer " + b.value().token);
        QVERIFY(idA.ok() && idB.ok());
        QCOMPARE(idA.value(), int64_t{1});
        QCOMPARE(idB.value(), int64_t{2});

        // Only the token's SHA-256 is stored.
        auto q = f.db->prepare("SELECT token_sha256, public_key, name FROM clients WHERE id = 1");
        QVERIFY(q->step());
        const auto stored = q->blob(0);
        const auto expected = net::sha256(a.value().token);
        QVERIFY(std::vector<uint8_t>(expected.begin(), expected.end()) == stored);
        QCOMPARE(q->blob(1), std::vector<uint8_t>(32, 7));
        QCOMPARE(q->text(2), std::string("alice"));
    }

    void refusesBadTokens() {
        Fixture f;
        QVERIFY(f.registry);
        auto a = f.registry->add(request("alice"), net::PublicKey{});
        QVERIFY(a.ok());
        const std::string token = a.value().token;
        for (const std::string& header :
             {std::string(), "Basic " + token, "bearer " + token, token, "Bearer " + token + "x",
              "Bearer " + std::string(token.rbegin(), token.rend()),
              "Bearer " + token + std::string(200, ' ')}) {
            auto r = f.registry->authenticate(header);
            QVERIFY2(!r.ok(), header.c_str());
            QCOMPARE(r.refusal().httpStatus, 401);
            QCOMPARE(r.refusal().code, std::string("unauthorized"));
        }
        QVERIFY(f.registry->authenticate("").refusal().message.starts_with("no bearer token"));
        QVERIFY(f.registry->authenticate("Bearer nope")
                    .refusal()
                    .message.starts_with("the bearer token is not known"));
    }

    void lastSeenWrittenInBatches() {
        Fixture f;
        QVERIFY(f.registry);
        auto a = f.registry->add(request("alice"), net::PublicKey{});
        auto b = f.registry->add(request("bob"), net::PublicKey{});
        QCOMPARE(f.lastSeen(1), int64_t{1000});  // registration
        QVERIFY(!f.registry->lastSeenChanged());
        f.clock = 1030;
        QVERIFY(f.registry->authenticate("Bearer " + a.value().token).ok());
        f.clock = 1031;
        QVERIFY(f.registry->authenticate("Bearer " + a.value().token).ok());
        // A request writes nothing: the time waits for the batch.
        QCOMPARE(f.lastSeen(1), int64_t{1000});
        QVERIFY(f.registry->lastSeenChanged());
        QVERIFY(f.registry->writeLastSeen());
        f.registry->markLastSeenWritten();
        QCOMPARE(f.lastSeen(1), int64_t{1031});  // the latest request
        QCOMPARE(f.lastSeen(2), int64_t{1000});  // bob made none
        QVERIFY(!f.registry->lastSeenChanged());
        // Written once: a later batch without requests writes nothing again.
        auto u = f.db->prepare("UPDATE clients SET last_seen_unix = 5 WHERE id = 1");
        QVERIFY(u && u->run());
        QVERIFY(f.registry->writeLastSeen());
        QCOMPARE(f.lastSeen(1), int64_t{5});
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorClients)
#include "test_coordinator_clients.moc"
