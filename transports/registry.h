// The transports of a communicator: which ones it may use, one of each made, a choice per peer
// pair in priority order, and the group steps that connect every peer. The allowed set comes in
// as an argument (the environment today, a per-communicator config later).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"

namespace collie {

// Which transports a communicator may use.
struct AllowedTransports {
  bool tcp = true;
  bool shm = true;
  bool ucx = false;          // unlisted: where the build has UCX, for peers with RDMA
  bool ucxRequired = false;  // listed by name: for every peer shm does not reach, or an error
  std::string restriction;   // "COLLIE_TRANSPORT=<list>" where a list was given, for messages
};

// The transports of this build, "tcp, shm[, ucx]".
const char* buildTransports();
// "" allows every transport of the build; "tcp,shm,ucx" (any subset) restricts the choice.
StatusOr<AllowedTransports> parseAllowedTransports(const std::string& list);

// What making the transports needs.
struct TransportConfig {
  AllowedTransports allowed;
  Identity id;  // this rank, the job's secret and communicator id
  TcpOptions tcp;
  SockAddr tcpLocal;  // the address to listen on
  ShmOptions shm;
  bool shmShrinkable = true;  // the shm sizes are the defaults (they may shrink to fit)
};

// One of each allowed transport, best first: shm, ucx, tcp. (cuda_ipc serves device buffers
// and is set up by the device path.)
StatusOr<std::vector<std::unique_ptr<Transport>>> makeTransports(const TransportConfig& cfg);

// For each peer, the transports that may reach it, best first (empty for self).
std::vector<std::vector<Transport*>> choosePerPeer(const std::vector<Transport*>& byPriority,
                                                   const std::vector<RankPlace>& ranks, int self);

// Connections to every peer and the transports that made them.
class TransportMesh {
 public:
  ~TransportMesh();
  // Runs each transport's group step, best first, with the peers whose choice it is; a peer
  // a transport gives up takes its next choice. Transports that connect no peer are dropped.
  static StatusOr<std::unique_ptr<TransportMesh>> connect(
      std::vector<std::unique_ptr<Transport>> transports, const std::vector<RankPlace>& ranks,
      int self, AddressExchange* exchange, const std::string& restriction,
      const Deadline& deadline);

  Connection* const* connections() const { return ptrs_.data(); }
  std::vector<Connection*> live() const;  // every peer's, this rank's left out
  // The transport that reaches peer ("" for this rank).
  const char* via(int peer) const { return via_[static_cast<size_t>(peer)]; }
  bool uses(const char* name) const;
  Doorbell* doorbell() const;
  void threadStarted();
  void threadIdle();
  void threadStopping();
  // Before the transports go: every transport says its goodbyes (farewell), then every
  // connection gives its peer until deadline to read what it sent last (an abort).
  void linger(const Deadline& deadline);

 private:
  TransportMesh() = default;
  Status runStep(Transport* t, std::vector<std::vector<Transport*>>* choice,
                 std::vector<size_t>* next, const std::vector<RankPlace>& ranks, int self,
                 AddressExchange* exchange, const std::string& restriction,
                 const Deadline& deadline);

  std::vector<std::unique_ptr<Transport>> transports_;
  ConnectionTable conns_;
  std::vector<Connection*> ptrs_;
  std::vector<const char*> via_;
};

}  // namespace collie
