// The host-side half of the NCCL backend, which needs neither NCCL nor a GPU (and is tested
// without them): sharing rank 0's NCCL unique id through Collie's Store, and refusing a launch
// that puts two ranks on one GPU before NCCL does so less helpfully.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/core/bootstrap/store.h"

namespace collie {

// Rank 0 makes the id with makeId and publishes it under key; every rank returns it in *id
// (idBytes long). Others wait for it until deadline. A garbled or short value is an error.
Status shareNcclId(Store* store, const std::string& key, int rank, size_t idBytes,
                   const std::function<Status(std::string*)>& makeId, const Deadline& deadline,
                   std::string* id);

// hosts[r] and gpus[r]: the host and GPU (PCI bus id) of rank r. Two ranks on one host with the
// same GPU are an invalidUsage naming both and saying how to fix the launch.
Status checkOneGpuPerRank(const std::vector<std::string>& hosts,
                          const std::vector<std::string>& gpus, int rank);

}  // namespace collie
