// The request id of POST /v1/work (its Idempotency-Key header) and the list of GET /v1/work
// (net/held_work.hpp): formats written and read back, every malformed field refused with a message
// that names it.
#include "held_work.hpp"

#include <QtTest>

#include <set>

using namespace tandem;
using namespace tandem::net;

namespace {

bool says(const Error& e, const std::string& part) {
    return e.message.find(part) != std::string::npos;
}

}  // namespace

class TestNetHeldWork : public QObject {
    Q_OBJECT

  private slots:
    void requestIds() {
        QVERIFY(isRequestId("a"));
        QVERIFY(isRequestId("A-z_09"));
        QVERIFY(isRequestId(std::string(64, 'x')));
        QVERIFY(!isRequestId(""));
        QVERIFY(!isRequestId(std::string(65, 'x')));
        for (const char* bad : {"a b", "a/b", "a.b", "é", "a\nb", "a\"b"})
            QVERIFY2(!isRequestId(bad), bad);
        std::set<std::string> seen;
        for (int i = 0; i < 100; ++i) {
            const std::string id = newRequestId();
            QCOMPARE(id.size(), size_t{32});
            QCOMPARE(id.find_first_not_of("0123456789abcdef"), std::string::npos);
            seen.insert(id);
        }
        QCOMPARE(seen.size(), size_t{100});
    }

    void heldListRoundTrip() {
        HeldWorkUnits list;
        list.units.push_back({7, "r-7", 3, 12, 1795300000, 1795300600});
        list.units.push_back({9, "", 4, 0, 1795300100, 1795300700});
        auto back = HeldWorkUnits::fromJson(list.toJson());
        QVERIFY(back);
        QVERIFY(back->units == list.units);
        QVERIFY(HeldWorkUnits::fromJson(R"({"work_units":[]})")->units.empty());
    }

    void heldListRefusals() {
        const std::string ok =
            R"("work_unit_id":1,"request_id":"r","base_version":0,"last_step":0,"heartbeat_unix":1)";
        struct Case {
            std::string json;
            std::string says;
        };
        const std::vector<Case> cases = {
            {"[]", "expected a JSON object"},
            {"{", "expected a JSON object"},
            {R"({"work_units":{}})", "field 'work_units' must be an array"},
            {R"({"work_units":[1]})", "entry 0 must be an object"},
            {"{\"work_units\":[{" + ok + "}]}", "entry 0: field 'deadline_unix' is missing"},
            {"{\"work_units\":[{" + ok + R"(,"deadline_unix":-1}]})",
             "field 'deadline_unix' must be at least 0, found -1"},
            {"{\"work_units\":[{" + ok + R"(,"deadline_unix":"5"}]})",
             "field 'deadline_unix' must be an integer"},
            {R"({"work_units":[{"work_unit_id":1,"request_id":"a b","base_version":0,)"
             R"("last_step":0,"heartbeat_unix":1,"deadline_unix":1}]})",
             "field 'request_id' is not a request id"},
            {R"({"work_units":[{"work_unit_id":1,"base_version":0,"last_step":0,)"
             R"("heartbeat_unix":1,"deadline_unix":1}]})",
             "field 'request_id' must be a string"},
        };
        for (const auto& c : cases) {
            auto r = HeldWorkUnits::fromJson(c.json);
            QVERIFY2(!r, c.json.c_str());
            QVERIFY2(says(r.error(), c.says), r.error().message.c_str());
        }
        std::string many = R"({"work_units":[)";
        for (int i = 0; i < 1001; ++i)
            many += std::string(i ? "," : "") + "{}";
        auto tooMany = HeldWorkUnits::fromJson(many + "]}");
        QVERIFY(!tooMany && says(tooMany.error(), "1001 entries, at most 1000"));
    }
};

QTEST_APPLESS_MAIN(TestNetHeldWork)
#include "test_net_held_work.moc"
