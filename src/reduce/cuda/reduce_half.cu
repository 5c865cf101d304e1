// CUDA reduction kernels for f16 and bf16: widened to f32, combined, rounded to nearest even
// once, as the CPU kernels do.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

template <>
struct Convert<__half, float> {
  __device__ static float in(__half v) { return __half2float(v); }
  __device__ static __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Convert<__nv_bfloat16, float> {
  __device__ static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

cudaError_t reduceHalfFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                             const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
    case collieFloat16:
      return launchForOp<__half, float, float>(op, dst, peer, a, b, count, stream);
    case collieBfloat16:
      return launchForOp<__nv_bfloat16, float, float>(op, dst, peer, a, b, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scaleHalfFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                            cudaStream_t stream) {
  switch (dtype) {
    case collieFloat16:
      return launchScale<__half, float>(buf, count, divisor, true, stream);
    case collieBfloat16:
      return launchScale<__nv_bfloat16, float>(buf, count, divisor, true, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace collie
