// Hashes, encodings and the Ed25519 identity keys (OpenSSL 3): a worker signs the digest of each
// result with its key, the coordinator signs manifests and receipts with its own.
#pragma once

#include "expected.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::net {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::span<const uint8_t> bytes);
Sha256Digest sha256(std::string_view text);

// Incremental SHA-256 for data that arrives in pieces (uploads, downloads).
class Sha256 {
  public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::span<const uint8_t> bytes);
    Sha256Digest finish();  // the object must not be used afterwards

  private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// The SHA-256 and size of a file, read in pieces (weights and shards do not fit in memory twice).
struct FileDigest {
    Sha256Digest digest{};
    int64_t bytes = 0;
};
Expected<FileDigest> sha256File(const std::filesystem::path& path);

std::string toHex(std::span<const uint8_t> bytes);
Expected<std::vector<uint8_t>> fromHex(std::string_view hex);
Expected<Sha256Digest> digestFromHex(std::string_view hex);  // exactly 64 hex digits
std::string toBase64(std::span<const uint8_t> bytes);        // standard alphabet, padded
Expected<std::vector<uint8_t>> fromBase64(std::string_view text);
std::vector<uint8_t> randomBytes(size_t count);  // from the OpenSSL CSPRNG

inline constexpr size_t kEd25519PublicKeyBytes = 32;
inline constexpr size_t kEd25519SignatureBytes = 64;
using PublicKey = std::array<uint8_t, kEd25519PublicKeyBytes>;
using Signature = std::array<uint8_t, kEd25519SignatureBytes>;

Expected<PublicKey> publicKeyFromBase64(std::string_view text);
Expected<Signature> signatureFromBase64(std::string_view text);

// An Ed25519 private key.
class SigningKey {
  public:
    static Expected<SigningKey> generate();
    // PKCS#8 PEM, or the raw 32-byte seed.
    static Expected<SigningKey> fromPem(std::string_view pem);
    static Expected<SigningKey> fromRawSeed(std::span<const uint8_t> seed);
    static Expected<SigningKey> load(const std::filesystem::path& path);  // PEM file
    // Loads path when it exists, otherwise generates a key and saves it there.
    static Expected<SigningKey> loadOrCreate(const std::filesystem::path& path);

    SigningKey(SigningKey&&) noexcept;
    SigningKey& operator=(SigningKey&&) noexcept;
    ~SigningKey();

    std::string toPem() const;
    std::array<uint8_t, 32> rawSeed() const;
    // Written atomically with file mode 0600.
    Status save(const std::filesystem::path& path) const;

    PublicKey publicKey() const;
    Signature sign(std::span<const uint8_t> message) const;

  private:
    explicit SigningKey(void* pkey);
    void* m_pkey = nullptr;  // EVP_PKEY*
};

bool verifySignature(const PublicKey& key, std::span<const uint8_t> message,
                     const Signature& signature);

}  // namespace tandem::net
