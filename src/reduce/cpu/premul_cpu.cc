// mulByScalar(): the pre-multiplication of PreMulSum ops on host memory. Scalar loops: the
// step runs once per call over this rank's input, next to a transfer of the same bytes.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/base/dtype.h"
#include "src/reduce/reduce.h"

namespace collie {
namespace {

template <typename T>
T loadAt(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof v);
  return v;
}

template <typename T>
void storeAt(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof v);
}

// Integers wrap: the product is taken in the unsigned type of the same width.
template <typename T>
void mulInt(void* dst, const void* src, size_t count, const void* scalar) {
  using U = std::make_unsigned_t<T>;
  const U s = static_cast<U>(loadAt<T>(scalar, 0));
  for (size_t i = 0; i < count; ++i) {
    // uint8 promotes to int; going through unsigned keeps the product free of signed overflow.
    const U v = static_cast<U>(static_cast<unsigned long long>(loadAt<U>(src, i)) * s);
    storeAt<U>(dst, i, v);
  }
}

template <typename T>
void mulNative(void* dst, const void* src, size_t count, const void* scalar) {
  const T s = loadAt<T>(scalar, 0);
  for (size_t i = 0; i < count; ++i) storeAt<T>(dst, i, loadAt<T>(src, i) * s);
}

// A narrow float stored as S, computed in f32: the product of two such values is exact in f32,
// so the one rounding back gives the correctly rounded product.
template <typename S, float (*kIn)(S), S (*kOut)(float)>
void mulNarrow(void* dst, const void* src, size_t count, const void* scalar) {
  const float s = kIn(loadAt<S>(scalar, 0));
  for (size_t i = 0; i < count; ++i) storeAt<S>(dst, i, kOut(kIn(loadAt<S>(src, i)) * s));
}

}  // namespace

void mulByScalar(void* dst, const void* src, size_t count, collieDataType_t dtype,
                 const void* scalar) {
  switch (dtype) {
    case collieInt8:
      return mulInt<int8_t>(dst, src, count, scalar);
    case collieUint8:
      return mulInt<uint8_t>(dst, src, count, scalar);
    case collieInt32:
      return mulInt<int32_t>(dst, src, count, scalar);
    case collieUint32:
      return mulInt<uint32_t>(dst, src, count, scalar);
    case collieInt64:
      return mulInt<int64_t>(dst, src, count, scalar);
    case collieUint64:
      return mulInt<uint64_t>(dst, src, count, scalar);
    case collieFloat16:
      return mulNarrow<uint16_t, &halfToFloat, &floatToHalf>(dst, src, count, scalar);
    case collieFloat32:
      return mulNative<float>(dst, src, count, scalar);
    case collieFloat64:
      return mulNative<double>(dst, src, count, scalar);
    case collieBfloat16:
      return mulNarrow<uint16_t, &bf16ToFloat, &floatToBf16>(dst, src, count, scalar);
    case collieFloat8e4m3:
      return mulNarrow<uint8_t, &fp8e4m3ToFloat, &floatToFp8e4m3>(dst, src, count, scalar);
    case collieFloat8e5m2:
      return mulNarrow<uint8_t, &fp8e5m2ToFloat, &floatToFp8e5m2>(dst, src, count, scalar);
    default:
      return;
  }
}

}  // namespace collie
