// Store: the key-value rendezvous every rank publishes its addresses through (as in c10d):
// set, blocking get with a deadline, add, and wait. TcpStore talks to a StoreServer (rank 0 or
// the process that made the unique id); HashStore is the in-process double for tests.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "transports/tcp/socket.h"

namespace collie {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status set(const std::string& key, const std::string& value) = 0;
  virtual StatusOr<std::string> get(const std::string& key, const Deadline& deadline) = 0;
  virtual StatusOr<int64_t> add(const std::string& key, int64_t delta) = 0;
  // Waits for all keys; on timeout *missing (if given) lists the keys that never appeared.
  virtual Status wait(const std::vector<std::string>& keys, const Deadline& deadline,
                      std::vector<std::string>* missing) = 0;
};

// What proves a client belongs to the communicator.
struct StoreAuth {
  uint8_t secret[16] = {};
  uint64_t commId = 0;
};

class HashStore : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, const Deadline& deadline) override;
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, const Deadline& deadline,
              std::vector<std::string>* missing) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;  // guarded by mu_
};

// The server: one thread, poll() over the listener and its clients. Strangers (a wrong hello,
// garbage, a scanner) are dropped with a WARN; blocked gets are answered when the key arrives
// or their own deadline passes.
class StoreServer {
 public:
  ~StoreServer();
  static StatusOr<std::unique_ptr<StoreServer>> start(SockAddr bindAddr, const StoreAuth& auth);
  const SockAddr& address() const { return addr_; }
  // True in the process that started it (a forked child holds a copy without the thread).
  bool ownedByThisProcess() const;
  // Whether a server of this process, not stopped yet, serves job commId on port.
  static bool servesInThisProcess(int port, uint64_t commId);
  void stop();

 private:
  StoreServer() = default;
  void loop(std::promise<void>* running);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  SockAddr addr_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  int ownerPid_ = -1;
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  ~TcpStore() override;
  static StatusOr<std::unique_ptr<TcpStore>> connect(const SockAddr& server, const StoreAuth& auth,
                                                     const Deadline& deadline);
  // The store at whichever of choices answers this job's hello first, retried to the deadline.
  static StatusOr<std::unique_ptr<TcpStore>> connectAny(const std::vector<SockAddr>& choices,
                                                        const StoreAuth& auth,
                                                        const Deadline& deadline);
  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, const Deadline& deadline) override;
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, const Deadline& deadline,
              std::vector<std::string>* missing) override;
  // Where the store serves (of connectAny's choices, the one that answered).
  const SockAddr& server() const { return server_; }
  // How long a request without a deadline of its own (set, add, one look of wait) may take
  // before the store counts as lost: the communicator's deadline (COLLIE_TIMEOUT_MS).
  void setRequestTimeoutMs(int64_t ms) { requestMs_ = ms; }
  // Requests sent by every TcpStore of this process so far (what tests count).
  static uint64_t requestsSent();

 private:
  TcpStore() = default;
  // Says hello on fd (connected to server), which it owns from here on.
  static StatusOr<std::unique_ptr<TcpStore>> greet(int fd, const SockAddr& server,
                                                   const StoreAuth& auth, const Deadline& deadline);
  // One request, one reply; serialised by mu_.
  StatusOr<std::string> call(uint8_t cmd, const std::string& key, const std::string& value,
                             int64_t arg, const Deadline& deadline, uint8_t* replyCode);
  std::mutex mu_;
  int fd_ = -1;  // guarded by mu_
  int64_t requestMs_ = 60000;
  SockAddr server_;
};

}  // namespace collie
