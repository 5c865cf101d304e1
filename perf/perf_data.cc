// Input generation and the host reference check of collie-perf (see perf_data.h).
#include "perf/perf_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace collie::perf {
namespace {

constexpr double kTwo53 = 9007199254740992.0;  // doubles hold every integer up to here

// Order follows collieDataType_t. 64-bit integer bounds stop at 2^53 so that the double
// reference stays exact.
const TypeInfo kTypes[kNumTypes] = {
    {collieInt8, "int8", 1, true, false, 127.0, 6, 0.0},
    {collieUint8, "uint8", 1, false, false, 255.0, 7, 0.0},
    {collieInt32, "int32", 4, true, false, 2147483647.0, 30, 0.0},
    {collieUint32, "uint32", 4, false, false, 4294967295.0, 31, 0.0},
    {collieInt64, "int64", 8, true, false, kTwo53, 52, 0.0},
    {collieUint64, "uint64", 8, false, false, kTwo53, 52, 0.0},
    {collieFloat16, "half", 2, true, true, 2048.0, 15, 0x1p-11},
    {collieFloat32, "float", 4, true, true, 16777216.0, 60, 0x1p-24},
    {collieFloat64, "double", 8, true, true, kTwo53, 60, 0x1p-53},
    {collieBfloat16, "bfloat16", 2, true, true, 256.0, 60, 0x1p-8},
    {collieFloat8e4m3, "f8e4m3", 1, true, true, 16.0, 8, 0x1p-4},
    {collieFloat8e5m2, "f8e5m2", 1, true, true, 8.0, 15, 0x1p-3},
};

const char* const kOpNames[kNumOps] = {"sum", "prod", "max", "min", "avg"};

// The value rank r puts at index i, for one (datatype, op, nranks, rep).
class Generator {
 public:
  Generator(const TypeInfo& type, collieRedOp_t op, int nranks, int rep) : rep_(rep) {
    if (op == collieProd) {
      // Each element gets factor 2 from at most ceil(n / period) ranks, so the product is at
      // most 2^maxPow2; the other ranks give 1 (or -1 where the type has a sign).
      prod_ = true;
      long needed = (nranks + type.maxPow2 - 1) / type.maxPow2;
      period_ = static_cast<uint64_t>(std::max(3L, needed));
      negatives_ = type.isSigned;
      maxAbs_ = 2.0;
      return;
    }
    // Sums (and averages) of n inputs must stay under the bound; min/max need only one input.
    double divisor = (op == collieSum || op == collieAvg) ? nranks : 1;
    double maxMag = std::floor(type.exactBound / divisor);
    double half = std::min(maxMag, type.isSigned ? 500.0 : 1000.0);
    if (half < 1) return;  // more ranks than the bound: every input is 0, still exact
    scale_ = static_cast<int64_t>(std::floor(maxMag / half));
    if (type.isSigned) {
      modulus_ = static_cast<uint64_t>(2 * half + 1);
      offset_ = static_cast<int64_t>(half);
    } else {
      modulus_ = static_cast<uint64_t>(half + 1);
    }
    maxAbs_ = half * static_cast<double>(scale_);
  }

  double at(int rank, size_t i) const {
    uint64_t r = static_cast<uint64_t>(rank);
    uint64_t rep = static_cast<uint64_t>(rep_);
    if (prod_) {
      if ((i + r + rep) % period_ == 0) return 2.0;
      if (negatives_ && (3 * i + 5 * r + rep) % 7 == 0) return -1.0;
      return 1.0;
    }
    // Different strides for index and rank so that ranks disagree and min/max/sum all matter.
    int64_t p = static_cast<int64_t>((7 * i + 13 * r + 29 * rep) % modulus_);
    return static_cast<double>((p - offset_) * scale_);
  }

  double maxAbs() const { return maxAbs_; }

 private:
  int rep_;
  bool prod_ = false;
  uint64_t period_ = 1;
  bool negatives_ = false;
  uint64_t modulus_ = 1;
  int64_t offset_ = 0;
  int64_t scale_ = 0;
  double maxAbs_ = 0;
};

template <typename T>
struct NativeCodec {
  using Store = T;
  static void put(T* p, double v) { *p = static_cast<T>(v); }
  static double get(const T* p) { return static_cast<double>(*p); }
};

struct HalfCodec {
  using Store = uint16_t;
  static void put(uint16_t* p, double v) { *p = floatToHalf(static_cast<float>(v)); }
  static double get(const uint16_t* p) { return halfToDouble(*p); }
};

struct Bf16Codec {
  using Store = uint16_t;
  static void put(uint16_t* p, double v) { *p = floatToBf16(static_cast<float>(v)); }
  static double get(const uint16_t* p) { return bf16ToDouble(*p); }
};

// The 8-bit floats: kMbits mantissa bits, exponent bias kBias, largest finite code kMax.
template <int kMbits, int kBias, int kMax>
struct Fp8Codec {
  using Store = uint8_t;
  static void put(uint8_t* p, double v) { *p = doubleToFp8(v, kMbits, kBias, kMax); }
  static double get(const uint8_t* p) { return fp8ToDouble(*p, kMbits, kBias, kMax); }
};

// Calls f with the codec of dtype, so the element loops are compiled once per type.
template <typename F>
void withCodec(collieDataType_t dtype, F&& f) {
  switch (dtype) {
    case collieInt8:
      return f(NativeCodec<int8_t>{});
    case collieUint8:
      return f(NativeCodec<uint8_t>{});
    case collieInt32:
      return f(NativeCodec<int32_t>{});
    case collieUint32:
      return f(NativeCodec<uint32_t>{});
    case collieInt64:
      return f(NativeCodec<int64_t>{});
    case collieUint64:
      return f(NativeCodec<uint64_t>{});
    case collieFloat16:
      return f(HalfCodec{});
    case collieFloat32:
      return f(NativeCodec<float>{});
    case collieFloat64:
      return f(NativeCodec<double>{});
    case collieBfloat16:
      return f(Bf16Codec{});
    case collieFloat8e4m3:
      return f(Fp8Codec<3, 7, 0x7e>{});
    case collieFloat8e5m2:
      return f(Fp8Codec<2, 15, 0x7b>{});
    default:
      return;
  }
}

double reference(const Generator& gen, collieRedOp_t op, bool isFloat, int nranks, size_t i) {
  double acc = gen.at(0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = gen.at(r, i);
    switch (op) {
      case collieSum:
      case collieAvg:
        acc += v;
        break;
      case collieProd:
        acc *= v;
        break;
      case collieMax:
        acc = std::max(acc, v);
        break;
      case collieMin:
        acc = std::min(acc, v);
        break;
      default:
        break;
    }
  }
  if (op == collieAvg) {
    // Integers divide once, truncating toward zero, as NCCL's average does.
    if (isFloat) return acc / nranks;
    return static_cast<double>(static_cast<int64_t>(acc) / nranks);
  }
  return acc;
}

}  // namespace

