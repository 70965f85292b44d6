#include "tls.hpp"

#include "crypto.hpp"
#include "file_io.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

namespace tandem::net {

namespace {

std::string bioText(BIO* bio) {
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<size_t>(len));
}

bool isIpAddress(const std::string& host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
           inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Expected<TlsIdentity> generateSelfSignedCertificate(const std::vector<std::string>& hosts,
                                                    int days) {
    if (hosts.empty())
        return makeError("a certificate needs at least one host name or address");
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    if (!key)
        return makeError("OpenSSL could not generate a P-256 key");
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    auto serial = randomBytes(16);
    serial[0] &= 0x7f;
    BIGNUM* bn = BN_bin2bn(serial.data(), static_cast<int>(serial.size()), nullptr);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), static_cast<long>(days) * 86400);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("Tandem coordinator"), -1, -1,
                               0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(hosts[0].c_str()), -1, -1, 0);
    X509_set_issuer_name(cert, name);

    std::string san;
    for (const auto& h : hosts) {
        if (!san.empty())
            san += ",";
        san += (isIpAddress(h) ? "IP:" : "DNS:") + h;
    }
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    bool ok = true;
    for (auto [nid, value] : {std::pair<int, std::string>{NID_subject_alt_name, san},
                              {NID_basic_constraints, "critical,CA:TRUE"},
                              {NID_key_usage, "critical,digitalSignature,keyCertSign"},
                              {NID_subject_key_identifier, "hash"}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
        if (!ext) {
            ok = false;
            break;
        }
        X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
    }
    if (ok)
        ok = X509_sign(cert, key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(cert);
        EVP_PKEY_free(key);
        return makeError("OpenSSL could not build the self-signed certificate for " + san);
    }
    TlsIdentity out;
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    out.certificatePem = bioText(bio);
    BIO_free(bio);
    bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    out.privateKeyPem = bioText(bio);
    BIO_free(bio);
    X509_free(cert);
    EVP_PKEY_free(key);
    return out;
}

Expected<std::string> publicKeyPin(const std::string& certificatePem) {
    BIO* bio = BIO_new_mem_buf(certificatePem.data(), static_cast<int>(certificatePem.size()));
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!cert)
        return makeError("the text is not a PEM certificate");
    unsigned char* der = nullptr;
    int len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    X509_free(cert);
    if (len <= 0)
        return makeError("cannot encode the certificate's public key");
    auto digest = sha256(std::span<const uint8_t>(der, static_cast<size_t>(len)));
    OPENSSL_free(der);
    return "sha256//" + toBase64(digest);
}

Status saveTlsIdentity(const TlsIdentity& identity, const std::filesystem::path& certPath,
                       const std::filesystem::path& keyPath) {
    auto bytes = [](const std::string& text) {
        return std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    };
    if (auto st = writePrivateFileAtomically(keyPath, bytes(identity.privateKeyPem)); !st)
        return st;
    return writeFileAtomically(certPath, bytes(identity.certificatePem));
}

}  // namespace tandem::net
