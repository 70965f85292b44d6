#include "receipt_dialog.hpp"

#include "state_view.hpp"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QVBoxLayout>

namespace tandem::ui {

namespace {
QPlainTextEdit* readOnlyText(const QString& objectName, const QString& text, int lines,
                             QWidget* parent) {
    auto* edit = new QPlainTextEdit(text, parent);
    edit->setObjectName(objectName);
    edit->setReadOnly(true);
    edit->setFixedHeight(edit->fontMetrics().lineSpacing() * lines + 12);
    return edit;
}

QJsonDocument bodyJson(const core::Receipt& r) {
    return QJsonDocument::fromJson(
        QByteArray(reinterpret_cast<const char*>(r.body.data()), qsizetype(r.body.size())));
}
}  // namespace

ReceiptDialog::ReceiptDialog(const core::Receipt& receipt,
                             const std::filesystem::path& registrationFile,
                             const core::TimeZone& zone, QWidget* parent)
    : QDialog(parent), m_receipt(receipt), m_check(core::checkReceipt(receipt, registrationFile)) {
    setObjectName(QStringLiteral("receiptDialog"));
    setWindowTitle(tr("Receipt for work unit %1").arg(QString::fromStdString(receipt.workUnitId)));
    auto* layout = new QVBoxLayout(this);
    // Wide enough for the 88 characters of a signature on two lines.
    setMinimumWidth(fontMetrics().averageCharWidth() * 64);

    m_verified = new QLabel(this);
    m_verified->setObjectName(QStringLiteral("verified"));
    m_verified->setWordWrap(true);
    m_verified->setTextFormat(Qt::PlainText);
    const QString detail = QString::fromStdString(m_check.detail);
    switch (m_check.verdict) {
        case core::ReceiptVerdict::Verified:
            m_verified->setText(
                tr("✔ Verified: signed by the coordinator this computer "
                   "registered with."));
            break;
        case core::ReceiptVerdict::NotVerified:
            m_verified->setText(tr("✘ Not verified: %1.").arg(detail));
            break;
        case core::ReceiptVerdict::NoKey:
            m_verified->setText(tr("Cannot be checked here: no coordinator key (%1).").arg(detail));
            break;
        case core::ReceiptVerdict::Unreadable:
            m_verified->setText(
                tr("Cannot be checked: the stored receipt cannot be read (%1).").arg(detail));
            break;
    }
    layout->addWidget(m_verified);

    const QLocale loc;
    auto* form = new QFormLayout();
    auto value = [this](const QString& text) {
        auto* label = new QLabel(text, this);
        label->setTextInteractionFlags(Qt::TextSelectableByMouse);
        label->setWordWrap(true);
        return label;
    };
    form->addRow(tr("Work unit:"), value(QString::fromStdString(receipt.workUnitId)));
    form->addRow(tr("Applied to round:"), value(loc.toString(qlonglong(receipt.roundApplied))));
    form->addRow(tr("Weight in that round:"), value(loc.toString(receipt.weight, 'f', 0)));
    form->addRow(
        tr("Credit:"),
        value(tr("%1 (one for each token trained)").arg(loc.toString(receipt.credit, 'f', 0))));
    form->addRow(tr("Received:"), value(formatDateTime(receipt.receivedAtMs, zone)));
    layout->addLayout(form);

    layout->addWidget(new QLabel(tr("Signature of the coordinator (Ed25519, base64):"), this));
    layout->addWidget(readOnlyText(QStringLiteral("signature"),
                                   QString::fromStdString(m_check.signatureBase64), 3, this));
    if (!m_check.keyBase64.empty()) {
        layout->addWidget(new QLabel(tr("Checked against the coordinator key:"), this));
        layout->addWidget(readOnlyText(QStringLiteral("coordinatorKey"),
                                       QString::fromStdString(m_check.keyBase64), 2, this));
    }
    layout->addWidget(new QLabel(tr("The receipt as the coordinator sent it:"), this));
    const QJsonDocument doc = bodyJson(receipt);
    layout->addWidget(readOnlyText(
        QStringLiteral("receiptJson"),
        doc.isNull() ? QString::fromUtf8(reinterpret_cast<const char*>(receipt.body.data()),
                                         qsizetype(receipt.body.size()))
                     : QString::fromUtf8(doc.toJson(QJsonDocument::Indented)),
        8, this));

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    auto* exportButton = buttons->addButton(tr("Export as JSON…"), QDialogButtonBox::ActionRole);
    exportButton->setObjectName(QStringLiteral("exportReceipt"));
    connect(exportButton, &QPushButton::clicked, this, &ReceiptDialog::exportAsked);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
}

bool ReceiptDialog::exportTo(const QString& path, QString* error) const {
    QJsonObject o;
    o.insert(QStringLiteral("work_unit"), QString::fromStdString(m_receipt.workUnitId));
    o.insert(QStringLiteral("round"), qint64(m_receipt.roundApplied));
    o.insert(QStringLiteral("weight"), m_receipt.weight);
    o.insert(QStringLiteral("credit"), m_receipt.credit);
    o.insert(QStringLiteral("received_unix_ms"), qint64(m_receipt.receivedAtMs));
    const QJsonDocument body = bodyJson(m_receipt);
    if (body.isObject())
        o.insert(QStringLiteral("receipt"), body.object());
    o.insert(QStringLiteral("signature"), QString::fromStdString(m_check.signatureBase64));
    if (!m_check.keyBase64.empty())
        o.insert(QStringLiteral("coordinator_key"), QString::fromStdString(m_check.keyBase64));
    o.insert(QStringLiteral("verified"), m_check.verdict == core::ReceiptVerdict::Verified);
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(QJsonDocument(o).toJson(QJsonDocument::Indented)) < 0 || !f.commit()) {
        if (error)
            *error = tr("Cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

void ReceiptDialog::exportAsked() {
    const QString suggested =
        QStringLiteral("receipt-%1.json").arg(QString::fromStdString(m_receipt.workUnitId));
    const QString path = m_choosePath
                             ? m_choosePath()
                             : QFileDialog::getSaveFileName(this, tr("Export the receipt"),
                                                            suggested, tr("JSON files (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!exportTo(path, &error))
        QMessageBox::warning(this, tr("Export the receipt"), error);
}

}  // namespace tandem::ui
