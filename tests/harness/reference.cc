// Generator and reference for collective tests.
#include "tests/harness/reference.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "src/base/dtype.h"
#include "src/reduce/reduce.h"
#include "tests/harness/fp8_ref.h"

namespace collie {
namespace testing {

static bool isUnsigned(collieDataType_t t) {
  return t == collieUint8 || t == collieUint32 || t == collieUint64;
}

double inputValue(collieDataType_t t, collieRedOp_t op, int r, size_t i, int n) {
  const size_t ur = static_cast<size_t>(r);
  switch (op) {
    case collieProd:
      // One rank contributes a 2 per element, the others +-1: |product| <= 2 for any n.
      if (i % static_cast<size_t>(n) == ur) return 2;
      return (!isUnsigned(t) && (ur + i) % 3 == 0) ? -1 : 1;
    case collieMin:
    case collieMax: {
      // fp8 holds every integer up to 8 exactly (e5m2 no further).
      if (isFp8Dtype(t)) return static_cast<double>((ur * 37 + i * 11) % 17) - 8;
      double v = static_cast<double>((ur * 37 + i * 11) % 201);
      return isUnsigned(t) ? v : v - 100;
    }
    default: {  // sum, avg
      // In fp8, -1, 0 and 1 keep every partial sum of up to 8 ranks exact.
      if (isFp8Dtype(t)) return static_cast<double>((ur * 7 + i * 13) % 3) - 1;
      double v = static_cast<double>((ur * 7 + i * 13) % 9);
      if (!isUnsigned(t)) v -= 4;
      // Quarters are exact in half, float and double at these magnitudes; bfloat16 has too few
      // mantissa bits for 64.75, so it gets integers.
      if (t == collieFloat16 || t == collieFloat32 || t == collieFloat64)
        v += 0.25 * static_cast<double>((ur + i) % 4);
      return v;
    }
  }
}

double expectedValue(collieDataType_t t, collieRedOp_t op, size_t i, int n) {
  double acc = inputValue(t, op, 0, i, n);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(t, op, r, i, n);
    if (op == collieProd)
      acc *= v;
    else if (op == collieMin)
      acc = std::fmin(acc, v);
    else if (op == collieMax)
      acc = std::fmax(acc, v);
    else
      acc += v;
  }
  if (op == collieAvg) acc = isFloatDtype(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Element access by memcpy: the tests use deliberately unaligned buffers.
template <typename T>
static T loadRaw(const void* buf, size_t i) {
  T v;
  memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
static void storeRaw(void* buf, size_t i, T v) {
  memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

double loadAsDouble(const void* buf, collieDataType_t t, size_t i) {
  switch (t) {
    case collieInt8:
      return loadRaw<int8_t>(buf, i);
    case collieUint8:
      return loadRaw<uint8_t>(buf, i);
    case collieInt32:
      return loadRaw<int32_t>(buf, i);
    case collieUint32:
      return loadRaw<uint32_t>(buf, i);
    case collieInt64:
      return static_cast<double>(loadRaw<int64_t>(buf, i));
    case collieUint64:
      return static_cast<double>(loadRaw<uint64_t>(buf, i));
    case collieFloat16:
      return halfToFloat(loadRaw<uint16_t>(buf, i));
    case collieFloat32:
      return loadRaw<float>(buf, i);
    case collieFloat64:
      return loadRaw<double>(buf, i);
    case collieBfloat16:
      return bf16ToFloat(loadRaw<uint16_t>(buf, i));
    case collieFloat8e4m3:
      return fp8Decode(kE4m3Spec, loadRaw<uint8_t>(buf, i));
    case collieFloat8e5m2:
      return fp8Decode(kE5m2Spec, loadRaw<uint8_t>(buf, i));
    default:
      return NAN;
  }
}

void storeFromDouble(void* buf, collieDataType_t t, size_t i, double v) {
  switch (t) {
    case collieInt8:
      storeRaw(buf, i, static_cast<int8_t>(v));
      break;
    case collieUint8:
      storeRaw(buf, i, static_cast<uint8_t>(v));
      break;
    case collieInt32:
      storeRaw(buf, i, static_cast<int32_t>(v));
      break;
    case collieUint32:
      storeRaw(buf, i, static_cast<uint32_t>(v));
      break;
    case collieInt64:
      storeRaw(buf, i, static_cast<int64_t>(v));
      break;
    case collieUint64:
      storeRaw(buf, i, static_cast<uint64_t>(v));
      break;
    case collieFloat16:
      storeRaw(buf, i, floatToHalf(static_cast<float>(v)));
      break;
    case collieFloat32:
      storeRaw(buf, i, static_cast<float>(v));
      break;
    case collieFloat64:
      storeRaw(buf, i, v);
      break;
    case collieBfloat16:
      storeRaw(buf, i, floatToBf16(static_cast<float>(v)));
      break;
    case collieFloat8e4m3:
      storeRaw(buf, i, fp8Encode(kE4m3Spec, v));
      break;
    case collieFloat8e5m2:
      storeRaw(buf, i, fp8Encode(kE5m2Spec, v));
      break;
    default:
      break;
  }
}

void fillInput(void* buf, collieDataType_t t, collieRedOp_t op, int rank, size_t count, int n) {
  fillInputAt(buf, t, op, rank, count, n, 0);
}

void fillInputAt(void* buf, collieDataType_t t, collieRedOp_t op, int rank, size_t count, int n,
                 size_t first) {
  for (size_t i = 0; i < count; ++i)
    storeFromDouble(buf, t, i, inputValue(t, op, rank, first + i, n));
}

static double tolerance(collieDataType_t t, collieRedOp_t op) {
  if (op != collieAvg) return 0;  // every other result is exact by construction
  switch (t) {
    case collieFloat16:
      return 1e-3;
    case collieBfloat16:
      return 8e-3;
    case collieFloat8e4m3:
      return 0x1p-4;  // half a unit in the last place
    case collieFloat8e5m2:
      return 0x1p-3;
    case collieFloat32:
      return 1e-6;
    case collieFloat64:
      return 1e-12;
    default:
      return 0;
  }
}

size_t countWrong(const void* buf, collieDataType_t t, collieRedOp_t op, size_t count, int n,
                  std::string* firstBad) {
  return countWrongAt(buf, t, op, count, n, 0, firstBad);
}

size_t countNotInputOf(const void* buf, collieDataType_t t, collieRedOp_t op, int rank,
                       size_t count, int n, size_t first, std::string* firstBad) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double got = loadAsDouble(buf, t, i), want = inputValue(t, op, rank, first + i, n);
    // The input is stored exactly (fillInputAt) and must come back bit for bit.
    if (got == want || (std::isnan(got) && std::isnan(want))) continue;
    if (wrong++ == 0 && firstBad)
      *firstBad = "element " + std::to_string(first + i) + " is " + std::to_string(got) +
                  ", expected rank " + std::to_string(rank) + "'s " + std::to_string(want);
  }
  return wrong;
}

size_t countWrongAt(const void* buf, collieDataType_t t, collieRedOp_t op, size_t count, int n,
                    size_t first, std::string* firstBad) {
  size_t wrong = 0;
  const double tol = tolerance(t, op);
  for (size_t j = 0; j < count; ++j) {
    const size_t i = first + j;
    double got = loadAsDouble(buf, t, j), want = expectedValue(t, op, i, n);
    double err = std::fabs(got - want);
    if (err <= tol * std::fmax(1.0, std::fabs(want))) continue;
    if (wrong++ == 0 && firstBad)
      *firstBad = "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                  std::to_string(want);
  }
  return wrong;
}

}  // namespace testing
}  // namespace collie
