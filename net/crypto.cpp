#include "crypto.hpp"

#include "file_io.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tandem::net {

namespace {

EVP_PKEY* asKey(void* p) {
    return static_cast<EVP_PKEY*>(p);
}

}  // namespace

Sha256Digest sha256(std::span<const uint8_t> bytes) {
    Sha256Digest out{};
    unsigned int len = 0;
    EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_sha256(), nullptr);
    return out;
}

Sha256Digest sha256(std::string_view text) {
    return sha256(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

struct Sha256::Impl {
    EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : m_impl(std::make_unique<Impl>()) {
    m_impl->ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(m_impl->ctx, EVP_sha256(), nullptr);
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(m_impl->ctx);
}

void Sha256::update(std::span<const uint8_t> bytes) {
    EVP_DigestUpdate(m_impl->ctx, bytes.data(), bytes.size());
}

Sha256Digest Sha256::finish() {
    Sha256Digest out{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(m_impl->ctx, out.data(), &len);
    return out;
}

Expected<FileDigest> sha256File(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError("cannot open " + path.string() + ": " + std::strerror(errno));
    Sha256 hash;
    FileDigest out;
    std::vector<uint8_t> buffer(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            const int error = errno;
            ::close(fd);
            return makeError("cannot read " + path.string() + ": " + std::strerror(error));
        }
        if (n == 0)
            break;
        hash.update(std::span<const uint8_t>(buffer.data(), static_cast<size_t>(n)));
        out.bytes += n;
    }
    ::close(fd);
    out.digest = hash.finish();
    return out;
}

std::string toHex(std::span<const uint8_t> bytes) {
    static const char* kDigits = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (uint8_t b : bytes) {
        out.push_back(kDigits[b >> 4]);
        out.push_back(kDigits[b & 15]);
    }
    return out;
}

Expected<std::vector<uint8_t>> fromHex(std::string_view hex) {
    if (hex.size() % 2 != 0)
        return makeError("hex text has odd length " + std::to_string(hex.size()));
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    };
    std::vector<uint8_t> out(hex.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return makeError("hex text has a non-hex character at position " +
                             std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
        out[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
    return out;
}

Expected<Sha256Digest> digestFromHex(std::string_view hex) {
    if (hex.size() != 64)
        return makeError("a SHA-256 digest is 64 hex digits, found " + std::to_string(hex.size()));
    auto bytes = fromHex(hex);
    if (!bytes)
        return bytes.error();
    Sha256Digest out{};
    std::memcpy(out.data(), bytes->data(), 32);
    return out;
}

std::string toBase64(std::span<const uint8_t> bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3), '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                            static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

Expected<std::vector<uint8_t>> fromBase64(std::string_view text) {
    if (text.size() % 4 != 0)
        return makeError("base64 text must be a multiple of 4 characters long, found " +
                         std::to_string(text.size()));
    for (char c : text) {
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '+' || c == '/' || c == '=';
        if (!ok)
            return makeError("base64 text has an invalid character");
    }
    std::vector<uint8_t> out(text.size() / 4 * 3);
    int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                            static_cast<int>(text.size()));
    if (n < 0)
        return makeError("base64 text does not decode");
    size_t pad = 0;
    if (!text.empty() && text.back() == '=')
        ++pad;
    if (text.size() >= 2 && text[text.size() - 2] == '=')
        ++pad;
    out.resize(static_cast<size_t>(n) - pad);
    return out;
}

std::vector<uint8_t> randomBytes(size_t count) {
    std::vector<uint8_t> out(count);
    if (count > 0 && RAND_bytes(out.data(), static_cast<int>(count)) != 1)
        std::abort();
    return out;
}

namespace {

// base64 of exactly N bytes; label starts a base64 error, what names the value in a size error.
template <size_t N>
Expected<std::array<uint8_t, N>> fixedFromBase64(std::string_view text, const char* label,
                                                 const char* what) {
    auto bytes = fromBase64(text);
    if (!bytes)
        return makeError(std::string(label) + ": " + bytes.error().message);
    if (bytes->size() != N)
        return makeError(std::string(what) + " is " + std::to_string(N) + " bytes, found " +
                         std::to_string(bytes->size()));
    std::array<uint8_t, N> out{};
    std::memcpy(out.data(), bytes->data(), N);
    return out;
}

}  // namespace

Expected<PublicKey> publicKeyFromBase64(std::string_view text) {
    return fixedFromBase64<kEd25519PublicKeyBytes>(text, "public key", "an Ed25519 public key");
}

Expected<Signature> signatureFromBase64(std::string_view text) {
    return fixedFromBase64<kEd25519SignatureBytes>(text, "signature", "an Ed25519 signature");
}

SigningKey::SigningKey(void* pkey) : m_pkey(pkey) {}
SigningKey::SigningKey(SigningKey&& other) noexcept : m_pkey(other.m_pkey) {
    other.m_pkey = nullptr;
}
SigningKey& SigningKey::operator=(SigningKey&& other) noexcept {
    if (this != &other) {
        EVP_PKEY_free(asKey(m_pkey));
        m_pkey = other.m_pkey;
        other.m_pkey = nullptr;
    }
    return *this;
}
SigningKey::~SigningKey() {
    EVP_PKEY_free(asKey(m_pkey));
}

Expected<SigningKey> SigningKey::generate() {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
    if (!key)
        return makeError("OpenSSL could not generate an Ed25519 key");
    return SigningKey(key);
}

Expected<SigningKey> SigningKey::fromRawSeed(std::span<const uint8_t> seed) {
    if (seed.size() != 32)
        return makeError("an Ed25519 private key seed is 32 bytes, found " +
                         std::to_string(seed.size()));
    EVP_PKEY* key =
        EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size());
    if (!key)
        return makeError("OpenSSL refused the Ed25519 seed");
    return SigningKey(key);
}

Expected<SigningKey> SigningKey::fromPem(std::string_view pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!key)
        return makeError("the text is not a PEM private key");
    if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        return makeError("the PEM private key is not an Ed25519 key");
    }
    return SigningKey(key);
}

Expected<SigningKey> SigningKey::load(const std::filesystem::path& path) {
    auto bytes = readFile(path);
    if (!bytes)
        return bytes.error();
    auto key = fromPem(std::string(bytes->begin(), bytes->end()));
    if (!key)
        return makeError(path.string() + ": " + key.error().message);
    return key;
}

Expected<SigningKey> SigningKey::loadOrCreate(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec))
        return load(path);
    auto key = generate();
    if (!key)
        return key;
    if (auto st = key->save(path); !st)
        return st.error();
    return key;
}

