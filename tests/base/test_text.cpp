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
};

QTEST_APPLESS_MAIN(TestText)
#include "test_text.moc"
