// The table of created reduction ops (see red_ops.h).
#include "src/core/red_ops.h"

#include <atomic>
#include <climits>
#include <cstring>
#include <string>

#include "src/base/dtype.h"

#ifdef COLLIE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace collie {
namespace {

// Values are handed out once per process: an op given to a communicator that did not make it,
// or used after its destruction, is then never mistaken for another live op.
std::atomic<int> gNextOp{collieNumOps};

std::string opName(int op) { return "reduction op " + std::to_string(op); }

}  // namespace

Status PreMulSumOp::readScalar(int op, uint64_t* out) const {
  *out = 0;
  if (residence == collieScalarHostImmediate) {
    *out = value;
    return Status::ok();
  }
#ifdef COLLIE_HAVE_CUDA
  const cudaError_t e = cudaMemcpy(out, deviceScalar, dtypeSize(dtype), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return invalidArgument(opName(op) +
                           ": reading its device scalar failed: " + cudaGetErrorString(e));
  }
  return Status::ok();
#else
  return invalidArgument(opName(op) + ": a device scalar needs a build with CUDA");
#endif
}

StatusOr<int> RedOpTable::create(collieDataType_t dtype, collieScalarResidence_t residence,
                                 const void* scalar) {
  Entry e;
  e.op.dtype = dtype;
  e.op.residence = residence;
  if (residence == collieScalarHostImmediate)
    std::memcpy(&e.op.value, scalar, dtypeSize(dtype));
  else
    e.op.deviceScalar = scalar;
  int op = gNextOp.load();
  do {
    if (op == INT_MAX)
      return invalidUsage("collieRedOpCreatePreMulSum: this process has used every op value");
  } while (!gNextOp.compare_exchange_weak(op, op + 1));
  std::lock_guard<std::mutex> l(mu_);
  ops_.emplace(op, e);
  return op;
}

Status RedOpTable::destroy(int op) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end() || it->second.destroyed)
    return invalidArgument("collieRedOpDestroy: " + opName(op) +
                           " is not a live op of this communicator (destroyed already, built in, "
                           "or made on another communicator)");
  it->second.destroyed = true;
  if (it->second.holds == 0) ops_.erase(it);
  return Status::ok();
}

Status RedOpTable::hold(const char* call, int op, collieDataType_t dtype) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end() || it->second.destroyed)
    return invalidArgument(std::string(call) + ": " + opName(op) +
                           " is not a live op of this communicator (destroyed, made on another "
                           "communicator, or never made)");
  if (it->second.op.dtype != dtype)
    return invalidArgument(std::string(call) + ": " + opName(op) + " was made for " +
                           dtypeName(it->second.op.dtype) + " but the call's datatype is " +
                           dtypeName(dtype));
  ++it->second.holds;
  return Status::ok();
}

StatusOr<PreMulSumOp> RedOpTable::take(int op) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = ops_.find(op);
  if (it == ops_.end() || it->second.holds == 0)
    return internalError(opName(op) + " runs without the hold its call took");
  PreMulSumOp out = it->second.op;
  if (--it->second.holds == 0 && it->second.destroyed) ops_.erase(it);
  return out;
}

}  // namespace collie
