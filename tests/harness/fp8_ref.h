// The 8-bit float formats written out for tests, apart from the library's code: decoding from
// the bit fields, encoding by searching every code for the nearest finite value. That search
// is the rule NCCL's saturating conversion follows: nearest, ties to the even code, anything
// past the largest finite value (infinities too) becomes it, NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace collie {
namespace testing {

struct Fp8Spec {
  int expBits, mantBits, bias;
  bool hasInf;  // e5m2: exponent all ones is inf/NaN; e4m3 (fn): only 0x7f/0xff are NaN
};
constexpr Fp8Spec kE4m3Spec{4, 3, 7, false};
constexpr Fp8Spec kE5m2Spec{5, 2, 15, true};

inline double fp8Decode(const Fp8Spec& f, uint8_t bits) {
  const int exp = (bits >> f.mantBits) & ((1 << f.expBits) - 1);
  const int mant = bits & ((1 << f.mantBits) - 1);
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  const int expMax = (1 << f.expBits) - 1;
  if (f.hasInf && exp == expMax)
    return mant == 0 ? sign * std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::quiet_NaN();
  if (!f.hasInf && exp == expMax && mant == (1 << f.mantBits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(mant, 1 - f.bias - f.mantBits);
  return sign * std::ldexp(mant + (1 << f.mantBits), exp - f.bias - f.mantBits);
}

inline bool fp8IsNan(const Fp8Spec& f, uint8_t bits) { return std::isnan(fp8Decode(f, bits)); }

// v rounded to nearest (ties to the even code) among the finite codes of v's sign. The finite
// codes of one sign, 0 up to the largest, are in increasing order of value.
inline uint8_t fp8Encode(const Fp8Spec& f, double v) {
  if (std::isnan(v)) return f.hasInf ? 0x7e : 0x7f;
  const int last = f.hasInf ? 0x7b : 0x7e;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  int lo = 0, hi = last;  // the first code whose value is >= a, or last
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (fp8Decode(f, static_cast<uint8_t>(mid)) < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  int c = lo;
  if (c > 0) {
    const double up = fp8Decode(f, static_cast<uint8_t>(c)) - a;
    const double down = a - fp8Decode(f, static_cast<uint8_t>(c - 1));
    if (up < 0 || down < up || (down == up && ((c - 1) & 1) == 0)) c = c - 1 + (up < 0);
  }
  return static_cast<uint8_t>(sign | c);
}

}  // namespace testing
}  // namespace collie
