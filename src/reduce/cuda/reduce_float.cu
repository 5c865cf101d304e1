// CUDA reduction kernels for f32 and f64.
#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

cudaError_t reduceFloatFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                              const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
    case collieFloat32:
      return launchForOp<float, float, float>(op, dst, peer, a, b, count, stream);
    case collieFloat64:
      return launchForOp<double, double, double>(op, dst, peer, a, b, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scaleFloatFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                             cudaStream_t stream) {
  switch (dtype) {
    case collieFloat32:
      return launchScale<float, float>(buf, count, divisor, true, stream);
    case collieFloat64:
      return launchScale<double, double>(buf, count, divisor, true, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace collie