std::string SigningKey::toPem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, asKey(m_pkey), nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(len));
    BIO_free(bio);
    return pem;
}

std::array<uint8_t, 32> SigningKey::rawSeed() const {
    std::array<uint8_t, 32> seed{};
    size_t len = seed.size();
    EVP_PKEY_get_raw_private_key(asKey(m_pkey), seed.data(), &len);
    return seed;
}

Status SigningKey::save(const std::filesystem::path& path) const {
    const std::string pem = toPem();
    return writePrivateFileAtomically(
        path, std::span(reinterpret_cast<const uint8_t*>(pem.data()), pem.size()));
}

PublicKey SigningKey::publicKey() const {
    PublicKey key{};
    size_t len = key.size();
    EVP_PKEY_get_raw_public_key(asKey(m_pkey), key.data(), &len);
    return key;
}

Signature SigningKey::sign(std::span<const uint8_t> message) const {
    Signature sig{};
    size_t len = sig.size();
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, asKey(m_pkey));
    EVP_DigestSign(ctx, sig.data(), &len, message.data(), message.size());
    EVP_MD_CTX_free(ctx);
    return sig;
}

bool verifySignature(const PublicKey& key, std::span<const uint8_t> message,
                     const Signature& signature) {
    EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size());
    if (!pkey)
        return false;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    bool ok = EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
              EVP_DigestVerify(ctx, signature.data(), signature.size(), message.data(),
                               message.size()) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return ok;
}

}  // namespace tandem::net
