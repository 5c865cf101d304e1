// Tests of the CPU reduction kernels and the f16/bf16 conversions (src/reduce/reduce.h).
//
// The references here are written independently of the kernels: floats are combined in double
// and rounded once to the element type by a rounding routine built on nearbyint/ldexp (no bit
// tricks shared with the library), integers are combined in uint64 arithmetic and truncated.
// For f16, bf16 and f32, one rounding of the double result is exactly what the kernels must give
// for sum and prod: double has more than 2p+2 bits for each of those types (p their precision),
// so rounding first to double and then to the type is the same as rounding the exact result, and
// the kernels' f32 arithmetic has the same property for f16 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "src/base/dtype.h"
#include "src/reduce/cpu/cpu_dispatch.h"
#include "src/reduce/reduce.h"

namespace collie {
namespace {

template <typename T>
uint64_t bitsOf(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t floatBits(float f) { return static_cast<uint32_t>(bitsOf(f)); }

// ---------------------------------------------------------------------------------------------
// Reference 16-bit formats, by value: a format with `fracBits` stored fraction bits, exponent
// bias `bias` and all-ones exponent for inf/NaN.

struct Format16 {
  int fracBits;
  int bias;
};
constexpr Format16 kHalf{10, 15};
constexpr Format16 kBf16{7, 127};

int expBits(Format16 f) { return 15 - f.fracBits; }
int minNormalExp(Format16 f) { return 1 - f.bias; }
double maxFinite(Format16 f) {
  const int emax = (1 << expBits(f)) - 2 - f.bias;
  return std::ldexp(2.0 - std::ldexp(1.0, -f.fracBits), emax);
}

double decode16(Format16 f, uint16_t bits) {
  const int e = (bits >> f.fracBits) & ((1 << expBits(f)) - 1);
  const int m = bits & ((1 << f.fracBits) - 1);
  const bool neg = (bits & 0x8000) != 0;
  double v;
  if (e == (1 << expBits(f)) - 1) {
    v = m != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(m, minNormalExp(f) - f.fracBits);
  } else {
    v = std::ldexp(m + (1 << f.fracBits), e - f.bias - f.fracBits);
  }
  return neg ? -v : v;
}

// x rounded once, to nearest with ties to even, to a value of the format (inf on overflow).
double round16(Format16 f, double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const int e = std::max(std::ilogb(x), minNormalExp(f));
  const double quantum = std::ldexp(1.0, e - f.fracBits);
  const double r = std::nearbyint(x / quantum) * quantum;  // the default mode is ties-to-even
  if (std::fabs(r) > maxFinite(f)) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

// The bits of a value the format represents exactly (any NaN becomes the canonical quiet NaN).
uint16_t encode16(Format16 f, double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const uint16_t expAll = static_cast<uint16_t>(((1 << expBits(f)) - 1) << f.fracBits);
  if (std::isnan(v)) return static_cast<uint16_t>(expAll | (1 << (f.fracBits - 1)));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | expAll;
  if (a == 0) return sign;
  const int e = std::ilogb(a);
  if (e < minNormalExp(f)) {
    return static_cast<uint16_t>(sign |
                                 static_cast<int>(std::ldexp(a, f.fracBits - minNormalExp(f))));
  }
  const int m = static_cast<int>(std::ldexp(a, f.fracBits - e)) - (1 << f.fracBits);
  return static_cast<uint16_t>(sign | ((e + f.bias) << f.fracBits) | m);
}

bool isNan16(Format16 f, uint16_t bits) { return std::isnan(decode16(f, bits)); }

// Distance in representable steps, treating -0 and +0 as one point.
int ulpDistance16(uint16_t x, uint16_t y) {
  auto ord = [](uint16_t b) { return (b & 0x8000) ? -static_cast<int>(b & 0x7FFF) : b & 0x7FFF; };
  return std::abs(ord(x) - ord(y));
}

// ---------------------------------------------------------------------------------------------
// Conversions.

TEST(HalfConversion, EveryPatternDecodesExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double want = decode16(kHalf, static_cast<uint16_t>(h));
    const float got = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    }
  }
}

TEST(HalfConversion, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    if (isNan16(kHalf, static_cast<uint16_t>(h))) {
      ASSERT_TRUE(isNan16(kHalf, back)) << std::hex << h << " -> " << back;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Bf16Conversion, EveryPatternDecodesExactly) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const double want = decode16(kBf16, static_cast<uint16_t>(b));
    const float got = bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << b;
    }
  }
}

