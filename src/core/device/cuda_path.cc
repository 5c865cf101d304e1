// COLLIE_CUDA_PATH and the ranks' agreement on it (see cuda_path.h).
#include "src/core/device/cuda_path.h"

namespace collie {

StatusOr<CudaPath> parseCudaPath(const std::string& value) {
  if (value.empty() || value == "auto") return CudaPath::kAuto;
  if (value == "ipc") return CudaPath::kIpc;
  if (value == "staged") return CudaPath::kStaged;
  return invalidArgument("COLLIE_CUDA_PATH=" + value + ": expected auto, ipc or staged");
}

const char* cudaPathName(CudaPath p) {
  switch (p) {
    case CudaPath::kIpc:
      return "ipc";
    case CudaPath::kStaged:
      return "staged";
    default:
      return "auto";
  }
}

StatusOr<bool> tryDeviceRing(CudaPath path, int nranks, bool oneHost) {
  if (path == CudaPath::kStaged || nranks < 2) return false;
  if (oneHost) return true;
  if (path == CudaPath::kIpc)
    return invalidArgument(
        "COLLIE_CUDA_PATH=ipc: the ranks are on more than one host, and cuda_ipc joins the "
        "processes of one host only (use auto or staged)");
  return false;
}

std::string cudaPathVote(const Status& s) { return s.isOk() ? "ok" : "!" + s.message(); }

StatusOr<bool> decideCudaPath(CudaPath path, const std::vector<std::string>& votes,
                              const char* stage) {
  for (size_t r = 0; r < votes.size(); ++r) {
    const std::string& v = votes[r];
    if (v == "ok") continue;
    if (v.empty() || v[0] != '!')
      return invalidArgument(std::string("cuda_ipc ") + stage + ": rank " + std::to_string(r) +
                             " published a vote that is neither ok nor a reason");
    if (path == CudaPath::kIpc)
      return invalidArgument(std::string("COLLIE_CUDA_PATH=ipc: rank ") + std::to_string(r) +
                             " cannot use cuda_ipc (" + stage + "): " + v.substr(1));
    return false;
  }
  return true;
}

DeviceAlgo pickDeviceAlgo(int nranks, size_t bytes, double hopUs, double gbps) {
  if (nranks < 3) return DeviceAlgo::kRing;  // two ranks: the same hops, half the bytes each
  int height = 0;
  while ((2 << height) <= nranks) ++height;
  const double gain = nranks - 1 - height;  // hops the tree saves each way
  if (gain <= 0) return DeviceAlgo::kRing;
  const double limit = hopUs * 1e-6 * gbps * 1e9 * nranks * gain;
  return static_cast<double>(bytes) < limit ? DeviceAlgo::kTree : DeviceAlgo::kRing;
}

}  // namespace collie
