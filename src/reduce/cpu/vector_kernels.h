// The CPU reduction and scaling kernels, as templates compiled once per instruction set (see
// cpu_variant.h): each build sits in the namespace COLLIE_CPU_VARIANT names.
//
// Semantics (the contract of src/reduce/reduce.h):
//  - Integers wrap (two's complement). Sum and prod are computed in the unsigned type of the same
//    width, which has the same bits and no signed-overflow UB; max and min compare signed types as
//    signed.
//  - Max and min propagate NaN: if either input is NaN the result is NaN (the first NaN input,
//    made quiet for f16 and bf16, as is for f32 and f64). With no NaN they return one of the
//    inputs exactly; which of -0 and +0 comes out of max(-0, +0) is unspecified.
//  - Sum and prod follow IEEE: NaN in gives NaN out, inf + -inf and 0 * inf give NaN, overflow
//    gives inf.
//  - f16, bf16 and fp8 are widened to f32 exactly, combined in f32 and rounded to nearest even
//    once. f32 carries more than twice their precision plus two bits, so for sum and prod that
//    one rounding gives the same answer as rounding the exact result. fp8 results saturate to
//    the largest finite value, as NCCL's do (so e5m2's infinities come out as 57344).
//  - scaleForAvg multiplies floats by 1/divisor in f32 (f64 for f64) and divides integers,
//    truncating toward zero.
//
// Vectorisation is written out with GCC/Clang vector extensions, with a zero-padded last block
// instead of a scalar tail, rather than left to the auto-vectoriser: at -O2 GCC only vectorises
// loops it needs no runtime checks for, and the alias check it would need here fails exactly in
// the common in-place case (dst == a). The vector types lower to whatever the target offers
// (SSE2, AVX2, AVX-512); f16 uses F16C where the target has it and a scalar conversion otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "src/reduce/reduce.h"

#ifndef COLLIE_CPU_VARIANT
#error "vector_kernels.h is included by cpu_variant.h only"
#endif

