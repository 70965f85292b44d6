// One Tandem per user and data directory: the first process listens on a local socket; a later
// launch connects, asks it to show its window, and exits.
#pragma once

#include <QObject>
#include <QString>

class QLocalServer;

namespace tandem::ui {

class SingleInstance final : public QObject {
    Q_OBJECT
  public:
    // key: e.g. the data directory; the socket name is derived from it and the user.
    explicit SingleInstance(const QString& key, QObject* parent = nullptr);
    ~SingleInstance() override;

    QString serverName() const { return m_name; }
    // True: this process is the first and now listens. False: another one runs (and was asked
    // to show itself when raise is true).
    bool claim(bool raise = true);
    static QString serverNameFor(const QString& key);

  signals:
    void raiseRequested();

  private:
    QString m_name;
    QLocalServer* m_server = nullptr;
};

}  // namespace tandem::ui
