// CUDA reduction kernels for the integer dtypes.
#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

// The integer dtypes: X(enumerator, element type, type it divides in). Integers divide in their
// own type (int8/uint8 promote to int), as the CPU kernels do.
#define COLLIE_CUDA_INTS(X)           \
  X(collieInt8, int8_t, int)          \
  X(collieUint8, uint8_t, int)        \
  X(collieInt32, int32_t, int32_t)    \
  X(collieUint32, uint32_t, uint32_t) \
  X(collieInt64, int64_t, int64_t)    \
  X(collieUint64, uint64_t, uint64_t)

cudaError_t reduceIntFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                            const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
#define COLLIE_X(e, T, D) \
  case e:                 \
    return launchForOp<T, std::make_unsigned_t<T>, T>(op, dst, peer, a, b, count, stream);
    COLLIE_CUDA_INTS(COLLIE_X)
#undef COLLIE_X
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scaleIntFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                           cudaStream_t stream) {
  switch (dtype) {
#define COLLIE_X(e, T, D) \
  case e:                 \
    return launchScale<T, D>(buf, count, divisor, false, stream);
    COLLIE_CUDA_INTS(COLLIE_X)
#undef COLLIE_X
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace collie
