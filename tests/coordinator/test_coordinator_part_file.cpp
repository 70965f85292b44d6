// A shard's part of a version (coordinator/part_file.hpp): what is written is read back bit for
// bit, and every damaged or misnamed part is refused with a message that says what is wrong.
#include "part_file.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>

using namespace tandem;
using namespace tandem::coord;

namespace {

PartFile samplePart() {
    PartFile p;
    p.kind = PartKind::Weights;
    p.version = 7;
    p.parameterCount = 1000;
    p.range = {256, 512};
    for (int i = 0; i < 256; ++i)
        p.values.push_back(std::sin(float(i)) * 0.01f);
    p.values[3] = -0.0f;  // bits, not values, are what must survive
    return p;
}

bool contains(const std::string& text, const char* part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

class TestCoordinatorPartFile : public QObject {
    Q_OBJECT

  private slots:
    void roundTripKeepsEveryBit() {
        const PartFile p = samplePart();
        const auto bytes = serializePart(p);
        // The layout by hand: 48 bytes of header, the values, a CRC-32.
        QCOMPARE(bytes.size(), size_t{48 + 256 * 4 + 4});
        QCOMPARE(std::memcmp(bytes.data(), "TNDMPART", 8), 0);
        int64_t begin = 0;
        std::memcpy(&begin, bytes.data() + 32, 8);
        QCOMPARE(begin, int64_t{256});
        auto back = parsePartOf(bytes, PartKind::Weights, 7, 1000, {256, 512});
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(std::memcmp(back->values.data(), p.values.data(), 256 * 4), 0);
        QVERIFY(std::signbit(back->values[3]));
    }

    void damagedPartsAreRefused() {
        const auto good = serializePart(samplePart());
        auto flipped = good;
        flipped[48 + 100] ^= 1;
        auto r = parsePart(flipped);
        QVERIFY(!r.ok());
        QVERIFY2(contains(r.error().message, "CRC-32"), r.error().message.c_str());
        auto cut = good;
        cut.resize(cut.size() - 10);
        r = parsePart(cut);
        QVERIFY(!r.ok());
        QVERIFY2(contains(r.error().message, "truncated"), r.error().message.c_str());
        auto magic = good;
        magic[0] = 'X';
        QVERIFY(contains(parsePart(magic).error().message, "TNDMPART"));
        auto version = good;
        version[8] = 9;
        QVERIFY(contains(parsePart(version).error().message, "format version 9"));
        auto range = good;
        const int64_t past = 2000;  // end beyond P
        std::memcpy(range.data() + 40, &past, 8);
        QVERIFY(contains(parsePart(range).error().message, "not a range of the model"));
        QVERIFY(contains(parsePart(std::vector<uint8_t>(10)).error().message, "at least"));
    }

    void aPartOfAnotherVersionRangeOrKindIsRefused() {
        const auto bytes = serializePart(samplePart());
        auto r = parsePartOf(bytes, PartKind::Weights, 8, 1000, {256, 512});
        QVERIFY(!r.ok());
        QVERIFY2(contains(r.error().message,
                          "holds weights of version 7, range [256, 512) of "
                          "P = 1000; expected weights of version 8"),
                 r.error().message.c_str());
        QVERIFY(!parsePartOf(bytes, PartKind::Momentum, 7, 1000, {256, 512}).ok());
        QVERIFY(!parsePartOf(bytes, PartKind::Weights, 7, 1000, {0, 256}).ok());
        QVERIFY(!parsePartOf(bytes, PartKind::Weights, 7, 999, {256, 512}).ok());
    }

    void loadNamesTheFile() {
        QTemporaryDir dir;
        const auto path = std::filesystem::path(dir.path().toStdString()) / "w7.part";
        auto r = loadPart(path, PartKind::Weights, 7, 1000, {256, 512});
        QVERIFY(!r.ok());
        QVERIFY2(contains(r.error().message, "w7.part"), r.error().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorPartFile)
#include "test_coordinator_part_file.moc"
