// CUDA reduction kernels for the integer dtypes.
#include "src/reduce/cuda/reduce_kernels.cuh"

namespace collie {
namespace cuda {

namespace {
template <typename T>
cudaError_t intOps(collieRedOp_t op, void* dst, void* peer, const void* a, const void* b,
                   size_t count, cudaStream_t stream) {
  return launchForOp<T, std::make_unsigned_t<T>, T>(op, dst, peer, a, b, count, stream);
}
}  // namespace

cudaError_t reduceIntFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                            const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
    case collieInt8:
      return intOps<int8_t>(op, dst, peer, a, b, count, stream);
    case collieUint8:
      return intOps<uint8_t>(op, dst, peer, a, b, count, stream);
    case collieInt32:
      return intOps<int32_t>(op, dst, peer, a, b, count, stream);
    case collieUint32:
      return intOps<uint32_t>(op, dst, peer, a, b, count, stream);
    case collieInt64:
      return intOps<int64_t>(op, dst, peer, a, b, count, stream);
    case collieUint64:
      return intOps<uint64_t>(op, dst, peer, a, b, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t scaleIntFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                           cudaStream_t stream) {
  // Integers divide in their own type (int8/uint8 promote to int), as the CPU kernels do.
  switch (dtype) {
    case collieInt8:
      return launchScale<int8_t, int>(buf, count, divisor, false, stream);
    case collieUint8:
      return launchScale<uint8_t, int>(buf, count, divisor, false, stream);
    case collieInt32:
      return launchScale<int32_t, int32_t>(buf, count, divisor, false, stream);
    case collieUint32:
      return launchScale<uint32_t, uint32_t>(buf, count, divisor, false, stream);
    case collieInt64:
      return launchScale<int64_t, int64_t>(buf, count, divisor, false, stream);
    case collieUint64:
      return launchScale<uint64_t, uint64_t>(buf, count, divisor, false, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda
}  // namespace collie