const TypeInfo& typeInfo(int dtype) { return kTypes[dtype]; }

const char* opName(int op) { return kOpNames[op]; }

int findDatatype(const char* name) {
  for (int t = 0; t < kNumTypes; ++t) {
    if (std::strcmp(name, kTypes[t].name) == 0) return t;
  }
  return -1;
}

int findOp(const char* name) {
  for (int o = 0; o < kNumOps; ++o) {
    if (std::strcmp(name, kOpNames[o]) == 0) return o;
  }
  return -1;
}

void fillInput(void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op, int nranks,
               int rank, int rep, size_t first) {
  Generator gen(typeInfo(dtype), op, nranks, rep);
  withCodec(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    auto* p = static_cast<typename Codec::Store*>(buf);
    for (size_t i = 0; i < count; ++i) Codec::put(p + i, gen.at(rank, first + i));
  });
}

int64_t countWrong(const void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op,
                   int nranks, int rep, size_t first) {
  const TypeInfo& type = typeInfo(dtype);
  Generator gen(type, op, nranks, rep);
  // Only a float average may round: the library scales the exact sum by 1/n in the compute
  // precision and rounds to the type; a premultiplying implementation rounds n times more.
  double tolerance = 0;
  if (op == collieAvg && type.isFloat) tolerance = (nranks + 2) * type.epsilon * gen.maxAbs();
  int64_t wrong = 0;
  withCodec(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    const auto* p = static_cast<const typename Codec::Store*>(buf);
    for (size_t i = 0; i < count; ++i) {
      double want = reference(gen, op, type.isFloat, nranks, first + i);
      double got = Codec::get(p + i);
      // Written so that a NaN result counts as wrong.
      if (!(std::fabs(got - want) <= tolerance)) ++wrong;
    }
  });
  return wrong;
}

int64_t countWrongCopy(const void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op,
                       int nranks, int source, int rep, size_t first) {
  Generator gen(typeInfo(dtype), op, nranks, rep);
  int64_t wrong = 0;
  withCodec(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    const auto* p = static_cast<const typename Codec::Store*>(buf);
    // Inputs are exact in every type, so a copy must match bit for bit (NaN counts as wrong).
    for (size_t i = 0; i < count; ++i) wrong += !(Codec::get(p + i) == gen.at(source, first + i));
  });
  return wrong;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to 65520 or more: infinity
  if (abs < 0x38800000u) {
    // Below 2^-14 the half is subnormal: its bits are the value in units of 2^-24, and the
    // scaling is exact in float, so nearbyint does the even rounding.
    float a;
    std::memcpy(&a, &abs, sizeof(a));
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 -> 15
  return sign | static_cast<uint16_t>((rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13);
}

double halfToDouble(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(mantissa | 0x400, exponent - 25);
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

double bf16ToDouble(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

uint8_t doubleToFp8(double v, int mbits, int bias, int maxCode) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return sign | (mbits == 3 ? 0x7f : 0x7e);
  // In units of the format's step at v's binade (the subnormal step below the normal range),
  // nearbyint rounds to nearest even; past the largest finite value it saturates, as NCCL does.
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int binade = std::max(e - 1, 1 - bias);
  const double steps = std::isinf(a) ? 1e300 : std::nearbyint(std::ldexp(a, mbits - binade));
  // steps counts units of 2^(binade - mbits), the implicit bit included for normal values: added
  // to the binade's base it is the code, subnormal (base 0) or with a carry to the next binade.
  const double code = (binade + bias - 1) * std::ldexp(1, mbits) + steps;
  return sign | static_cast<uint8_t>(std::min(code, static_cast<double>(maxCode)));
}

double fp8ToDouble(uint8_t b, int mbits, int bias, int maxCode) {
  const int mag = b & 0x7f;
  double magnitude;
  if (mag > maxCode) {
    magnitude = (mbits == 2 && mag == 0x7c) ? INFINITY : NAN;
  } else {
    const int exponent = mag >> mbits;
    const int frac = mag & ((1 << mbits) - 1);
    magnitude = exponent == 0 ? std::ldexp(frac, 1 - bias - mbits)
                              : std::ldexp(frac | (1 << mbits), exponent - bias - mbits);
  }
  return (b & 0x80) ? -magnitude : magnitude;
}

}  // namespace collie::perf
