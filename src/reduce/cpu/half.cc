// Scalar conversions between f32 and the two 16-bit float formats (IEEE binary16 and bfloat16).
// Exact IEEE behaviour: subnormals are kept (never flushed), overflow rounds to infinity, every
// rounding is to nearest with ties to even. NaNs stay NaN and come out quiet, keeping the top of
// their payload, which is what the x86 F16C instructions do, so the scalar and vector paths of the
// kernels give the same bits.
#include <cstdint>
#include <cstring>

#include "src/reduce/reduce.h"

namespace collie {
namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

constexpr uint32_t kF32ExpMask = 0x7F800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;

}  // namespace

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {
    const uint32_t quiet = mant != 0 ? kF32QuietBit : 0;
    return bitsToFloat(sign | kF32ExpMask | quiet | (mant << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32 (and a normal f32 when mant != 0).
    return bitsToFloat(sign | floatBits(static_cast<float>(mant) * 0x1p-24f));
  }
  // Normal: rebias the exponent from 15 to 127.
  return bitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > kF32ExpMask) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  // 65520 is the midpoint between the largest half (65504, odd mantissa) and 2^16: ties go up.
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a >= 0x38800000u) {
    // Normal half: rebias, then round away the low 13 bits; a carry moves into the exponent,
    // which is the right answer when the mantissa was all ones.
    const uint32_t r = a - (112u << 23);
    return static_cast<uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
  }
  // 2^-25 is the midpoint between 0 and the smallest subnormal: it ties to 0 (even).
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);
  // Subnormal half: the result is round(|f| * 2^24). |f| = m * 2^(e - 150), so shift m right by
  // 126 - e, which is between 14 and 24 here. Rounding up from the largest subnormal gives 0x0400,
  // the smallest normal, which is again the right encoding.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t rem = m & ((1u << shift) - 1);
  uint32_t r = m >> shift;
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float bf16ToFloat(uint16_t b) {
  // bfloat16 is the top half of an f32: widening is exact and keeps NaN payloads as they are.
  return bitsToFloat(static_cast<uint32_t>(b) << 16);
}

uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  // A NaN whose payload sits only in the low 16 bits would truncate to infinity: set the quiet bit.
  if ((u & 0x7FFFFFFFu) > kF32ExpMask) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Round to nearest even on the low 16 bits; overflow carries into infinity, as it should.
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace collie
