// The fp8 host kernels against an independent reference: every pair of bit patterns (256 x 256)
// through each op and each kernel variant this CPU runs, the avg scaling of every pattern, and
// the kernels' shapes (lengths, unaligned, in place). The reference (tests/harness/fp8_ref.h)
// decodes exactly, combines in double and rounds to the nearest finite value, ties to even, as
// NCCL's saturating conversion does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/dtype.h"
#include "src/reduce/cpu/cpu_dispatch.h"
#include "src/reduce/reduce.h"
#include "tests/harness/fp8_ref.h"

namespace collie {
namespace {

using testing::fp8Decode;
using testing::fp8Encode;
using testing::fp8IsNan;
using testing::Fp8Spec;

struct Format {
  collieDataType_t dtype;
  const Fp8Spec* spec;
};
const Format kFormats[] = {{collieFloat8e4m3, &testing::kE4m3Spec},
                           {collieFloat8e5m2, &testing::kE5m2Spec}};

// Max and min propagate NaN, like every float dtype's kernels.
double combine(collieRedOp_t op, double a, double b) {
  if ((op == collieMax || op == collieMin) && (std::isnan(a) || std::isnan(b))) return NAN;
  switch (op) {
    case collieProd:
      return a * b;
    case collieMax:
      return std::fmax(a, b);
    case collieMin:
      return std::fmin(a, b);
    default:  // sum; avg reduces as sum
      return a + b;
  }
}

std::string hex(unsigned v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// Whether got is the reference's answer for a OP b; zeros of either sign match a max/min of
// zeros (which of -0 and +0 comes out is unspecified).
bool matches(const Fp8Spec& f, collieRedOp_t op, uint8_t want, uint8_t got) {
  if (fp8IsNan(f, want)) return fp8IsNan(f, got);
  if ((op == collieMax || op == collieMin) && fp8Decode(f, want) == 0)
    return fp8Decode(f, got) == 0 && !fp8IsNan(f, got);
  return got == want;
}

std::vector<CpuIsa> runnableIsas() {
  std::vector<CpuIsa> v;
  const unsigned usable = builtCpuIsas() & supportedCpuIsas();
  for (int i = 0; i < kNumCpuIsas; ++i)
    if (usable & (1u << i)) v.push_back(static_cast<CpuIsa>(i));
  return v;
}

TEST(Fp8Reduce, EveryPairOfPatternsMatchesTheReferenceForEachOp) {
  std::vector<uint8_t> a(65536), b(65536), out(65536);
  for (int i = 0; i < 65536; ++i)
    a[i] = static_cast<uint8_t>(i >> 8), b[i] = static_cast<uint8_t>(i);
  for (const Format& fmt : kFormats) {
    for (int o = 0; o < collieNumOps; ++o) {
      const auto op = static_cast<collieRedOp_t>(o);
      std::vector<uint8_t> want(65536);
      for (int i = 0; i < 65536; ++i)
        want[i] = fp8Encode(*fmt.spec,
                            combine(op, fp8Decode(*fmt.spec, a[i]), fp8Decode(*fmt.spec, b[i])));
      for (CpuIsa isa : runnableIsas()) {
        reduceWith(cpuKernels(isa), out.data(), a.data(), b.data(), out.size(), fmt.dtype, op);
        int bad = 0;
        for (int i = 0; i < 65536 && bad < 5; ++i) {
          if (matches(*fmt.spec, op, want[i], out[i])) continue;
          ++bad;
          ADD_FAILURE() << cpuIsaName(isa) << " " << dtypeName(fmt.dtype) << ": " << hex(a[i])
                        << " " << redOpName(op) << " " << hex(b[i]) << " gave " << hex(out[i])
                        << ", want " << hex(want[i]);
        }
      }
    }
  }
}

TEST(Fp8Reduce, SaturatesAndKeepsNan) {
  // Named cases of the rule the exhaustive test checks: 448 + 448 stays 448 in e4m3, e5m2's
  // infinity comes out as 57344, and NaN in gives NaN out.
  const uint8_t e4Max = 0x7E, e5Max = 0x7B, e5Inf = 0x7C, e4Nan = 0x7F;
  uint8_t r = 0;
  reduce(&r, &e4Max, &e4Max, 1, collieFloat8e4m3, collieSum);
  EXPECT_EQ(r, e4Max);
  const uint8_t one5 = 0x3C;  // 1.0 in e5m2
  reduce(&r, &e5Inf, &one5, 1, collieFloat8e5m2, collieSum);
  EXPECT_EQ(r, e5Max);
  const uint8_t one4 = 0x38;  // 1.0 in e4m3
  reduce(&r, &e4Nan, &one4, 1, collieFloat8e4m3, collieMax);
  EXPECT_TRUE(fp8IsNan(testing::kE4m3Spec, r)) << hex(r);
  reduce(&r, &one4, &e4Nan, 1, collieFloat8e4m3, collieSum);
  EXPECT_TRUE(fp8IsNan(testing::kE4m3Spec, r)) << hex(r);
}

TEST(Fp8Reduce, AvgScalingOfEveryPatternMatchesTheReference) {
  for (const Format& fmt : kFormats) {
    for (int divisor : {2, 3, 7}) {
      for (CpuIsa isa : runnableIsas()) {
        std::vector<uint8_t> buf(256);
        for (int i = 0; i < 256; ++i) buf[i] = static_cast<uint8_t>(i);
        scaleWith(cpuKernels(isa), buf.data(), buf.size(), fmt.dtype, divisor);
        for (int i = 0; i < 256; ++i) {
          const uint8_t want =
              fp8Encode(*fmt.spec, fp8Decode(*fmt.spec, static_cast<uint8_t>(i)) / divisor);
          EXPECT_TRUE(matches(*fmt.spec, collieSum, want, buf[i]))
              << cpuIsaName(isa) << " " << dtypeName(fmt.dtype) << " " << hex(i) << " / " << divisor
              << " gave " << hex(buf[i]) << ", want " << hex(want);
        }
      }
    }
  }
}

TEST(Fp8Reduce, EveryLengthUnalignedAndInPlace) {
  // Lengths around the vector blocks (a partial last block of each size) and a long one, with
  // the buffers one byte off alignment, out of place and in place.
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(100003);
  for (const Format& fmt : kFormats) {
    for (size_t n : lengths) {
      std::vector<uint8_t> a(n + 1), b(n + 1), d(n + 2, 0xA5);
      for (size_t i = 0; i < n; ++i)
        a[i + 1] = static_cast<uint8_t>(i * 37 + 11), b[i + 1] = static_cast<uint8_t>(i * 101 + 3);
      std::vector<uint8_t> want(n);
      for (size_t i = 0; i < n; ++i)
        want[i] =
            fp8Encode(*fmt.spec, fp8Decode(*fmt.spec, a[i + 1]) + fp8Decode(*fmt.spec, b[i + 1]));
      reduce(d.data() + 1, a.data() + 1, b.data() + 1, n, fmt.dtype, collieSum);
      EXPECT_TRUE(d[0] == 0xA5 && d[n + 1] == 0xA5) << "a write outside the output, n=" << n;
      reduce(a.data() + 1, a.data() + 1, b.data() + 1, n, fmt.dtype, collieSum);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(matches(*fmt.spec, collieSum, want[i], d[i + 1])) << "n=" << n << " i=" << i;
        ASSERT_TRUE(matches(*fmt.spec, collieSum, want[i], a[i + 1])) << "in place, n=" << n;
      }
    }
  }
}

TEST(Fp8Reduce, ConversionsRoundTripEveryPattern) {
  for (int i = 0; i < 256; ++i) {
    const auto b = static_cast<uint8_t>(i);
    const double d4 = fp8Decode(testing::kE4m3Spec, b), d5 = fp8Decode(testing::kE5m2Spec, b);
    if (std::isnan(d4)) {
      EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(b)));
    } else {
      EXPECT_EQ(fp8e4m3ToFloat(b), d4) << hex(i);
      EXPECT_EQ(floatToFp8e4m3(fp8e4m3ToFloat(b)), b) << hex(i);
    }
    if (std::isnan(d5)) {
      EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(b)));
    } else {
      EXPECT_EQ(fp8e5m2ToFloat(b), d5) << hex(i);
      // Infinities saturate; every finite pattern comes back as itself.
      if (!std::isinf(d5)) {
        EXPECT_EQ(floatToFp8e5m2(fp8e5m2ToFloat(b)), b) << hex(i);
      }
    }
  }
}

}  // namespace
}  // namespace collie
