// One rank's side of a collective on device buffers, checked against the result computed here on
// the host: the input goes down and the output comes back on the collective's own stream, so a
// result only matches where the stream orders the op after the call's earlier work and its
// later work after the op.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "collie/collie.h"

namespace collie {
namespace testing {

enum class DevColl { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };
constexpr DevColl kEveryDevColl[] = {DevColl::kAllReduce, DevColl::kReduceScatter,
                                     DevColl::kAllGather, DevColl::kBroadcast, DevColl::kReduce};
const char* devCollName(DevColl c);

struct DevCase {
  DevColl coll = DevColl::kAllReduce;
  size_t count = 0;  // the collective's count argument
  bool inPlace = false;
  int root = 0;
  collieRedOp_t op = collieSum;  // sum, max or min (f32 inputs that sum exactly)
};

// Runs c on this rank (device `device`, stream st) and returns "" or what went wrong, naming
// the case. The current device stays what the caller set.
std::string runDevCase(const DevCase& c, collieComm_t comm, int rank, int nranks, int device,
                       cudaStream_t st);

}  // namespace testing
}  // namespace collie
