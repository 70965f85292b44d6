// The receipt view of the Contributions page, driven by objectName: a receipt signed by the
// coordinator's key shows "verified", one altered after signing or checked without a
// registration does not; "Export as JSON" writes the receipt, its signature and the verdict.
// Receipts are signed here with a fresh Ed25519 key, as the coordinator signs them. With
// TANDEM_SHOTS=<dir> it saves the dialog as receipt.png, to look at.
#include "pages.hpp"
#include "protocol.hpp"
#include "receipt_dialog.hpp"
#include "registration_file.hpp"
#include "ui_fixture.hpp"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>

using namespace tandem;
using namespace tandem::uitest;

class TestUiReceipts : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    core::ManualClock m_clock{kNowMs};
    core::FixedOffsetTimeZone m_zone{0};
    std::unique_ptr<core::Ledger> m_ledger;
    std::unique_ptr<ui::EngineBridge> m_bridge;
    core::Settings m_settings;
    ui::UiContext m_ctx;
    std::string m_signatureBase64;  // of unit 201's receipt

    // Unit `id` accepted with a receipt signed by `key`; `alter` changes the body after signing.
    void acceptedUnit(const std::string& id, int64_t round, const net::SigningKey& key,
                      bool alter) {
        core::WorkUnitRecord u;
        u.id = id;
        u.run = "1";
        u.tokens = 12800;
        u.state = core::WorkUnitState::Accepted;
        u.createdAtMs = kNowMs - 3600'000;
        u.updatedAtMs = u.createdAtMs;
        must(m_ledger->recordWorkUnit(u));
        net::Receipt r;
        r.workUnitId = std::stoll(id);
        r.clientId = 7;
        r.round = round;
        r.weight = 12800;
        r.credit = 12800;
        r.timeUnix = kNowMs / 1000;
        r.sign(key);
        if (alter)
            r.weight = 99999;  // after signing: the signature no longer fits
        const std::string json = r.toJson();
        core::Receipt stored;
        stored.workUnitId = id;
        stored.roundApplied = round;
        stored.weight = r.weight;
        stored.credit = 12800;
        stored.receivedAtMs = kNowMs - 1800'000;
        stored.signature.assign(r.signature.begin(), r.signature.end());
        stored.body.assign(json.begin(), json.end());
        must(m_ledger->recordReceipt(stored));
        if (id == "201")
            m_signatureBase64 = net::toBase64(r.signature);
    }

    // The page's dialog for unit `id`, opened with the "Receipt…" button.
    ui::ReceiptDialog* openByButton(ui::ContributionsPage& page, const QString& id) {
        QTableWidget* table = page.table();
        for (int row = 0; row < table->rowCount(); ++row)
            if (table->item(row, 0)->text() == id)
                table->setCurrentCell(row, 0);
        auto* button = page.findChild<QPushButton*>(QStringLiteral("showReceipt"));
        if (!button || !button->isEnabled())
            return nullptr;
        QTest::mouseClick(button, Qt::LeftButton);
        return page.findChild<ui::ReceiptDialog*>(QStringLiteral("receiptDialog"));
    }

  private slots:
    void initTestCase() {
        QLocale::setDefault(QLocale::c());
        auto ledger =
            core::Ledger::open((m_dir.path() + QStringLiteral("/ledger.db")).toStdString());
        QVERIFY(ledger);
        m_ledger = std::move(*ledger);
        auto coordinator = net::SigningKey::generate();
        auto stranger = net::SigningKey::generate();
        QVERIFY(coordinator && stranger);
        acceptedUnit("201", 12, *coordinator, false);
        acceptedUnit("202", 13, *coordinator, true);
        acceptedUnit("203", 14, *stranger, false);
        // What the engine wrote when it registered: the coordinator's key, pinned.
        core::Registration reg;
        reg.coordinatorUrl = "https://127.0.0.1:8443";
        reg.clientId = 7;
        reg.token = "t";
        reg.coordinatorKey = coordinator->publicKey();
        QFile f(m_dir.path() + QStringLiteral("/registration.json"));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray::fromStdString(core::registrationJson(reg)));
        f.close();
        m_bridge = std::make_unique<ui::EngineBridge>(m_clock, m_zone);
        m_bridge->setLedger(m_ledger.get());
        m_ctx.bridge = m_bridge.get();
        m_ctx.settings = &m_settings;
        m_ctx.dataDirectory = m_dir.path().toStdString();
    }

    void verifiedReceiptAndExport() {
        ui::ContributionsPage page(m_ctx, nullptr);
        page.refresh();
        QVERIFY(!page.findChild<QPushButton*>(QStringLiteral("showReceipt"))->isEnabled());
        ui::ReceiptDialog* dialog = openByButton(page, QStringLiteral("201"));
        QVERIFY(dialog);
        QVERIFY2(dialog->verdict() == core::ReceiptVerdict::Verified,
                 qPrintable(dialog->verifiedLabel()->text()));
        auto* verified = dialog->findChild<QLabel*>(QStringLiteral("verified"));
        QVERIFY2(verified->text().startsWith(QStringLiteral("✔ Verified")),
                 qPrintable(verified->text()));
        if (const QString dir = qEnvironmentVariable("TANDEM_SHOTS"); !dir.isEmpty())
            dialog->grab().save(dir + QStringLiteral("/receipt.png"));
        QCOMPARE(dialog->findChild<QPlainTextEdit*>(QStringLiteral("signature"))->toPlainText(),
                 QString::fromStdString(m_signatureBase64));
        QVERIFY(dialog->findChild<QPlainTextEdit*>(QStringLiteral("receiptJson"))
                    ->toPlainText()
                    .contains(QStringLiteral("\"round\": 12")));

        const QString path = m_dir.path() + QStringLiteral("/receipt-201.json");
        dialog->setPathChooser([path] { return path; });
        QTest::mouseClick(dialog->findChild<QPushButton*>(QStringLiteral("exportReceipt")),
                          Qt::LeftButton);
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
        QCOMPARE(o.value(QStringLiteral("verified")).toBool(), true);
        QCOMPARE(o.value(QStringLiteral("work_unit")).toString(), QStringLiteral("201"));
        QCOMPARE(o.value(QStringLiteral("signature")).toString(),
                 QString::fromStdString(m_signatureBase64));
        QCOMPARE(
            o.value(QStringLiteral("receipt")).toObject().value(QStringLiteral("round")).toInt(),
            12);
        QVERIFY(!o.value(QStringLiteral("coordinator_key")).toString().isEmpty());
        // A file that cannot be written: an error naming it, nothing half written.
        QString error;
        QVERIFY(!dialog->exportTo(m_dir.path() + QStringLiteral("/missing/dir/r.json"), &error));
        QVERIFY2(error.contains(QStringLiteral("missing/dir/r.json")), qPrintable(error));
        dialog->close();
    }

    void alteredOrForeignReceiptsAreNotVerified() {
        ui::ContributionsPage page(m_ctx, nullptr);
        page.refresh();
        for (const char* id : {"202", "203"}) {
            ui::ReceiptDialog* dialog = openByButton(page, QString::fromLatin1(id));
            QVERIFY(dialog);
            QCOMPARE(dialog->verdict(), core::ReceiptVerdict::NotVerified);
            QVERIFY2(dialog->verifiedLabel()->text().startsWith(QStringLiteral("✘ Not verified")),
                     qPrintable(dialog->verifiedLabel()->text()));
            delete dialog;
        }
        // Checked where there is no registration (another data directory): says it cannot.
        ui::UiContext elsewhere = m_ctx;
        elsewhere.dataDirectory = (m_dir.path() + QStringLiteral("/other")).toStdString();
        ui::ContributionsPage other(elsewhere, nullptr);
        other.refresh();
        ui::ReceiptDialog* dialog = openByButton(other, QStringLiteral("201"));
        QVERIFY(dialog);
        QCOMPARE(dialog->verdict(), core::ReceiptVerdict::NoKey);
    }

    // Credit is explained where it is shown.
    void creditExplained() {
        ui::ContributionsPage page(m_ctx, nullptr);
        page.refresh();
        auto* note = page.findChild<QLabel*>(QStringLiteral("creditNote"));
        QVERIFY(note && note->text().contains(QStringLiteral("one for each token")));
        QVERIFY(!page.findChild<QLabel*>(QStringLiteral("total_credit"))->toolTip().isEmpty());
    }
};

QTEST_MAIN(TestUiReceipts)
#include "test_ui_receipts.moc"
