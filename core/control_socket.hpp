// Local control of a running headless worker: a Unix domain socket in the data directory
// (control.sock, mode 0600) guarded by a secret (control.secret, mode 0600, made at start). A
// client sends one line "<secret> <command>" and reads the answer until the server closes. Only
// someone who can read the data directory can control the worker.
#pragma once

#include "expected.hpp"

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace tandem::core {

inline constexpr const char* kControlSocketName = "control.sock";
inline constexpr const char* kControlSecretName = "control.secret";

class ControlServer {
  public:
    // Answers a command ("status", "pause", ...) with text.
    using Handler = std::function<std::string(const std::string& command)>;

    // Fails when another process already serves this data directory (a second worker on the same
    // data) or the socket cannot be made. A socket file left by a crashed worker is replaced.
    static Expected<std::unique_ptr<ControlServer>> start(const std::filesystem::path& dataDir,
                                                          Handler handler);
    ~ControlServer();  // stops serving and removes the socket and secret files
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

  private:
    ControlServer() = default;
    void serve();
    std::filesystem::path m_socketPath, m_secretPath;
    std::string m_secret;
    Handler m_handler;
    int m_fd = -1;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

// Sends a command to the worker serving dataDir and returns its answer. The error says when no
// worker runs there or the secret is refused.
Expected<std::string> sendControlCommand(const std::filesystem::path& dataDir,
                                         const std::string& command);

}  // namespace tandem::core
