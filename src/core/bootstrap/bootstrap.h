// Bootstrap: where the store is, who serves it, and the secret that proves membership; from a
// unique id (NCCL style) or from the environment (torchrun, collie-run, mpirun, Slurm).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/core/bootstrap/store.h"
#include "transports/tcp/socket.h"

namespace collie {

struct BootstrapInfo {
  int rank = 0;
  int nranks = 1;
  SockAddr storeAddr;
  // Where not empty: the store is on one of these (storeAddr is the first), the first free one
  // of which the serving rank takes.
  std::vector<SockAddr> storeChoices;
  StoreAuth auth;
  // Under torchrun's agent store: where it serves and the key under which rank 0 publishes the
  // port its own store took (storeAddr's port is 0 until then).
  SockAddr agentStore;
  std::string agentKey;
  bool serveStore = false;              // this rank starts the store server (env mode, rank 0)
  std::unique_ptr<StoreServer> server;  // adopted from collieGetUniqueId in this process
  std::string how;                      // "unique id", "env (RANK/WORLD_SIZE)", ... for messages
};

// Makes an id and starts its store server in this process (like NCCL's root thread).
Status makeUniqueId(collieUniqueId* id);
StatusOr<BootstrapInfo> bootstrapFromId(const collieUniqueId& id, int nranks, int rank);
StatusOr<BootstrapInfo> bootstrapFromEnv();
// The store's ports that ranks started by mpirun or srun on one host without MASTER_* derive
// from their job id, kJobStorePorts of them: rank 0 serves on the first that is free.
constexpr size_t kJobStorePorts = 8;
std::vector<int> jobStorePorts(const std::string& job);

}  // namespace collie
