// The NCCL reference backend: an NCCL communicator made through Collie's own Store (rank 0's
// unique id broadcast through it) to which device-buffer collectives are forwarded. libnccl is
// loaded at run time, so programs that never ask for this backend never load it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "src/core/bootstrap/store.h"

namespace collie {

struct NcclApi;

class NcclBackend {
 public:
  ~NcclBackend();
  // Collective over all ranks: each calls it with the CUDA device it will use current.
  // hosts[r] is rank r's host identity.
  static StatusOr<std::unique_ptr<NcclBackend>> create(Store* store, int rank, int nranks,
                                                       const std::vector<std::string>& hosts,
                                                       int64_t timeoutMs, const Deadline& deadline);
  // Enqueues the collective (any but barrier) on stream (cudaStream_t) and returns.
  Status run(const CollArgs& args, void* stream);
  void abort();

 private:
  NcclBackend() = default;
  Status waitInProgress(const char* what, const Deadline& deadline);
  const NcclApi* api_ = nullptr;
  void* comm_ = nullptr;  // ncclComm_t
  int rank_ = 0;
  int64_t timeoutMs_ = 0;
};

}  // namespace collie
