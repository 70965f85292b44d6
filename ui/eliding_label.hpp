// A one-line label that can never widen its window: a text longer than the space it gets ends
// in "…"; the whole text is its tooltip and accessible name (details views and the log carry it
// too). For status texts, which may hold a long error, key or path.
#pragma once

#include <QLabel>

namespace tandem::ui {

class ElidingLabel final : public QLabel {
    Q_OBJECT
  public:
    explicit ElidingLabel(QWidget* parent = nullptr);
    void setFullText(const QString& text);
    QString fullText() const { return m_full; }
    QSize minimumSizeHint() const override;
    QSize sizeHint() const override;

  protected:
    void resizeEvent(QResizeEvent* event) override;

  private:
    void elide();
    QString m_full;
};

}  // namespace tandem::ui
