// SHA-256, hex/base64, Ed25519 keys and signatures, self-signed certificates and pins.
#include "crypto.hpp"
#include "tls.hpp"

#include <QTemporaryDir>
#include <QtTest>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <fstream>

using namespace tandem;
using namespace tandem::net;

namespace {
std::span<const uint8_t> bytes(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

class TestNetCrypto : public QObject {
    Q_OBJECT
  private slots:
    void sha256KnownVectors() {
        // FIPS 180-2 examples.
        QCOMPARE(toHex(sha256(std::string_view(""))),
                 std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
        QCOMPARE(toHex(sha256(std::string_view("abc"))),
                 std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    }
    void sha256IncrementalMatchesOneShot() {
        std::vector<uint8_t> data(100003);
        for (size_t i = 0; i < data.size(); ++i)
            data[i] = static_cast<uint8_t>(i * 31 + 7);
        Sha256 h;
        size_t pos = 0, step = 1;
        while (pos < data.size()) {
            size_t n = std::min(step, data.size() - pos);
            h.update(std::span(data).subspan(pos, n));
            pos += n;
            step = step * 3 + 1;
        }
        QCOMPARE(h.finish(), sha256(data));
    }
    void sha256FileMatchesTheBytes() {
        QTemporaryDir dir;
        const std::filesystem::path root = dir.path().toStdString();
        auto write = [&](const char* name, const std::string& content) {
            std::ofstream(root / name, std::ios::binary) << content;
            return root / name;
        };
        auto abc = sha256File(write("abc", "abc"));
        QVERIFY(abc.ok());
        QCOMPARE(toHex(abc->digest),
                 std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
        QCOMPARE(abc->bytes, int64_t{3});
        auto empty = sha256File(write("empty", ""));
        QVERIFY(empty.ok());
        QCOMPARE(empty->digest, sha256(std::string_view("")));
        QCOMPARE(empty->bytes, int64_t{0});
        // Larger than the read buffer and not a multiple of it.
        std::string big(5 * (1 << 19) + 3, '\0');
        for (size_t i = 0; i < big.size(); ++i)
            big[i] = static_cast<char>(i * 131 + 17);
        auto large = sha256File(write("big", big));
        QVERIFY(large.ok());
        QCOMPARE(large->digest, sha256(std::string_view(big)));
        QCOMPARE(large->bytes, static_cast<int64_t>(big.size()));
    }
    void sha256FileErrorsNameThePath() {
        QTemporaryDir dir;
        const std::filesystem::path missing = dir.path().toStdString() + "/missing";
        auto none = sha256File(missing);
        QVERIFY(!none.ok());
        QCOMPARE(none.error().message,
                 "cannot open " + missing.string() + ": No such file or directory");
        auto folder = sha256File(dir.path().toStdString());
        QVERIFY(!folder.ok());
        QVERIFY2(folder.error().message.find("Is a directory") != std::string::npos,
                 folder.error().message.c_str());
    }
    void hexRoundTripAndErrors() {
        std::vector<uint8_t> v{0, 1, 0xab, 0xff};
        QCOMPARE(toHex(v), std::string("0001abff"));
        QCOMPARE(*fromHex("0001ABff"), v);
        QVERIFY(!fromHex("abc"));
        auto bad = fromHex("zz");
        QVERIFY(!bad);
        QVERIFY(bad.error().message.find("non-hex") != std::string::npos);
        QVERIFY(!digestFromHex("00"));
    }
    void base64RoundTripAndErrors() {
        for (size_t n = 0; n < 10; ++n) {
            std::vector<uint8_t> v(n);
            for (size_t i = 0; i < n; ++i)
                v[i] = static_cast<uint8_t>(200 + i);
            auto back = fromBase64(toBase64(v));
            QVERIFY(back.ok());
            QCOMPARE(*back, v);
        }
        QCOMPARE(toBase64(bytes("foobar")), std::string("Zm9vYmFy"));
        QCOMPARE(toBase64(bytes("fo")), std::string("Zm8="));
        QVERIFY(!fromBase64("abc"));
        QVERIFY(!fromBase64("ab!="));
        QVERIFY(!publicKeyFromBase64(toBase64(bytes("short"))));
    }
    void ed25519SignVerify() {
        auto key = SigningKey::generate();
        QVERIFY(key.ok());
        std::string msg = "result digest";
        Signature sig = key->sign(bytes(msg));
        QVERIFY(verifySignature(key->publicKey(), bytes(msg), sig));
        std::string other = "result digesT";
        QVERIFY(!verifySignature(key->publicKey(), bytes(other), sig));
        Signature flipped = sig;
        flipped[10] ^= 1;
        QVERIFY(!verifySignature(key->publicKey(), bytes(msg), flipped));
        auto key2 = SigningKey::generate();
        QVERIFY(!verifySignature(key2->publicKey(), bytes(msg), sig));
    }
    void ed25519Rfc8032Vector() {
        // RFC 8032 section 7.1, test 1 (empty message).
        auto seed = fromHex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        auto key = SigningKey::fromRawSeed(*seed);
        QVERIFY(key.ok());
        QCOMPARE(toHex(key->publicKey()),
                 std::string("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"));
        Signature sig = key->sign({});
        QCOMPARE(toHex(sig),
                 std::string("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522"
                             "490155"
                             "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e"
                             "7a100b"));
        auto raw = key->rawSeed();
        QCOMPARE(std::vector<uint8_t>(raw.begin(), raw.end()), *seed);
    }
    void keyStorageIsPrivateAndRoundTrips() {
        QTemporaryDir dir;
        auto path = std::filesystem::path(dir.path().toStdString()) / "id.pem";
        auto key = SigningKey::loadOrCreate(path);
        QVERIFY(key.ok());
        struct stat st {};
        QCOMPARE(::stat(path.c_str(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        auto again = SigningKey::loadOrCreate(path);
        QVERIFY(again.ok());
        QCOMPARE(again->publicKey(), key->publicKey());
        auto fromSeed = SigningKey::fromRawSeed(key->rawSeed());
        QCOMPARE(fromSeed->publicKey(), key->publicKey());
        QVERIFY(!SigningKey::fromPem("not a pem"));
        auto missing = SigningKey::load(path.parent_path() / "nope.pem");
        QVERIFY(!missing);
        QVERIFY(missing.error().message.find("nope.pem") != std::string::npos);
    }
    void selfSignedCertificateAndPin() {
        auto id = generateSelfSignedCertificate({"localhost", "127.0.0.1"});
        QVERIFY(id.ok());
        auto pin = publicKeyPin(id->certificatePem);
        QVERIFY(pin.ok());
        QVERIFY(pin->rfind("sha256//", 0) == 0);
        QCOMPARE(pin->size(), size_t(8 + 44));
        // Independent pin: the DER public key taken from the private key, hashed here.
        BIO* bio = BIO_new_mem_buf(id->privateKeyPem.data(), int(id->privateKeyPem.size()));
        EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
        BIO_free(bio);
        QVERIFY(pkey);
        unsigned char* der = nullptr;
        int len = i2d_PUBKEY(pkey, &der);
        QVERIFY(len > 0);
        auto expected = "sha256//" + toBase64(sha256(std::span<const uint8_t>(der, size_t(len))));
        OPENSSL_free(der);
        QCOMPARE(*pin, expected);
        // The certificate verifies against itself and names 127.0.0.1.
        bio = BIO_new_mem_buf(id->certificatePem.data(), int(id->certificatePem.size()));
        X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
        BIO_free(bio);
        QCOMPARE(X509_verify(cert, pkey), 1);
        QCOMPARE(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);
        QCOMPARE(X509_check_host(cert, "localhost", 0, 0, nullptr), 1);
        X509_free(cert);
        EVP_PKEY_free(pkey);
        QVERIFY(!publicKeyPin("garbage"));
        auto other = generateSelfSignedCertificate({"localhost"});
        QVERIFY(*publicKeyPin(other->certificatePem) != *pin);
    }
};

QTEST_APPLESS_MAIN(TestNetCrypto)
#include "test_net_crypto.moc"
