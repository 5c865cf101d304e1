// CUDA reduction kernels for the 8-bit floats: widened to f32, combined, and narrowed with the
// saturating conversion (__NV_SATFINITE) NCCL uses, as the CPU kernels do.
#include <cuda_fp8.h>

#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

template <>
struct Convert<__nv_fp8_e4m3, float> {
  __device__ static float in(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
  __device__ static __nv_fp8_e4m3 out(float v) {
    __nv_fp8_e4m3 r;
    r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    return r;
  }
};
template <>
struct Convert<__nv_fp8_e5m2, float> {
  __device__ static float in(__nv_fp8_e5m2 v) { return static_cast<float>(v); }
  __device__ static __nv_fp8_e5m2 out(float v) {
    __nv_fp8_e5m2 r;
    r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
    return r;
  }
};

cudaError_t reduceFp8Family(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                            const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
    case collieFloat8e4m3:
      return launchForOp<__nv_fp8_e4m3, float, float>(op, dst, peer, a, b, count, stream);
    case collieFloat8e5m2:
      return launchForOp<__nv_fp8_e5m2, float, float>(op, dst, peer, a, b, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scaleFp8Family(collieDataType_t dtype, void* buf, size_t count, int divisor,
                           cudaStream_t stream) {
  switch (dtype) {
    case collieFloat8e4m3:
      return launchScale<__nv_fp8_e4m3, float>(buf, count, divisor, true, stream);
    case collieFloat8e5m2:
      return launchScale<__nv_fp8_e5m2, float>(buf, count, divisor, true, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace collie
