#include "single_instance.hpp"

#include <QCryptographicHash>
#include <QLocalServer>
#include <QLocalSocket>

#include <unistd.h>

namespace tandem::ui {

namespace {
constexpr char kRaise[] = "raise\n";
}

QString SingleInstance::serverNameFor(const QString& key) {
    const QByteArray hash =
        QCryptographicHash::hash(key.toUtf8(), QCryptographicHash::Sha256).toHex().left(16);
    return QStringLiteral("tandem-%1-%2")
        .arg(static_cast<qulonglong>(::getuid()))
        .arg(QString::fromLatin1(hash));
}

SingleInstance::SingleInstance(const QString& key, QObject* parent)
    : QObject(parent), m_name(serverNameFor(key)) {}

SingleInstance::~SingleInstance() {
    if (m_server)
        m_server->close();
}

bool SingleInstance::claim(bool raise) {
    {
        QLocalSocket probe;
        probe.connectToServer(m_name);
        if (probe.waitForConnected(1000)) {
            if (raise) {
                probe.write(kRaise);
                probe.waitForBytesWritten(1000);
                probe.waitForReadyRead(1000);  // the first one answers "ok"
            }
            probe.disconnectFromServer();
            return false;
        }
    }
    // Nobody answers: a socket file left by a crash is stale.
    QLocalServer::removeServer(m_name);
    m_server = new QLocalServer(this);
    m_server->setSocketOptions(QLocalServer::UserAccessOption);
    if (!m_server->listen(m_name))
        return true;  // cannot listen (odd runtime dir): run anyway rather than refuse to start
    connect(m_server, &QLocalServer::newConnection, this, [this] {
        while (QLocalSocket* s = m_server->nextPendingConnection()) {
            connect(s, &QLocalSocket::disconnected, s, &QObject::deleteLater);
            connect(s, &QLocalSocket::readyRead, this, [this, s] {
                const QByteArray line = s->readAll();
                if (line.startsWith("raise")) {
                    s->write("ok\n");
                    s->flush();
                    emit raiseRequested();
                }
            });
        }
    });
    return true;
}

}  // namespace tandem::ui
