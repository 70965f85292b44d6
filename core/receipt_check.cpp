#include "receipt_check.hpp"

#include "protocol.hpp"
#include "registration_file.hpp"

#include <algorithm>

namespace tandem::core {

ReceiptCheck checkReceipt(const Receipt& receipt, const std::filesystem::path& registrationFile) {
    ReceiptCheck out;
    out.signatureBase64 = net::toBase64(receipt.signature);
    const std::string_view body(reinterpret_cast<const char*>(receipt.body.data()),
                                receipt.body.size());
    auto parsed = net::Receipt::fromJson(body);
    if (!parsed) {
        out.verdict = ReceiptVerdict::Unreadable;
        out.detail = parsed.error().message;
        return out;
    }
    auto registration = readRegistrationFile(registrationFile);
    if (!registration) {
        out.verdict = ReceiptVerdict::NoKey;
        out.detail = registration.error().message;
        return out;
    }
    out.keyBase64 = net::toBase64(registration->coordinatorKey);
    const bool sameSignature = std::equal(receipt.signature.begin(), receipt.signature.end(),
                                          parsed->signature.begin(), parsed->signature.end());
    if (!sameSignature) {
        out.verdict = ReceiptVerdict::NotVerified;
        out.detail = "the stored signature is not the one in the stored receipt";
    } else if (!parsed->verify(registration->coordinatorKey)) {
        out.verdict = ReceiptVerdict::NotVerified;
        out.detail =
            "the signature does not verify against the coordinator key pinned when "
            "this computer registered with " +
            registration->coordinatorUrl;
    } else {
        out.verdict = ReceiptVerdict::Verified;
    }
    return out;
}

}  // namespace tandem::core