namespace collie {
namespace COLLIE_CPU_VARIANT {
namespace {

// 32 bytes needs AVX for a register; without it 16 keeps every vector in one SSE register (and
// avoids the ABI change GCC warns about for 32-byte vectors passed without AVX).
#ifdef __AVX__
constexpr size_t kVecBytes = 32;
#else
constexpr size_t kVecBytes = 16;
#endif

template <typename T, size_t kBytes>
struct VecType {
  typedef T type __attribute__((vector_size(kBytes)));
};

template <typename V>
V loadVec(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
void storeVec(void* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// A "lanes" type says how one block of kWidth stored elements becomes a vector of the compute
// type (Vec, of Scalar) and back. Elem is the stored element.

// Stored and computed as T.
template <typename T>
struct NativeLanes {
  using Elem = T;
  using Scalar = T;
  using Vec = typename VecType<T, kVecBytes>::type;
  static constexpr size_t kWidth = kVecBytes / sizeof(T);
  static Vec load(const void* p) { return loadVec<Vec>(p); }
  static void store(void* p, Vec v) { storeVec(p, v); }
};

using F32Vec = VecType<float, kVecBytes>::type;
constexpr size_t kF32Width = kVecBytes / sizeof(float);

// IEEE binary16 stored, f32 computed.
struct HalfLanes {
  using Elem = uint16_t;
  using Scalar = float;
  using Vec = F32Vec;
  static constexpr size_t kWidth = kF32Width;
#ifdef __F16C__
  static_assert(kWidth == 8, "F16C implies AVX, so a block is one ymm register");
  static Vec load(const void* p) {
    return reinterpret_cast<Vec>(_mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))));
  }
  static void store(void* p, Vec v) {
    // The rounding is given here, not taken from MXCSR, so it is nearest-even whatever the caller's
    // floating-point environment.
    const __m128i h = _mm256_cvtps_ph(reinterpret_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(static_cast<__m128i*>(p), h);
  }
#else
  static Vec load(const void* p) {
    uint16_t h[kWidth];
    std::memcpy(h, p, sizeof h);
    Vec v;
    for (size_t k = 0; k < kWidth; ++k) v[k] = halfToFloat(h[k]);
    return v;
  }
  static void store(void* p, Vec v) {
    uint16_t h[kWidth];
    for (size_t k = 0; k < kWidth; ++k) h[k] = floatToHalf(v[k]);
    std::memcpy(p, h, sizeof h);
  }
#endif
};

// bfloat16 stored, f32 computed. Both directions are integer operations on the f32 bits, the same
// as floatToBf16/bf16ToFloat, so they vectorise on any target.
struct Bf16Lanes {
  using Elem = uint16_t;
  using Scalar = float;
  using Vec = F32Vec;
  using Bits = VecType<uint32_t, kVecBytes>::type;
  using Narrow = VecType<uint16_t, kVecBytes / 2>::type;
  static constexpr size_t kWidth = kF32Width;
  static Vec load(const void* p) {
#ifdef __AVX2__
    // GCC widens a generic 8 x u16 vector in two halves; one vpmovzxwd does it whole.
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return reinterpret_cast<Vec>(_mm256_slli_epi32(wide, 16));
#else
    const Bits wide = __builtin_convertvector(loadVec<Narrow>(p), Bits) << 16;
    return reinterpret_cast<Vec>(wide);
#endif
  }
  static void store(void* p, Vec v) {
    const Bits u = reinterpret_cast<Bits>(v);
    const Bits rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const Bits quietNan = (u >> 16) | 0x0040u;
    const Bits r = (v != v) ? quietNan : rounded;
#ifdef __AVX2__
    // Every lane is at most 0xFFFF, so the saturating pack only narrows.
    const __m256i ri = reinterpret_cast<__m256i>(r);
    const __m128i n = _mm_packus_epi32(_mm256_castsi256_si128(ri), _mm256_extracti128_si256(ri, 1));
    _mm_storeu_si128(static_cast<__m128i*>(p), n);
#else
    storeVec(p, __builtin_convertvector(r, Narrow));
#endif
  }
};

// An 8-bit float stored, f32 computed. The conversions are the library's scalar ones (fp8.cc,
// built for every CPU): no instruction set converts fp8, and a table lookup per element keeps
// this far faster than the network that feeds it.
template <float (*kDecode)(uint8_t), uint8_t (*kEncode)(float)>
struct Fp8Lanes {
  using Elem = uint8_t;
  using Scalar = float;
  using Vec = F32Vec;
  static constexpr size_t kWidth = kF32Width;
  static Vec load(const void* p) {
    uint8_t b[kWidth];
    std::memcpy(b, p, sizeof b);
    Vec v;
    for (size_t k = 0; k < kWidth; ++k) v[k] = kDecode(b[k]);
    return v;
  }
  static void store(void* p, Vec v) {
    uint8_t b[kWidth];
    for (size_t k = 0; k < kWidth; ++k) b[k] = kEncode(v[k]);
    std::memcpy(p, b, sizeof b);
  }
};
using E4m3Lanes = Fp8Lanes<&fp8e4m3ToFloat, &floatToFp8e4m3>;
using E5m2Lanes = Fp8Lanes<&fp8e5m2ToFloat, &floatToFp8e5m2>;

// Ops act on whole vectors. The `a != a` tests are NaN tests; for integers they fold away.
struct SumOp {
  template <typename V>
  static V apply(V a, V b) {
    return a + b;
  }
};
struct ProdOp {
  template <typename V>
  static V apply(V a, V b) {
    return a * b;
  }
};
struct MaxOp {
  template <typename V>
  static V apply(V a, V b) {
    return ((a > b) | (a != a)) ? a : b;
  }
};
struct MinOp {
  template <typename V>
  static V apply(V a, V b) {
    return ((a < b) | (a != a)) ? a : b;
  }
};

// dst = a OP b over count elements. Blocks are loaded before they are stored, so dst == a or
// dst == b is safe; the last partial block goes through zero-padded buffers, which costs one
// vector step and keeps a single code path per op (0 OP 0 is harmless for every op).
template <typename L, typename Op>
void reduceKernel(void* dst, const void* a, const void* b, size_t count) {
  constexpr size_t kBlock = L::kWidth * sizeof(typename L::Elem);
  auto* d = static_cast<char*>(dst);
  auto* x = static_cast<const char*>(a);
  auto* y = static_cast<const char*>(b);
  size_t bytes = count * sizeof(typename L::Elem);
  // Two blocks per iteration let the second block's loads issue while the first is computed.
  for (; bytes >= 2 * kBlock;
       bytes -= 2 * kBlock, d += 2 * kBlock, x += 2 * kBlock, y += 2 * kBlock) {
    const auto r0 = Op::apply(L::load(x), L::load(y));
    const auto r1 = Op::apply(L::load(x + kBlock), L::load(y + kBlock));
    L::store(d, r0);
    L::store(d + kBlock, r1);
  }
  if (bytes >= kBlock) {
    L::store(d, Op::apply(L::load(x), L::load(y)));
    bytes -= kBlock, d += kBlock, x += kBlock, y += kBlock;
  }
  if (bytes > 0) {
    alignas(kVecBytes) char ta[kBlock] = {};
    alignas(kVecBytes) char tb[kBlock] = {};
    alignas(kVecBytes) char td[kBlock];
    std::memcpy(ta, x, bytes);
    std::memcpy(tb, y, bytes);
    L::store(td, Op::apply(L::load(ta), L::load(tb)));
    std::memcpy(d, td, bytes);
  }
}

#if defined(__x86_64__)
constexpr bool kHaveStreamingStores = true;
// One vector of kVecBytes to p (kVecBytes-aligned) with a non-temporal store.
template <typename V>
void streamVec(void* p, V v) {
  static_assert(sizeof(V) == kVecBytes, "streams whole vectors");
#ifdef __AVX__
  __m256i x;
  std::memcpy(&x, &v, sizeof x);
  _mm256_stream_si256(static_cast<__m256i*>(p), x);
#else
  __m128i x;
  std::memcpy(&x, &v, sizeof x);
  _mm_stream_si128(static_cast<__m128i*>(p), x);
#endif
}
void storeFence() { _mm_sfence(); }
#else
constexpr bool kHaveStreamingStores = false;
template <typename V>
void streamVec(void* p, V v) {
  storeVec(p, v);
}
void storeFence() {}
#endif

// reduceKernel with non-temporal stores for lanes stored as whole vectors: the head up to the
// first aligned block and the tail go through reduceKernel. The fence orders the weakly
// ordered streaming stores before whatever the caller does next (e.g. tell a peer the data is
// there).
template <typename L, typename Op>
void reduceStreamingKernel(void* dst, const void* a, const void* b, size_t count) {
  using Elem = typename L::Elem;
  constexpr size_t kBlock = L::kWidth * sizeof(Elem);
  static_assert(kBlock == kVecBytes, "only lanes stored as whole vectors stream");
  auto* d = static_cast<char*>(dst);
  auto* x = static_cast<const char*>(a);
  auto* y = static_cast<const char*>(b);
  const uintptr_t mis = reinterpret_cast<uintptr_t>(d) % kBlock;
  if (mis % sizeof(Elem) != 0) return reduceKernel<L, Op>(dst, a, b, count);
  size_t head = mis == 0 ? 0 : (kBlock - mis) / sizeof(Elem);
  if (head > count) head = count;
  reduceKernel<L, Op>(d, x, y, head);
  const size_t skip = head * sizeof(Elem);
  d += skip, x += skip, y += skip, count -= head;
  size_t bytes = count * sizeof(Elem);
  for (; bytes >= 2 * kBlock;
       bytes -= 2 * kBlock, d += 2 * kBlock, x += 2 * kBlock, y += 2 * kBlock) {
    const auto r0 = Op::apply(L::load(x), L::load(y));
    const auto r1 = Op::apply(L::load(x + kBlock), L::load(y + kBlock));
    streamVec(d, r0);
    streamVec(d + kBlock, r1);
  }
  reduceKernel<L, Op>(d, x, y, bytes / sizeof(Elem));
  storeFence();
}

// buf *= 1/divisor in the compute type of L.
template <typename L>
void scaleFloat(void* buf, size_t count, int divisor) {
  using Scalar = typename L::Scalar;
  constexpr size_t kBlock = L::kWidth * sizeof(typename L::Elem);
  const Scalar inv = Scalar(1) / static_cast<Scalar>(divisor);
  auto* p = static_cast<char*>(buf);
  size_t bytes = count * sizeof(typename L::Elem);
  for (; bytes >= kBlock; bytes -= kBlock, p += kBlock) L::store(p, L::load(p) * inv);
  if (bytes > 0) {
    alignas(kVecBytes) char t[kBlock] = {};
    std::memcpy(t, p, bytes);
    L::store(t, L::load(t) * inv);
    std::memcpy(p, t, bytes);
  }
}

// buf /= divisor for integers. With divisor > 0 the usual conversions keep the quotient exact
// (int8/uint8 promote to int, the others divide in their own type) and C++ division truncates
// toward zero. x86 has no vector integer division, so this stays scalar; avg on integers is rare.
template <typename T>
void scaleInt(void* buf, size_t count, int divisor) {
  auto* p = static_cast<char*>(buf);
  for (size_t i = 0; i < count; ++i, p += sizeof(T)) {
    T v;
    std::memcpy(&v, p, sizeof v);
    v = static_cast<T>(v / divisor);
    std::memcpy(p, &v, sizeof v);
  }
}

}  // namespace
}  // namespace COLLIE_CPU_VARIANT
}  // namespace collie
