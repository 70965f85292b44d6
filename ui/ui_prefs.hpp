// Small UI-only state kept between runs (not settings a person edits): whether a one-time
// notice was shown, the last bandwidth measurement, the window geometry. An INI file next to the
// ledger (ui.ini), so tests can point it at a temporary directory.
#pragma once

#include <QSettings>
#include <QString>

#include <memory>

namespace tandem::ui {

class UiPrefs {
  public:
    explicit UiPrefs(const QString& file);
    bool flag(const QString& key) const;
    void setFlag(const QString& key, bool on = true);
    double number(const QString& key, double fallback = 0) const;
    void setNumber(const QString& key, double value);
    QByteArray bytes(const QString& key) const;
    void setBytes(const QString& key, const QByteArray& value);
    QString text(const QString& key) const;
    void setText(const QString& key, const QString& value);

  private:
    std::unique_ptr<QSettings> m_settings;
};

}  // namespace tandem::ui
