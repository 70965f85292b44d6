#include "eliding_label.hpp"

#include <QResizeEvent>

namespace tandem::ui {

ElidingLabel::ElidingLabel(QWidget* parent) : QLabel(parent) {
    setWordWrap(false);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setTextFormat(Qt::PlainText);
}

void ElidingLabel::setFullText(const QString& text) {
    if (text == m_full)
        return;
    m_full = text;
    setToolTip(text);
    setAccessibleName(text);
    elide();
    updateGeometry();
}

QSize ElidingLabel::minimumSizeHint() const {
    // A few characters wide: the layout never has to make room for the whole text.
    return {fontMetrics().averageCharWidth() * 4, QLabel::minimumSizeHint().height()};
}

QSize ElidingLabel::sizeHint() const {
    return {fontMetrics().horizontalAdvance(m_full) + 2 * margin(), QLabel::sizeHint().height()};
}

void ElidingLabel::resizeEvent(QResizeEvent* event) {
    QLabel::resizeEvent(event);
    elide();
}

void ElidingLabel::elide() {
    // Not laid out yet: nothing to fit (the minimum size never depends on the text).
    const int room = contentsRect().width();
    setText(room <= 0 ? m_full : fontMetrics().elidedText(m_full, Qt::ElideRight, room));
}

}  // namespace tandem::ui
