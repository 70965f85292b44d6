// The small text helpers.
#include "text.hpp"

#include <QtTest>

using namespace tandem;

class TestText : public QObject {
    Q_OBJECT
  private slots:
    void trimWhitespaceRemovesBothEnds() {
        QCOMPARE(trimWhitespace("  a b \t\r\n"), std::string("a b"));
        QCOMPARE(trimWhitespace("\v\fx"), std::string("x"));
        QCOMPARE(trimWhitespace("x"), std::string("x"));
        QCOMPARE(trimWhitespace(" \t\n "), std::string());
        QCOMPARE(trimWhitespace(""), std::string());
        QCOMPARE(trimWhitespace(std::string_view("\0a ", 3)),
                 std::string("\0a", 2));  // NUL is not space
    }

    void validUtf8ReplacesWhatIsNotACharacter() {
        const std::string fffd = "\xEF\xBF\xBD";
        QCOMPARE(validUtf8("plain \xC3\xA9t\xC3\xA9"), std::string("plain \xC3\xA9t\xC3\xA9"));
        QCOMPARE(validUtf8("a\xFF"
                           "b"),
                 "a" + fffd + "b");
        QCOMPARE(validUtf8("cut \xE2\x82"), "cut " + fffd + fffd);  // a cut-off euro sign
        QCOMPARE(validUtf8("\xC0\xAF"), fffd + fffd);               // overlong '/'
        QCOMPARE(validUtf8("\xED\xA0\x80"), fffd + fffd + fffd);    // a surrogate
        QCOMPARE(validUtf8("\xF0\x9F\x98\x80"), std::string("\xF0\x9F\x98\x80"));
        QCOMPARE(validUtf8(""), std::string());
        QCOMPARE(utf8Length("\xE2\x82\xAC", 0), size_t{3});
        QCOMPARE(utf8Length("\xF4\x90\x80\x80", 0), size_t{0});  // above U+10FFFF
    }
};

QTEST_APPLESS_MAIN(TestText)
#include "test_text.moc"
