// The entry points of src/reduce/cuda/reduce_cuda.h: argument checks and the dtype-family
// dispatch, and the launch geometry shared by every kernel.
#include <string>

#include "src/base/dtype.h"
#include "src/reduce/cuda/reduce_cuda.h"
#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

int gridFor(size_t n) {
  // Multiprocessors of the current device, asked once per device.
  static int sms[64] = {};
  int dev = 0;
  cudaGetDevice(&dev);
  int& sm = sms[dev >= 0 && dev < 64 ? dev : 0];
  if (sm == 0 && cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    sm = 32;
  const size_t want = (n + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(sm) * 4;  // 4 x 512 threads fill an SM's 2048 slots
  return static_cast<int>(want < 1 ? 1 : want < cap ? want : cap);
}

}  // namespace cuda

namespace {
enum class Family { kInt, kFloat, kHalf, kFp8 };

Family familyOf(collieDataType_t t) {
  if (t == collieFloat16 || t == collieBfloat16) return Family::kHalf;
  if (t == collieFloat32 || t == collieFloat64) return Family::kFloat;
  if (t == collieFloat8e4m3 || t == collieFloat8e5m2) return Family::kFp8;
  return Family::kInt;
}

Status fromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status(collieUnhandledSystemError, std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

Status reduceDevice(void* dst, void* peer, const void* a, const void* b, size_t count,
                    collieDataType_t dtype, collieRedOp_t op, void* stream) {
  if (!validDtype(dtype) || !validRedOp(op))
    return invalidArgument("reduceDevice: invalid dtype or reduction op");
  if (count == 0) return Status::ok();
  if (dst == nullptr || a == nullptr || b == nullptr)
    return invalidArgument("reduceDevice: a NULL buffer with count " + std::to_string(count));
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  switch (familyOf(dtype)) {
    case Family::kInt:
      e = cuda::reduceIntFamily(dtype, op, dst, peer, a, b, count, s);
      break;
    case Family::kFloat:
      e = cuda::reduceFloatFamily(dtype, op, dst, peer, a, b, count, s);
      break;
    case Family::kHalf:
      e = cuda::reduceHalfFamily(dtype, op, dst, peer, a, b, count, s);
      break;
    case Family::kFp8:
      e = cuda::reduceFp8Family(dtype, op, dst, peer, a, b, count, s);
      break;
  }
  return fromCuda(e, "reduce kernel launch");
}

Status scaleDevice(void* buf, size_t count, collieDataType_t dtype, int divisor, void* stream) {
  if (!validDtype(dtype)) return invalidArgument("scaleDevice: invalid dtype");
  if (divisor <= 0) return invalidArgument("scaleDevice: divisor must be positive");
  if (count == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  switch (familyOf(dtype)) {
    case Family::kInt:
      e = cuda::scaleIntFamily(dtype, buf, count, divisor, s);
      break;
    case Family::kFloat:
      e = cuda::scaleFloatFamily(dtype, buf, count, divisor, s);
      break;
    case Family::kHalf:
      e = cuda::scaleHalfFamily(dtype, buf, count, divisor, s);
      break;
    case Family::kFp8:
      e = cuda::scaleFp8Family(dtype, buf, count, divisor, s);
      break;
  }
  return fromCuda(e, "scale kernel launch");
}

}  // namespace collie
