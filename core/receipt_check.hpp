// Checking a receipt kept in the ledger: its stored JSON parsed as the coordinator sent it and
// its signature verified against the coordinator key pinned at registration (registration.json),
// for the desktop app's receipt view. The engine checked each receipt on arrival
// (result_uploader.hpp); this says so again, to the donor, from what is on disk.
#pragma once

#include "ledger.hpp"

#include <filesystem>
#include <string>

namespace tandem::core {

enum class ReceiptVerdict {
    Verified,     // signed by the pinned coordinator key
    NotVerified,  // the signature does not match the pinned key (or the receipt was altered)
    NoKey,        // no registration here (never registered, or another data directory)
    Unreadable,   // the stored receipt is not a receipt
};

struct ReceiptCheck {
    ReceiptVerdict verdict = ReceiptVerdict::Unreadable;
    std::string detail;           // why, when not verified (English, for the log and tooltips)
    std::string signatureBase64;  // the coordinator's signature as stored
    std::string keyBase64;        // the pinned coordinator key it was checked against
};

ReceiptCheck checkReceipt(const Receipt& receipt, const std::filesystem::path& registrationFile);

}  // namespace tandem::core
