// End-to-end helpers: a real tandem-coordinator and real tandem-worker processes on 127.0.0.1
// over HTTPS (self-signed certificate, public-key pin), their logs in the test's temporary
// directory, and readers for the coordinator's database and the workers' ledgers.
#pragma once

#include "coordinator_client.hpp"
#include "crypto.hpp"
#include "ledger.hpp"

#include <sqlite3.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tandem::e2e {

namespace fs = std::filesystem;

inline QStringList toArgs(const std::vector<std::string>& args) {
    QStringList out;
    for (const auto& a : args)
        out << QString::fromStdString(a);
    return out;
}

inline std::string tail(const fs::path& file, size_t bytes = 3000) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

// A text corpus: Debian's fortunes when installed (scripts/setup installs them), else generated
// sentences, so the test runs anywhere.
inline std::vector<std::string> corpusArgs(const fs::path& dir) {
    if (fs::is_directory("/usr/share/games/fortunes"))
        return {"/usr/share/games/fortunes"};
    const fs::path file = dir / "corpus.txt";
    std::ofstream out(file);
    const char* subjects[] = {"The cat", "A dog", "My friend", "The old man", "She", "He"};
    const char* verbs[] = {"sees", "likes", "finds", "takes", "wants", "makes"};
    const char* objects[] = {"the ball.",   "a red apple.",    "the small house.",
                             "some bread.", "the green door.", "a long letter."};
    uint64_t x = 1;
    for (int i = 0; i < 40000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out << subjects[(x >> 33) % 6] << ' ' << verbs[(x >> 40) % 6] << ' '
            << objects[(x >> 50) % 6] << '\n';
    }
    return {file.string()};
}

// SELECT over an SQLite file, read-only (WAL lets it read while its owner writes); every
// column as text, no rows when the file cannot be opened.
inline std::vector<std::vector<std::string>> sqliteQuery(const fs::path& file,
                                                         const std::string& sql) {
    std::vector<std::vector<std::string>> rows;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return rows;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int i = 0; i < sqlite3_column_count(st); ++i) {
                auto t = sqlite3_column_text(st, i);
                row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
            }
            rows.push_back(row);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rows;
}

class Coordinator {
  public:
    QProcess process;
    fs::path stateDir;
    fs::path log;
    int port = 0;
    std::string pin;

    // listenPort 0: any free one (read back from its output).
    bool start(const fs::path& dir, const std::vector<std::string>& extra, int listenPort = 0) {
        stateDir = dir / "coordinator";
        log = dir / "coordinator.log";
        std::vector<std::string> args = {"--listen", "127.0.0.1:" + std::to_string(listenPort),
                                         "--state-dir", stateDir.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        process.setStandardErrorFile(QString::fromStdString(log.string()));
        process.start(TANDEM_COORDINATOR_BIN, toArgs(args));
        if (!process.waitForStarted(10000))
            return false;
        std::string out;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            process.waitForReadyRead(200);
            out += process.readAllStandardOutput().toStdString();
            const auto p = out.find("listening on port ");
            const auto q = out.find("pin ");
            if (p != std::string::npos && q != std::string::npos &&
                out.find('\n', q) != std::string::npos) {
                port = std::stoi(out.substr(p + 18));
                pin = out.substr(q + 4, out.find('\n', q) - q - 4);
                return true;
            }
            if (process.state() == QProcess::NotRunning)
                return false;
        }
        return false;
    }
    std::string url() const { return "https://127.0.0.1:" + std::to_string(port); }
    void stop() {
        if (process.state() != QProcess::NotRunning) {
            process.terminate();
            if (!process.waitForFinished(30000))
                process.kill();
            process.waitForFinished(5000);
        }
    }
    ~Coordinator() { stop(); }

    net::PublicKey publicKey() const {
        auto key = net::SigningKey::load(stateDir / "coordinator_key.pem");
        return key ? key->publicKey() : net::PublicKey{};
    }

    std::unique_ptr<net::CoordinatorClient> client() const {
        net::HttpClientConfig c;
        c.baseUrl = url();
        c.pinnedPublicKey = pin;
        c.proxy = "direct";
        auto cl = net::CoordinatorClient::create(c);
        return cl ? std::move(*cl) : nullptr;
    }

    // SELECT over coordinator.db (read-only; WAL lets it read while the server writes).
    std::vector<std::vector<std::string>> query(const std::string& sql) const {
        return sqliteQuery(stateDir / "coordinator.db", sql);
    }
};

class Worker {
  public:
    QProcess process;
    fs::path dataDir;
    fs::path log;

    void start(const Coordinator& c, const fs::path& dir, const std::string& name,
               const std::vector<std::string>& extra, const std::string& killAt = {}) {
        start(c.url(), c.pin, dir, name, extra, killAt);
    }
    // Joined through another address (a load balancer) with the coordinator's pin.
    void start(const std::string& url, const std::string& pin, const fs::path& dir,
               const std::string& name, const std::vector<std::string>& extra,
               const std::string& killAt = {}) {
        dataDir = dir / name;
        log = dir / (name + ".log");
        std::vector<std::string> args = {
            "--coordinator", url,   "--pin",     pin, "--data-dir", dataDir.string(),
            "--device",      "cpu", "--threads", "1", "--name",     name};
        args.insert(args.end(), extra.begin(), extra.end());
        process.setStandardErrorFile(QString::fromStdString(log.string()), QIODevice::Append);
        process.setStandardOutputFile(QProcess::nullDevice());
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove("TANDEM_TEST_KILL_AT");
        if (!killAt.empty())
            env.insert("TANDEM_TEST_KILL_AT", QString::fromStdString(killAt));
        process.setProcessEnvironment(env);
        process.start(TANDEM_WORKER_BIN, toArgs(args));
        process.waitForStarted(10000);
    }
    bool wait(int ms) { return process.waitForFinished(ms); }
    ~Worker() {
        if (process.state() != QProcess::NotRunning) {
            process.kill();
            process.waitForFinished(5000);
        }
    }
};

}  // namespace tandem::e2e
