// TLS identities for self-signed coordinators: a certificate with its key, and the public-key
// pin ("sha256//" + base64 of the SHA-256 of the DER SubjectPublicKeyInfo, as curl's
// --pinnedpubkey expects) that a worker uses instead of a CA.
#pragma once

#include "expected.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::net {

struct TlsIdentity {
    std::string certificatePem;
    std::string privateKeyPem;
};

// An ECDSA P-256 key and a self-signed certificate valid for `days`, with the given DNS names and
// IP addresses as subjectAltName (the first entry is also the common name).
Expected<TlsIdentity> generateSelfSignedCertificate(const std::vector<std::string>& hosts,
                                                    int days = 3650);

// "sha256//<base64>" of the certificate's public key.
Expected<std::string> publicKeyPin(const std::string& certificatePem);

// Writes cert (mode 0644) and key (mode 0600) atomically.
Status saveTlsIdentity(const TlsIdentity& identity, const std::filesystem::path& certPath,
                       const std::filesystem::path& keyPath);

}  // namespace tandem::net
