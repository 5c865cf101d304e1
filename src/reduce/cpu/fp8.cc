// Scalar conversions between f32 and the two 8-bit float formats, with the rounding NCCL's
// device kernels use (CUDA's __NV_SATFINITE conversion): nearest with ties to even, results
// beyond the largest finite value (infinities included) saturate to it, NaN stays NaN. The
// encoder works on the f32 bits, so it ignores the caller's floating-point environment.
#include <cstdint>
#include <cstring>

#include "src/reduce/reduce.h"

namespace collie {
namespace {

// One format: mantissa bits, exponent bias, the largest finite code, the NaN code (no sign).
struct Fp8Format {
  int mbits;
  int bias;
  uint32_t maxCode;
  uint32_t nanCode;
};
constexpr Fp8Format kE4m3{3, 7, 0x7E, 0x7F};
constexpr Fp8Format kE5m2{2, 15, 0x7B, 0x7E};

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint8_t encode(const Fp8Format& fmt, float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | fmt.nanCode);
  const int e = static_cast<int>(a >> 23) - 127;  // f32 subnormals fall far below both formats
  const int emin = 1 - fmt.bias;
  if (e < emin - fmt.mbits - 2) return static_cast<uint8_t>(sign);  // under half the least step
  // Keep mbits fraction bits at e (or at emin, below which the format is subnormal), rounding
  // the rest to nearest even. The significand r then includes the implicit bit, so adding it to
  // the exponent field's base gives the code, a carry moving into the exponent as it should.
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = 23 - fmt.mbits + (e < emin ? emin - e : 0);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rem = m & ((1u << shift) - 1);
  uint32_t r = m >> shift;
  if (rem > half || (rem == half && (r & 1u))) ++r;
  const uint32_t base = e < emin ? 0 : static_cast<uint32_t>(e + fmt.bias - 1) << fmt.mbits;
  const uint32_t code = e > 127 ? fmt.maxCode + 1 : base + r;  // e > 127: an infinity
  return static_cast<uint8_t>(sign | (code > fmt.maxCode ? fmt.maxCode : code));
}

float decode(const Fp8Format& fmt, uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (mag > fmt.maxCode) {
    // e5m2's 0x7C is infinity; every other code past the largest finite one is NaN.
    const bool inf = fmt.mbits == 2 && mag == 0x7C;
    return bitsToFloat(sign | (inf ? 0x7F800000u : 0x7FC00000u));
  }
  const uint32_t exp = mag >> fmt.mbits;
  const uint32_t frac = mag & ((1u << fmt.mbits) - 1);
  if (exp == 0) {
    // Subnormal: frac * 2^(1 - bias - mbits), exact in f32.
    const float step = bitsToFloat(static_cast<uint32_t>(127 + 1 - fmt.bias - fmt.mbits) << 23);
    const float v = static_cast<float>(frac) * step;
    uint32_t vb;
    std::memcpy(&vb, &v, sizeof vb);
    return bitsToFloat(sign | vb);
  }
  return bitsToFloat(sign | ((exp + 127 - fmt.bias) << 23) | (frac << (23 - fmt.mbits)));
}

}  // namespace

float fp8e4m3ToFloat(uint8_t b) { return decode(kE4m3, b); }
uint8_t floatToFp8e4m3(float f) { return encode(kE4m3, f); }
float fp8e5m2ToFloat(uint8_t b) { return decode(kE5m2, b); }
uint8_t floatToFp8e5m2(float f) { return encode(kE5m2, f); }

}  // namespace collie
