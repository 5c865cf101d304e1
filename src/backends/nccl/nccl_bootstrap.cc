// NCCL id sharing and the one-GPU-per-rank check (see nccl_bootstrap.h).
#include "src/backends/nccl/nccl_bootstrap.h"

#include <map>

#include "src/base/hex.h"

namespace collie {

Status shareNcclId(Store* store, const std::string& key, int rank, size_t idBytes,
                   const std::function<Status(std::string*)>& makeId, const Deadline& deadline,
                   std::string* id) {
  if (store == nullptr || id == nullptr) return invalidArgument("shareNcclId: no store or output");
  if (rank == 0) {
    std::string made;
    COLLIE_RETURN_IF_ERROR(makeId(&made).withContext("rank 0 making the NCCL unique id"));
    if (made.size() != idBytes)
      return internalError("NCCL unique id of " + std::to_string(made.size()) +
                           " bytes, expected " + std::to_string(idBytes));
    COLLIE_RETURN_IF_ERROR(store->set(key, toHex(made)));
    *id = made;
    return Status::ok();
  }
  auto v = store->get(key, deadline);
  if (!v.isOk())
    return v.status().withContext("rank " + std::to_string(rank) +
                                  " waiting for rank 0's NCCL unique id");
  std::string bytes;
  if (!fromHex(v.value(), &bytes) || bytes.size() != idBytes)
    return remoteError("the NCCL unique id in the store under '" + key + "' is garbled (" +
                       std::to_string(v.value().size()) + " characters)");
  *id = bytes;
  return Status::ok();
}

Status checkOneGpuPerRank(const std::vector<std::string>& hosts,
                          const std::vector<std::string>& gpus, int rank) {
  if (hosts.size() != gpus.size())
    return internalError("checkOneGpuPerRank: hosts and gpus differ in length");
  std::map<std::pair<std::string, std::string>, int> first;
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto key = std::make_pair(hosts[r], gpus[r]);
    auto it = first.find(key);
    if (it == first.end()) {
      first.emplace(key, static_cast<int>(r));
      continue;
    }
    return invalidUsage(
        "COLLIE_BACKEND=nccl: ranks " + std::to_string(it->second) + " and " + std::to_string(r) +
        " use the same GPU (" + gpus[r] + ") on one host, which NCCL does not allow (rank " +
        std::to_string(rank) +
        " checking). Give each rank its own GPU (cudaSetDevice(LOCAL_RANK) "
        "before init, or CUDA_VISIBLE_DEVICES per rank), start no more ranks per host than "
        "GPUs, or drop COLLIE_BACKEND=nccl: Collie's own backend runs several ranks on one GPU");
  }
  return Status::ok();
}

}  // namespace collie