TEST(Bf16Conversion, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t back = floatToBf16(bf16ToFloat(static_cast<uint16_t>(b)));
    if (isNan16(kBf16, static_cast<uint16_t>(b))) {
      ASSERT_TRUE(isNan16(kBf16, back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

// Midpoints between neighbours go to the even one; a hair either side goes to the nearer one.
void checkTies(Format16 f, uint16_t (*toFormat)(float)) {
  const uint16_t maxBits = encode16(f, maxFinite(f));
  for (uint32_t lo = 0; lo <= maxBits; ++lo) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t a = static_cast<uint16_t>(lo | sign);
      const uint16_t b = static_cast<uint16_t>((lo + 1) | sign);  // maxBits + 1 is infinity
      const double va = decode16(f, a);
      const double vb = decode16(f, b);
      const double mid =
          lo == maxBits ? va + (va - decode16(f, static_cast<uint16_t>(a - 1))) / 2 : (va + vb) / 2;
      const float fm = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(fm), mid) << "midpoint not exact in f32";
      ASSERT_EQ(toFormat(fm), (lo & 1) ? b : a) << std::hex << "tie between " << a << " and " << b;
      const float below = std::nextafter(fm, static_cast<float>(va));
      const float above = std::nextafter(fm, sign ? -INFINITY : INFINITY);
      ASSERT_EQ(toFormat(below), a) << std::hex << a;
      ASSERT_EQ(toFormat(above), b) << std::hex << b;
    }
  }
}

TEST(HalfConversion, TiesRoundToEven) { checkTies(kHalf, &floatToHalf); }
TEST(Bf16Conversion, TiesRoundToEven) { checkTies(kBf16, &floatToBf16); }

TEST(HalfConversion, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // the tie goes to the even neighbour, 2^16 = inf
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie with 0 goes to 0
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(-0x1p-26f), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(floatToHalf(0x1.ff8p-15f), 0x03FF);  // the largest subnormal
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);  // a tie that rounds up out of the subnormals
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1e-45f), 0x0000);                                // f32 subnormal
  EXPECT_TRUE(isNan16(kHalf, floatToHalf(floatFromBits(0x7F800001u))));  // payload in low bits
  EXPECT_TRUE(isNan16(kHalf, floatToHalf(floatFromBits(0xFFC00000u))));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));
  EXPECT_EQ(halfToFloat(0x7C00), INFINITY);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
}

TEST(Bf16Conversion, OverflowAndSpecials) {
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(floatToBf16(floatFromBits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(floatToBf16(floatFromBits(0x7F7F8000u)), 0x7F80);  // tie, 0x7F7F is odd
  EXPECT_EQ(floatToBf16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBf16(floatFromBits(0x00008000u)), 0x0000);            // f32 subnormal tie to 0
  EXPECT_EQ(floatToBf16(floatFromBits(0x00018000u)), 0x0002);            // tie up to even
  EXPECT_TRUE(isNan16(kBf16, floatToBf16(floatFromBits(0x7F800001u))));  // low payload only
  EXPECT_TRUE(isNan16(kBf16, floatToBf16(floatFromBits(0xFF800001u))));
  EXPECT_EQ(floatToBf16(floatFromBits(0xFF800001u)) & 0x8000, 0x8000);
}

// f32 inputs spread over the interesting range: f16/bf16 subnormals, normals, overflow, and
// random bit patterns for everything else (NaNs included).
std::vector<float> sampleFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    if (i % 2 == 0) {
      out.push_back(floatFromBits(r));
    } else {
      // exponent field 95..146 covers 2^-32 .. 2^19
      const uint32_t exp = 95 + static_cast<uint32_t>(rng() % 52);
      out.push_back(floatFromBits((r & 0x807FFFFFu) | (exp << 23)));
    }
  }
  return out;
}

TEST(HalfConversion, MatchesOneRoundingOfTheExactValue) {
  for (float f : sampleFloats(2000000, 1)) {
    const uint16_t got = floatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(isNan16(kHalf, got)) << f;
      continue;
    }
    ASSERT_EQ(got, encode16(kHalf, round16(kHalf, f))) << std::hexfloat << f;
  }
}

