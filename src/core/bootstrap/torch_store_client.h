// A client of the TCPStore that torchrun's agent serves (PyTorch 1.13's c10d wire protocol), just
// enough for rank 0 to publish where Collie's own store serves and for the others to read it.
#pragma once

#include <memory>
#include <string>

#include "src/base/status.h"
#include "src/base/time.h"
#include "transports/tcp/socket.h"

namespace collie {

class TorchStoreClient {
 public:
  ~TorchStoreClient();
  static StatusOr<std::unique_ptr<TorchStoreClient>> connect(const SockAddr& server,
                                                             const Deadline& deadline);
  // Keys are raw: torch's Python API shows key "k" as raw key "/k".
  Status set(const std::string& key, const std::string& value, const Deadline& deadline);
  // Waits until the key exists (polling, so a deadline never leaves a wait behind on the server).
  StatusOr<std::string> get(const std::string& key, const Deadline& deadline);

 private:
  TorchStoreClient() = default;
  Status send(const std::string& msg, const Deadline& deadline);
  StatusOr<bool> exists(const std::string& key, const Deadline& deadline);
  int fd_ = -1;
  SockAddr server_;
};

// Rank 0 publishes the port of Collie's store under key; the other ranks read it.
Status publishStorePort(const SockAddr& agent, const std::string& key, int port,
                        const Deadline& deadline);
StatusOr<int> readStorePort(const SockAddr& agent, const std::string& key,
                            const Deadline& deadline);

}  // namespace collie
