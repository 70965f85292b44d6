// quotable(): request text made safe to quote. Hand-worked cases for each kind of byte, then
// random bytes: the output always encodes as JSON and never holds a control character.
#include "safe_text.hpp"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>

using tandem::net::loggable;
using tandem::net::quotable;

class TestSafeText : public QObject {
    Q_OBJECT
  private slots:
    void validUtf8IsKept() {
        QCOMPARE(quotable("plain /v1/work"), std::string("plain /v1/work"));
        QCOMPARE(quotable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                 std::string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    }

    void invalidBytesAreEscaped() {
        QCOMPARE(quotable("\xff"), std::string("\\xff"));
        QCOMPARE(quotable("a\xc3"), std::string("a\\xc3"));                  // cut sequence
        QCOMPARE(quotable("\xc0\xaf"), std::string("\\xc0\\xaf"));           // overlong '/'
        QCOMPARE(quotable("\xed\xa0\x80"), std::string("\\xed\\xa0\\x80"));  // surrogate
        QCOMPARE(quotable("\xf4\x90\x80\x80"), std::string("\\xf4\\x90\\x80\\x80"));  // > U+10FFFF
        QCOMPARE(quotable("\xe2\x82"), std::string("\\xe2\\x82"));
        QCOMPARE(quotable("\x80x"), std::string("\\x80x"));  // lone continuation byte
    }

    void controlCharactersAreEscaped() {
        QCOMPARE(quotable("a\nb\rc\td"), std::string("a\\nb\\rc\\td"));
        QCOMPARE(quotable(std::string("\x00\x01\x1b\x7f", 4)), std::string("\\x00\\x01\\x1b\\x7f"));
        QCOMPARE(quotable("back\\slash"), std::string("back\\\\slash"));
        QCOMPARE(quotable("\xc2\x85"), std::string("\\u0085"));   // NEL, a C1 line break
        QCOMPARE(quotable("\xc2\xa0"), std::string("\xc2\xa0"));  // no-break space is text
    }

    void lengthIsBoundedAtACharacterBoundary() {
        QCOMPARE(quotable("abcdef", 4), std::string("abcd..."));
        QCOMPARE(quotable("ab\xe2\x82\xac\xe2\x82\xac", 6), std::string("ab\xe2\x82\xac..."));
        QCOMPARE(quotable("a\xff", 4), std::string("a..."));  // an escape is not split either
        QCOMPARE(quotable("abcd", 4), std::string("abcd"));
        QCOMPARE(loggable(std::string(5000, 'x')).size(), size_t(2003));
    }

    void randomBytesAlwaysEncode() {
        std::mt19937 rng(7);
        for (int i = 0; i < 20000; ++i) {
            std::string s(rng() % 40, '\0');
            for (char& ch : s)
                ch = static_cast<char>(rng());
            const std::string q = quotable(s, 64);
            QVERIFY(q.size() <= 67);
            for (unsigned char ch : q)
                QVERIFY(ch >= 0x20 && ch != 0x7f);
            QVERIFY(!nlohmann::json(q).dump().empty());  // throws on invalid UTF-8
        }
    }
};

QTEST_GUILESS_MAIN(TestSafeText)
#include "test_safe_text.moc"
