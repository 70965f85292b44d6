// A receipt from the Contributions page in detail: what the coordinator signed (work unit,
// round, weight, credit), its signature, a "verified" mark from checking that signature against
// the coordinator key pinned at registration (core/receipt_check.hpp), and export as JSON.
#pragma once

#include "clock.hpp"
#include "ledger.hpp"
#include "receipt_check.hpp"

#include <QDialog>

#include <filesystem>
#include <functional>

class QLabel;

namespace tandem::ui {

class ReceiptDialog final : public QDialog {
    Q_OBJECT
  public:
    ReceiptDialog(const core::Receipt& receipt, const std::filesystem::path& registrationFile,
                  const core::TimeZone& zone, QWidget* parent);

    core::ReceiptVerdict verdict() const { return m_check.verdict; }
    QLabel* verifiedLabel() const { return m_verified; }
    // The receipt as the coordinator sent it, its signature, the key it was checked against and
    // the verdict, as one JSON object. False, with the reason, when the file cannot be written.
    bool exportTo(const QString& path, QString* error) const;
    // "Export as JSON…" asks for the file with a file dialog; tests answer instead.
    void setPathChooser(std::function<QString()> chooser) { m_choosePath = std::move(chooser); }

  private:
    void exportAsked();

    core::Receipt m_receipt;
    core::ReceiptCheck m_check;
    QLabel* m_verified;
    std::function<QString()> m_choosePath;
};

}  // namespace tandem::ui