TEST(Bf16Conversion, MatchesOneRoundingOfTheExactValue) {
  std::vector<float> samples = sampleFloats(2000000, 2);
  for (uint32_t u : {0x00000001u, 0x00007FFFu, 0x00008001u, 0x007FFFFFu, 0x807F8000u}) {
    samples.push_back(floatFromBits(u));
  }
  for (float f : samples) {
    const uint16_t got = floatToBf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(isNan16(kBf16, got)) << f;
      continue;
    }
    ASSERT_EQ(got, encode16(kBf16, round16(kBf16, f))) << std::hexfloat << f;
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) float f16cToFloat(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t f16cFromFloat(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

// The kernels convert with F16C when the CPU has it; the scalar functions must give the same
// bits, NaNs included.
TEST(HalfConversion, ScalarMatchesF16cBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(floatBits(halfToFloat(static_cast<uint16_t>(h))),
              floatBits(f16cToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
  }
  for (float f : sampleFloats(1000000, 3)) {
    ASSERT_EQ(floatToHalf(f), f16cFromFloat(f)) << std::hex << floatBits(f);
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// The variants of the CPU kernels: every case below runs each one this CPU supports, through
// runReduce and runScale (reduce() and runScale() with that variant's kernels).

const CpuKernels* gVariant = nullptr;  // null: the variant reduce() chose

std::vector<CpuIsa> testedIsas() {
  std::vector<CpuIsa> v;
  const unsigned usable = builtCpuIsas() & supportedCpuIsas();
  for (int i = 0; i < kNumCpuIsas; ++i)
    if (usable & (1u << i)) v.push_back(static_cast<CpuIsa>(i));
  return v;
}

void runReduce(void* dst, const void* a, const void* b, size_t n, collieDataType_t dtype,
               collieRedOp_t op) {
  if (gVariant == nullptr) return reduce(dst, a, b, n, dtype, op);
  reduceWith(*gVariant, dst, a, b, n, dtype, op);
}

void runScale(void* buf, size_t n, collieDataType_t dtype, int divisor) {
  if (gVariant == nullptr) return runScale(buf, n, dtype, divisor);
  scaleWith(*gVariant, buf, n, dtype, divisor);
}

// Runs body with each variant in turn.
template <typename Body>
void forEachVariant(Body body) {
  for (CpuIsa isa : testedIsas()) {
    SCOPED_TRACE(cpuIsaName(isa));
    gVariant = &cpuKernels(isa);
    body();
  }
  gVariant = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Per-dtype references for reduce().

// Integers: combine in uint64 (wrapping), truncate to T. Max/min compare as T.
template <typename T>
struct IntRef {
  using Storage = T;
  static T random(std::mt19937_64& rng) { return static_cast<T>(rng()); }
  static T combine(collieRedOp_t op, T a, T b) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
      case collieSum:
      case collieAvg:
        return static_cast<T>(ua + ub);
      case collieProd:
        return static_cast<T>(ua * ub);
      case collieMax:
        return a > b ? a : b;
      case collieMin:
        return a < b ? a : b;
      default:
        ADD_FAILURE() << "bad op";
        return 0;
    }
  }
  static bool matches(collieRedOp_t, T, T, T want, T got) { return want == got; }
  static std::string show(T v) { return std::to_string(static_cast<long long>(v)); }
};

// Floats: decode to double, combine in double, round once to the type.
double refCombine(collieRedOp_t op, double a, double b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case collieSum:
    case collieAvg:
      return a + b;
    case collieProd:
      return a * b;
    case collieMax:
      return (std::isnan(a) || std::isnan(b)) ? nan : std::max(a, b);
    case collieMin:
      return (std::isnan(a) || std::isnan(b)) ? nan : std::min(a, b);
    default:
      ADD_FAILURE() << "bad op";
      return nan;
  }
}

// Storage S, value codec given by the derived policy (decode, encodeRounded, randomNice).
template <typename Derived, typename S>
struct FloatRefBase {
  using Storage = S;
  static S random(std::mt19937_64& rng) {
    // Half random bit patterns (every class: NaN, inf, subnormal, huge), half values of similar
    // magnitude so that sums really round.
    if (rng() & 1) {
      const uint64_t r = rng();
      S s;
      std::memcpy(&s, &r, sizeof s);
      return s;
    }
    std::uniform_real_distribution<double> dist(-8.0, 8.0);
    return Derived::encodeRounded(dist(rng));
  }
  static S combine(collieRedOp_t op, S a, S b) {
    return Derived::encodeRounded(refCombine(op, Derived::decode(a), Derived::decode(b)));
  }
  static bool matches(collieRedOp_t op, S a, S b, S want, S got) {
    const double w = Derived::decode(want);
    const double g = Derived::decode(got);
    if (std::isnan(w)) return std::isnan(g);
    if (op == collieMax || op == collieMin) {
      // Equal inputs (-0 and +0) may give either; the result is always one of the inputs.
      return g == w && (bitsOf(got) == bitsOf(a) || bitsOf(got) == bitsOf(b));
    }
    return bitsOf(got) == bitsOf(want);
  }
  static std::string show(S v) {
    std::ostringstream os;
    os << Derived::decode(v) << " (0x" << std::hex << bitsOf(v) << ")";
    return os.str();
  }
};

struct F32Ref : FloatRefBase<F32Ref, float> {
  static double decode(float v) { return v; }
  static float encodeRounded(double v) { return static_cast<float>(v); }
};
struct F64Ref : FloatRefBase<F64Ref, double> {
  static double decode(double v) { return v; }
  static double encodeRounded(double v) { return v; }
};
struct HalfRef : FloatRefBase<HalfRef, uint16_t> {
  static double decode(uint16_t v) { return decode16(kHalf, v); }
  static uint16_t encodeRounded(double v) { return encode16(kHalf, round16(kHalf, v)); }
};
struct Bf16Ref : FloatRefBase<Bf16Ref, uint16_t> {
  static double decode(uint16_t v) { return decode16(kBf16, v); }
  static uint16_t encodeRounded(double v) { return encode16(kBf16, round16(kBf16, v)); }
};

// ---------------------------------------------------------------------------------------------
// Buffers with guard bytes around them, placed at a chosen distance from a 64-byte boundary.

constexpr unsigned char kGuardByte = 0xA5;
constexpr size_t kGuard = 64;

class GuardedBuffer {
 public:
  GuardedBuffer(size_t bytes, size_t misalign) : bytes_(bytes), mem_(bytes + 2 * kGuard + 128) {
    std::memset(mem_.data(), kGuardByte, mem_.size());
    const auto addr = reinterpret_cast<uintptr_t>(mem_.data()) + kGuard;
    start_ = kGuard + (64 - addr % 64) % 64 + misalign;
  }
  unsigned char* data() { return mem_.data() + start_; }
  // Whether every byte outside [data, data + bytes) still holds the guard pattern.
  bool guardsIntact() const {
    for (size_t i = 0; i < mem_.size(); ++i) {
      if ((i < start_ || i >= start_ + bytes_) && mem_[i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> mem_;
  size_t start_;
};

template <typename S>
S loadAt(const unsigned char* p, size_t i) {
  S v;
  std::memcpy(&v, p + i * sizeof(S), sizeof v);
  return v;
}

template <typename S>
void storeAt(unsigned char* p, size_t i, S v) {
  std::memcpy(p + i * sizeof(S), &v, sizeof v);
}

enum class Placement { kAligned, kUnalignedByByte, kUnalignedByElement, kInPlaceA, kInPlaceB };

const char* placementName(Placement p) {
  switch (p) {
    case Placement::kAligned:
      return "aligned";
    case Placement::kUnalignedByByte:
      return "unaligned-by-byte";
    case Placement::kUnalignedByElement:
      return "unaligned-by-element";
    case Placement::kInPlaceA:
      return "dst==a";
    case Placement::kInPlaceB:
      return "dst==b";
  }
  return "?";
}

// Runs reduce() on n generated elements with the given placement and checks every result, the
// untouched inputs and the guard bytes.
template <typename R>
void checkReduce(collieDataType_t dtype, collieRedOp_t op, size_t n, Placement placement,
                 uint64_t seed) {
  using S = typename R::Storage;
  SCOPED_TRACE(testing::Message() << dtypeName(dtype) << " " << redOpName(op) << " n=" << n << " "
                                  << placementName(placement));
  std::mt19937_64 rng(seed);
  std::vector<S> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = R::random(rng);
    b[i] = R::random(rng);
  }
  const size_t bytes = n * sizeof(S);
  size_t offA = 0, offB = 0, offD = 0;
  if (placement == Placement::kUnalignedByByte) offA = 1, offB = 3, offD = 5;
  if (placement == Placement::kUnalignedByElement)
    offA = sizeof(S), offB = 2 * sizeof(S), offD = 3 * sizeof(S);
  if (placement == Placement::kInPlaceA || placement == Placement::kInPlaceB) offA = 1, offB = 2;
  GuardedBuffer bufA(bytes, offA), bufB(bytes, offB), bufD(bytes, offD);
  for (size_t i = 0; i < n; ++i) {
    storeAt(bufA.data(), i, a[i]);
    storeAt(bufB.data(), i, b[i]);
  }
  unsigned char* dst = bufD.data();
  if (placement == Placement::kInPlaceA) dst = bufA.data();
  if (placement == Placement::kInPlaceB) dst = bufB.data();

  runReduce(dst, bufA.data(), bufB.data(), n, dtype, op);

  int failures = 0;
  for (size_t i = 0; i < n && failures < 5; ++i) {
    const S want = R::combine(op, a[i], b[i]);
    const S got = loadAt<S>(dst, i);
    if (!R::matches(op, a[i], b[i], want, got)) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": " << R::show(a[i]) << " " << redOpName(op) << " "
                    << R::show(b[i]) << " gave " << R::show(got) << ", want " << R::show(want);
    }
  }
  for (size_t i = 0; i < n && dst != bufA.data(); ++i) {
    ASSERT_EQ(bitsOf(loadAt<S>(bufA.data(), i)), bitsOf(a[i])) << "input a changed at " << i;
  }
  for (size_t i = 0; i < n && dst != bufB.data(); ++i) {
    ASSERT_EQ(bitsOf(loadAt<S>(bufB.data(), i)), bitsOf(b[i])) << "input b changed at " << i;
  }
  EXPECT_TRUE(bufA.guardsIntact() && bufB.guardsIntact() && bufD.guardsIntact())
      << "a write outside [dst, dst + count)";
}

template <typename R>
void checkAllShapes(collieDataType_t dtype, collieRedOp_t op) {
  uint64_t seed = 1000 * static_cast<uint64_t>(dtype) + static_cast<uint64_t>(op);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{33}}) {
    for (Placement p :
         {Placement::kAligned, Placement::kUnalignedByByte, Placement::kUnalignedByElement,
          Placement::kInPlaceA, Placement::kInPlaceB}) {
      checkReduce<R>(dtype, op, n, p, ++seed);
    }
  }
  // A long odd length, unaligned, out of place and in place (two placements keep the suite fast).
  checkReduce<R>(dtype, op, 1000003, Placement::kUnalignedByByte, ++seed);
  checkReduce<R>(dtype, op, 1000003, Placement::kInPlaceA, ++seed);
  // Past the size from which separate outputs are written with streaming stores (8 MiB), with
  // the output one element off alignment: an ordinary head, the streamed body, a tail.
  const size_t streamed = (size_t{8} << 20) / dtypeSize(dtype) + 13;
  checkReduce<R>(dtype, op, streamed, Placement::kUnalignedByElement, ++seed);
  // Every length up to a few vector blocks, so each size of the last partial block is covered.
  for (size_t n = 2; n <= 70; ++n)
    checkReduce<R>(dtype, op, n, Placement::kUnalignedByByte, ++seed);
}

void checkAllShapesFor(collieDataType_t dtype, collieRedOp_t op) {
  switch (dtype) {
    case collieInt8:
      return checkAllShapes<IntRef<int8_t>>(dtype, op);
    case collieUint8:
      return checkAllShapes<IntRef<uint8_t>>(dtype, op);
    case collieInt32:
      return checkAllShapes<IntRef<int32_t>>(dtype, op);
    case collieUint32:
      return checkAllShapes<IntRef<uint32_t>>(dtype, op);
    case collieInt64:
      return checkAllShapes<IntRef<int64_t>>(dtype, op);
    case collieUint64:
      return checkAllShapes<IntRef<uint64_t>>(dtype, op);
    case collieFloat16:
      return checkAllShapes<HalfRef>(dtype, op);
    case collieFloat32:
      return checkAllShapes<F32Ref>(dtype, op);
    case collieFloat64:
      return checkAllShapes<F64Ref>(dtype, op);
    case collieBfloat16:
      return checkAllShapes<Bf16Ref>(dtype, op);
    default:
      FAIL() << "no reference for dtype " << dtype;
  }
}

class ReduceTest
    : public testing::TestWithParam<std::tuple<CpuIsa, collieDataType_t, collieRedOp_t>> {};

TEST_P(ReduceTest, MatchesReferenceForEveryShape) {
  gVariant = &cpuKernels(std::get<0>(GetParam()));
  checkAllShapesFor(std::get<1>(GetParam()), std::get<2>(GetParam()));
  gVariant = nullptr;
}

// The fp8 dtypes are left to fp8_reduce_test.cc, which runs every pair of their bit patterns
// and these shapes against a reference of their own (saturation breaks the "max and min return
// an input" rule checked here).
std::vector<collieDataType_t> allDtypes() {
  std::vector<collieDataType_t> v;
  for (int t = 0; t < collieNumTypes; ++t) {
    const auto dt = static_cast<collieDataType_t>(t);
    if (!isFp8Dtype(dt)) v.push_back(dt);
  }
  return v;
}

std::vector<collieRedOp_t> allOps() {
  std::vector<collieRedOp_t> v;
  for (int op = 0; op < collieNumOps; ++op) v.push_back(static_cast<collieRedOp_t>(op));
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndOps, ReduceTest,
                         testing::Combine(testing::ValuesIn(testedIsas()),
                                          testing::ValuesIn(allDtypes()),
                                          testing::ValuesIn(allOps())),
                         [](const testing::TestParamInfo<ReduceTest::ParamType>& info) {
                           return std::string(cpuIsaName(std::get<0>(info.param))) + "_" +
                                  dtypeName(std::get<1>(info.param)) + "_" +
                                  redOpName(std::get<2>(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Named cases: each states one rule of the contract.

template <typename T>
std::vector<T> reduced(std::vector<T> a, const std::vector<T>& b, collieDataType_t dtype,
                       collieRedOp_t op) {
  runReduce(a.data(), a.data(), b.data(), a.size(), dtype, op);
  return a;
}

TEST(ReduceIntegers, SumWrapsAround) {
  forEachVariant([&] {
    EXPECT_EQ(reduced<int8_t>({127, -128, -1}, {1, -1, 1}, collieInt8, collieSum),
              (std::vector<int8_t>{-128, 127, 0}));
    EXPECT_EQ(reduced<uint8_t>({255, 200}, {1, 100}, collieUint8, collieSum),
              (std::vector<uint8_t>{0, 44}));
    const int32_t i32max = std::numeric_limits<int32_t>::max();
    EXPECT_EQ(reduced<int32_t>({i32max, -i32max - 1}, {1, -1}, collieInt32, collieSum),
              (std::vector<int32_t>{-i32max - 1, i32max}));
    EXPECT_EQ(reduced<uint32_t>({0xFFFFFFFFu}, {2u}, collieUint32, collieSum),
              (std::vector<uint32_t>{1u}));
    const int64_t i64max = std::numeric_limits<int64_t>::max();
    EXPECT_EQ(reduced<int64_t>({i64max}, {1}, collieInt64, collieSum),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
    EXPECT_EQ(reduced<uint64_t>({~0ull}, {~0ull}, collieUint64, collieSum),
              (std::vector<uint64_t>{~0ull - 1}));
  });
}

TEST(ReduceIntegers, ProdWrapsAround) {
  forEachVariant([&] {
    EXPECT_EQ(reduced<int8_t>({16, -128, 127}, {16, -1, 127}, collieInt8, collieProd),
              (std::vector<int8_t>{0, -128, 1}));
    EXPECT_EQ(reduced<uint8_t>({16, 255}, {17, 255}, collieUint8, collieProd),
              (std::vector<uint8_t>{16, 1}));
    EXPECT_EQ(reduced<int32_t>({65536, std::numeric_limits<int32_t>::min()}, {65536, -1},
                               collieInt32, collieProd),
              (std::vector<int32_t>{0, std::numeric_limits<int32_t>::min()}));
    EXPECT_EQ(reduced<uint32_t>({0x10001u}, {0x10001u}, collieUint32, collieProd),
              (std::vector<uint32_t>{0x20001u}));
    EXPECT_EQ(reduced<int64_t>({int64_t{1} << 62, -3}, {4, std::numeric_limits<int64_t>::max()},
                               collieInt64, collieProd),
              (std::vector<int64_t>{0, std::numeric_limits<int64_t>::min() + 3}));
    EXPECT_EQ(reduced<uint64_t>({~0ull}, {~0ull}, collieUint64, collieProd),
              (std::vector<uint64_t>{1}));
  });
}

TEST(ReduceIntegers, MaxMinCompareWithTheSignOfTheType) {
  forEachVariant([&] {
    EXPECT_EQ(reduced<int8_t>({-1, 5}, {1, -128}, collieInt8, collieMax),
              (std::vector<int8_t>{1, 5}));
    EXPECT_EQ(reduced<uint8_t>({255, 5}, {1, 128}, collieUint8, collieMax),
              (std::vector<uint8_t>{255, 128}));
    EXPECT_EQ(
        reduced<int64_t>({-1, 5}, {1, std::numeric_limits<int64_t>::min()}, collieInt64, collieMin),
        (std::vector<int64_t>{-1, std::numeric_limits<int64_t>::min()}));
    EXPECT_EQ(reduced<uint64_t>({~0ull, 5}, {1, 6}, collieUint64, collieMin),
              (std::vector<uint64_t>{1, 5}));
    EXPECT_EQ(reduced<uint32_t>({0x80000000u}, {1u}, collieUint32, collieMax),
              (std::vector<uint32_t>{0x80000000u}));
  });
}

TEST(ReduceIntegers, AvgReducesAsSum) {
  forEachVariant([&] {
    EXPECT_EQ(reduced<int32_t>({3, -7}, {4, 2}, collieInt32, collieAvg),
              (std::vector<int32_t>{7, -5}));
  });
}

// One float type seen through its bits, for the special-value tests below.
struct FloatKind {
  collieDataType_t dtype;
  size_t size;
  uint64_t (*encode)(double);  // exact values only
  double (*decode)(uint64_t);
};

uint64_t encHalf(double v) { return encode16(kHalf, v); }
double decHalf(uint64_t b) { return decode16(kHalf, static_cast<uint16_t>(b)); }
uint64_t encBf16(double v) { return encode16(kBf16, v); }
double decBf16(uint64_t b) { return decode16(kBf16, static_cast<uint16_t>(b)); }
uint64_t encF32(double v) { return bitsOf(static_cast<float>(v)); }
double decF32(uint64_t b) { return floatFromBits(static_cast<uint32_t>(b)); }
uint64_t encF64(double v) { return bitsOf(v); }
double decF64(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

const FloatKind kFloatKinds[] = {{collieFloat16, 2, encHalf, decHalf},
                                 {collieFloat32, 4, encF32, decF32},
                                 {collieFloat64, 8, encF64, decF64},
                                 {collieBfloat16, 2, encBf16, decBf16}};

// Applies op to (x, y) at every position of a 37-element vector (so both the vector body and
// the last partial block see it), the other positions holding 1 op 2, and returns the results at
// the chosen positions.
std::vector<double> atEveryLane(const FloatKind& k, collieRedOp_t op, double x, double y) {
  constexpr size_t kN = 37;
  std::vector<double> out;
  for (size_t pos = 0; pos < kN; ++pos) {
    std::vector<unsigned char> a(kN * k.size), b(kN * k.size);
    for (size_t i = 0; i < kN; ++i) {
      const uint64_t ea = k.encode(i == pos ? x : 1.0), eb = k.encode(i == pos ? y : 2.0);
      std::memcpy(&a[i * k.size], &ea, k.size);
      std::memcpy(&b[i * k.size], &eb, k.size);
    }
    runReduce(a.data(), a.data(), b.data(), kN, k.dtype, op);
    for (size_t i = 0; i < kN; ++i) {
      uint64_t r = 0;
      std::memcpy(&r, &a[i * k.size], k.size);
      if (i == pos) {
        out.push_back(k.decode(r));
      } else {
        EXPECT_EQ(k.decode(r), refCombine(op, 1.0, 2.0)) << "neighbour " << i << " of " << pos;
      }
    }
  }
  return out;
}

void expectAllNan(const FloatKind& k, collieRedOp_t op, double x, double y) {
  for (double r : atEveryLane(k, op, x, y)) {
    EXPECT_TRUE(std::isnan(r)) << dtypeName(k.dtype) << " " << x << " " << redOpName(op) << " " << y
                               << " gave " << r;
  }
}

void expectAllEqual(const FloatKind& k, collieRedOp_t op, double x, double y, double want) {
  for (double r : atEveryLane(k, op, x, y)) {
    EXPECT_EQ(r, want) << dtypeName(k.dtype) << " " << x << " " << redOpName(op) << " " << y;
    EXPECT_EQ(std::signbit(r), std::signbit(want)) << dtypeName(k.dtype) << " sign of zero";
  }
}

TEST(ReduceFloats, MaxMinPropagateNanFromEitherSide) {
  forEachVariant([&] {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const FloatKind& k : kFloatKinds) {
      for (collieRedOp_t op : {collieMax, collieMin}) {
        expectAllNan(k, op, nan, 1.0);
        expectAllNan(k, op, 1.0, nan);
        expectAllNan(k, op, nan, nan);
        expectAllNan(k, op, nan, INFINITY);
        expectAllNan(k, op, -INFINITY, nan);
      }
    }
  });
}

TEST(ReduceFloats, InfinitiesAndNanInSumProdMaxMin) {
  forEachVariant([&] {
    const double inf = INFINITY;
    for (const FloatKind& k : kFloatKinds) {
      expectAllNan(k, collieSum, inf, -inf);
      expectAllNan(k, collieSum, std::numeric_limits<double>::quiet_NaN(), 1.0);
      expectAllNan(k, collieProd, 0.0, inf);
      expectAllNan(k, collieProd, std::numeric_limits<double>::quiet_NaN(), 0.0);
      expectAllEqual(k, collieSum, inf, 1.0, inf);
      expectAllEqual(k, collieSum, -inf, -inf, -inf);
      expectAllEqual(k, collieProd, -inf, 2.0, -inf);
      expectAllEqual(k, collieMax, inf, 1.0, inf);
      expectAllEqual(k, collieMax, -inf, -1.0, -1.0);
      expectAllEqual(k, collieMin, -inf, 1.0, -inf);
      expectAllEqual(k, collieMin, inf, -1.0, -1.0);
      expectAllEqual(k, collieSum, -0.0, -0.0, -0.0);
      expectAllEqual(k, collieSum, -0.0, 0.0, 0.0);
      expectAllEqual(k, collieProd, -0.0, 3.0, -0.0);
    }
  });
}

TEST(ReduceFloats, OverflowGivesInfinity) {
  forEachVariant([&] {
    EXPECT_EQ(reduced<uint16_t>({0x7BFF}, {0x7BFF}, collieFloat16, collieSum),
              (std::vector<uint16_t>{0x7C00}));
    EXPECT_EQ(reduced<uint16_t>({0x7BFF}, {0xC000}, collieFloat16, collieProd),  // 65504 * -2
              (std::vector<uint16_t>{0xFC00}));
    EXPECT_EQ(reduced<uint16_t>({0x7F7F}, {0x7F7F}, collieBfloat16, collieSum),
              (std::vector<uint16_t>{0x7F80}));
    const float fmax = std::numeric_limits<float>::max();
    EXPECT_EQ(reduced<float>({fmax}, {fmax}, collieFloat32, collieSum),
              (std::vector<float>{INFINITY}));
  });
}

TEST(ReduceFloats, HalfAndBf16RoundTiesToEven) {
  forEachVariant([&] {
    // 2048 + 1 = 2049 lies halfway between halves 2048 and 2050; 2050 + 1 between 2050 and 2052.
    const uint16_t h2048 = encode16(kHalf, 2048), h2050 = encode16(kHalf, 2050);
    const uint16_t h1 = encode16(kHalf, 1), h2052 = encode16(kHalf, 2052);
    EXPECT_EQ(reduced<uint16_t>({h2048, h2050}, {h1, h1}, collieFloat16, collieSum),
              (std::vector<uint16_t>{h2048, h2052}));
    const uint16_t b256 = encode16(kBf16, 256), b258 = encode16(kBf16, 258);
    const uint16_t b1 = encode16(kBf16, 1), b260 = encode16(kBf16, 260);
    EXPECT_EQ(reduced<uint16_t>({b256, b258}, {b1, b1}, collieBfloat16, collieSum),
              (std::vector<uint16_t>{b256, b260}));
  });
}

// Every 16-bit pattern through the vector conversion paths of the kernels: x + -0 and x * 1 are
// x exactly (NaN stays NaN), and max(x, x) is x.
void checkIdentityOnEveryPattern(collieDataType_t dtype, Format16 f) {
  std::vector<uint16_t> x(0x10000);
  for (uint32_t i = 0; i < 0x10000; ++i) x[i] = static_cast<uint16_t>(i);
  const std::vector<uint16_t> negZero(x.size(), encode16(f, -0.0));
  const std::vector<uint16_t> one(x.size(), encode16(f, 1.0));
  const std::vector<uint16_t> sum = reduced(x, negZero, dtype, collieSum);
  const std::vector<uint16_t> prod = reduced(x, one, dtype, collieProd);
  const std::vector<uint16_t> max = reduced(x, x, dtype, collieMax);
  for (uint32_t i = 0; i < 0x10000; ++i) {
    if (isNan16(f, x[i])) {
      ASSERT_TRUE(isNan16(f, sum[i]) && isNan16(f, prod[i]) && isNan16(f, max[i])) << std::hex << i;
    } else {
      ASSERT_EQ(sum[i], x[i]) << std::hex << i;
      ASSERT_EQ(prod[i], x[i]) << std::hex << i;
      ASSERT_EQ(max[i], x[i]) << std::hex << i;
    }
  }
}

TEST(ReduceFloats, HalfIdentityOnEveryPattern) {
  forEachVariant([&] { checkIdentityOnEveryPattern(collieFloat16, kHalf); });
}
TEST(ReduceFloats, Bf16IdentityOnEveryPattern) {
  forEachVariant([&] { checkIdentityOnEveryPattern(collieBfloat16, kBf16); });
}

TEST(ReduceDeathTest, DeviceMemoryAborts) {
  float x[4] = {};
  EXPECT_DEATH(reduce(x, x, x, 4, collieFloat32, collieSum, MemoryKind::kCuda), "kCuda");
  EXPECT_DEATH(scaleForAvg(x, 4, collieFloat32, 2, MemoryKind::kCuda), "kCuda");
}

// ---------------------------------------------------------------------------------------------
// scaleForAvg.

TEST(ScaleForAvg, F32MultipliesByTheF32Reciprocal) {
  forEachVariant([&] {
    std::mt19937_64 rng(7);
    for (int divisor : {1, 3, 7, 8, 1000}) {
      const float inv = 1.0f / static_cast<float>(divisor);
      for (size_t n : {size_t{1}, size_t{7}, size_t{33}, size_t{1001}}) {
        std::vector<float> x(n);
        for (float& v : x) v = F32Ref::random(rng);
        std::vector<unsigned char> buf(n * 4 + 1);
        std::memcpy(buf.data() + 1, x.data(), n * 4);  // unaligned
        runScale(buf.data() + 1, n, collieFloat32, divisor);
        for (size_t i = 0; i < n; ++i) {
          const float got = loadAt<float>(buf.data() + 1, i);
          // One rounding of the exact product, which double holds exactly.
          const float want = static_cast<float>(static_cast<double>(x[i]) * inv);
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << i;
          } else {
            ASSERT_EQ(floatBits(got), floatBits(want)) << x[i] << " / " << divisor;
          }
        }
      }
    }
  });
}

TEST(ScaleForAvg, F64MultipliesByTheReciprocal) {
  forEachVariant([&] {
    std::vector<double> x = {1.0, -3.0, 1e300, -0.0, INFINITY, 5e-324, 7.0, 9.0, 10.0};
    const std::vector<double> orig = x;
    runScale(x.data(), x.size(), collieFloat64, 3);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(bitsOf(x[i]), bitsOf(orig[i] * (1.0 / 3))) << orig[i];
      // and it is the quotient to within an ulp
      if (std::isfinite(orig[i])) {
        EXPECT_LE(std::fabs(x[i] - orig[i] / 3), std::fabs(orig[i] / 3) * 0x1p-52) << orig[i];
      }
    }
    std::vector<double> n = {std::numeric_limits<double>::quiet_NaN()};
    runScale(n.data(), 1, collieFloat64, 4);
    EXPECT_TRUE(std::isnan(n[0]));
  });
}

// f16/bf16 scale in f32 and round once: within one step of the exact quotient rounded once.
void checkScale16(collieDataType_t dtype, Format16 f) {
  for (int divisor : {1, 2, 3, 5, 7, 64, 255}) {
    std::vector<uint16_t> x(0x10000);
    for (uint32_t i = 0; i < 0x10000; ++i) x[i] = static_cast<uint16_t>(i);
    std::vector<uint16_t> got = x;
    runScale(got.data(), got.size(), dtype, divisor);
    for (uint32_t i = 0; i < 0x10000; ++i) {
      const double exact = decode16(f, x[i]) / divisor;
      if (std::isnan(exact)) {
        ASSERT_TRUE(isNan16(f, got[i])) << std::hex << i;
        continue;
      }
      const uint16_t want = encode16(f, round16(f, exact));
      ASSERT_LE(ulpDistance16(got[i], want), 1) << std::hex << i << " / " << std::dec << divisor;
      ASSERT_EQ(got[i] & 0x8000, x[i] & 0x8000) << std::hex << i;
      // Dividing by a power of two is exact unless it lands in the subnormals.
      if ((divisor & (divisor - 1)) == 0 && std::fabs(exact) >= std::ldexp(1.0, minNormalExp(f))) {
        ASSERT_EQ(got[i], want) << std::hex << i << " / " << std::dec << divisor;
      }
    }
  }
}

TEST(ScaleForAvg, HalfWithinOneUlpOfTheQuotient) {
  forEachVariant([&] { checkScale16(collieFloat16, kHalf); });
}
TEST(ScaleForAvg, Bf16WithinOneUlpOfTheQuotient) {
  forEachVariant([&] { checkScale16(collieBfloat16, kBf16); });
}

TEST(ScaleForAvg, IntegersTruncateTowardZero) {
  forEachVariant([&] {
    std::vector<int32_t> i32 = {-7, 7, -1, -6, std::numeric_limits<int32_t>::min(), 5};
    runScale(i32.data(), i32.size(), collieInt32, 2);
    EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, 0, -3, -1073741824, 2}));

    std::vector<int8_t> i8 = {-128, 127, -5, -128};
    runScale(i8.data(), 3, collieInt8, 3);  // the last element is outside count
    EXPECT_EQ(i8, (std::vector<int8_t>{-42, 42, -1, -128}));
    std::vector<int8_t> i8big = {-128, 127};
    runScale(i8big.data(), 2, collieInt8, 200);  // a divisor wider than the type
    EXPECT_EQ(i8big, (std::vector<int8_t>{0, 0}));

    std::vector<uint8_t> u8 = {255, 7, 200};
    runScale(u8.data(), u8.size(), collieUint8, 2);
    EXPECT_EQ(u8, (std::vector<uint8_t>{127, 3, 100}));
    std::vector<uint8_t> u8big = {255};
    runScale(u8big.data(), 1, collieUint8, 256);
    EXPECT_EQ(u8big, (std::vector<uint8_t>{0}));

    std::vector<uint32_t> u32 = {0xFFFFFFFFu, 10u};
    runScale(u32.data(), u32.size(), collieUint32, 4);
    EXPECT_EQ(u32, (std::vector<uint32_t>{0x3FFFFFFFu, 2u}));

    std::vector<int64_t> i64 = {-9, std::numeric_limits<int64_t>::min(), 9};
    runScale(i64.data(), i64.size(), collieInt64, 4);
    EXPECT_EQ(i64, (std::vector<int64_t>{-2, std::numeric_limits<int64_t>::min() / 4, 2}));

    std::vector<uint64_t> u64 = {~0ull, 3};
    runScale(u64.data(), u64.size(), collieUint64, 3);
    EXPECT_EQ(u64, (std::vector<uint64_t>{0x5555555555555555ull, 1}));
  });
}

TEST(ScaleForAvg, IntegersUnalignedAndLong) {
  forEachVariant([&] {
    std::mt19937_64 rng(11);
    const size_t n = 1001;
    std::vector<int64_t> x(n);
    for (int64_t& v : x) v = static_cast<int64_t>(rng());
    std::vector<unsigned char> buf(n * 8 + 3);
    std::memcpy(buf.data() + 3, x.data(), n * 8);
    runScale(buf.data() + 3, n, collieInt64, 6);
    for (size_t i = 0; i < n; ++i) {
      const int64_t got = loadAt<int64_t>(buf.data() + 3, i);
      const int64_t q = x[i] / 6;  // C++ truncates toward zero
      ASSERT_EQ(got, q) << x[i];
      ASSERT_LE(std::llabs(x[i] - got * 6), 5) << x[i];
    }
  });
}

}  // namespace
}  // namespace collie
