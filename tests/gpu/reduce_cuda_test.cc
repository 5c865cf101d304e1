// The CUDA reduction kernels against the CPU kernels, every dtype x op, aligned and not, both
// output forms, and the avg scale; min and max with NaN inputs. Skips without a GPU.
#include "src/reduce/cuda/reduce_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "src/base/dtype.h"
#include "src/reduce/reduce.h"
#include "tests/gpu/gpu_test_util.h"

namespace collie {
namespace {

// Random bytes that make valid, NaN-free values of dtype (small magnitudes for floats so that
// prod stays finite).
std::vector<char> randomInput(collieDataType_t t, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t esz = dtypeSize(t);
  std::vector<char> out(count * esz);
  std::uniform_real_distribution<float> f(-2.0f, 2.0f);
  for (size_t i = 0; i < count; ++i) {
    char* p = out.data() + i * esz;
    float v = f(rng);
    switch (t) {
      case collieFloat32:
        memcpy(p, &v, 4);
        break;
      case collieFloat64: {
        double d = v;
        memcpy(p, &d, 8);
        break;
      }
      case collieFloat16: {
        uint16_t h = floatToHalf(v);
        memcpy(p, &h, 2);
        break;
      }
      case collieBfloat16: {
        uint16_t h = floatToBf16(v);
        memcpy(p, &h, 2);
        break;
      }
      default: {
        uint64_t r = (static_cast<uint64_t>(rng()) << 32) | rng();
        memcpy(p, &r, esz);
      }
    }
  }
  return out;
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n + 64), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  char* get() { return static_cast<char*>(p); }
  void* p = nullptr;
};

// Byte equality, except that where the reference is a NaN any NaN matches.
void expectSame(collieDataType_t t, const std::vector<char>& want, const std::vector<char>& got,
                const char* what) {
  ASSERT_EQ(want.size(), got.size());
  if (memcmp(want.data(), got.data(), want.size()) == 0) return;
  const size_t esz = dtypeSize(t);
  for (size_t i = 0; i < want.size() / esz; ++i) {
    if (memcmp(want.data() + i * esz, got.data() + i * esz, esz) == 0) continue;
    // fp8 NaNs may differ in sign or payload bits between the two conversions.
    const auto w = static_cast<uint8_t>(want[i]), g = static_cast<uint8_t>(got[i]);
    if (t == collieFloat8e4m3 && std::isnan(fp8e4m3ToFloat(w)) && std::isnan(fp8e4m3ToFloat(g)))
      continue;
    if (t == collieFloat8e5m2 && std::isnan(fp8e5m2ToFloat(w)) && std::isnan(fp8e5m2ToFloat(g)))
      continue;
    ADD_FAILURE() << what << ": " << dtypeName(t) << " element " << i << " differs";
    return;
  }
}

void checkOne(collieDataType_t t, collieRedOp_t op, size_t count, size_t offsetElems, bool peer) {
  const size_t esz = dtypeSize(t), bytes = count * esz, off = offsetElems * esz;
  auto a = randomInput(t, count, 1 + t * 7 + op);
  auto b = randomInput(t, count, 100 + t * 7 + op);
  std::vector<char> want(bytes);
  reduce(want.data(), a.data(), b.data(), count, t, op);
  DeviceBuffer da(bytes), db(bytes), dd(bytes), dp(bytes);
  ASSERT_EQ(cudaMemcpy(da.get() + off, a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.get() + off, b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  Status s = reduceDevice(dd.get() + off, peer ? dp.get() + off : nullptr, da.get() + off,
                          db.get() + off, count, t, op, nullptr);
  ASSERT_TRUE(s.isOk()) << s.toString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<char> got(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), dd.get() + off, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  expectSame(t, want, got, "dst");
  if (peer) {
    ASSERT_EQ(cudaMemcpy(got.data(), dp.get() + off, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    expectSame(t, want, got, "peer");
  }
}

TEST(ReduceCuda, EveryDtypeAndOpMatchesTheCpuKernels) {
  COLLIE_REQUIRE_GPU();
  for (int t = 0; t < collieNumTypes; ++t)
    for (int op = 0; op < collieNumOps; ++op) {
      SCOPED_TRACE(std::string(dtypeName(collieDataType_t(t))) + " " +
                   redOpName(collieRedOp_t(op)));
      checkOne(collieDataType_t(t), collieRedOp_t(op), 100003, 0, false);  // packs and a tail
      checkOne(collieDataType_t(t), collieRedOp_t(op), 777, 1, false);     // unaligned
      checkOne(collieDataType_t(t), collieRedOp_t(op), 4096, 0, true);     // reduce + copy
    }
}

TEST(ReduceCuda, InPlaceIsSafe) {
  COLLIE_REQUIRE_GPU();
  const size_t count = 1 << 16;
  auto a = randomInput(collieFloat32, count, 5), b = randomInput(collieFloat32, count, 6);
  std::vector<char> want(a.size()), got(a.size());
  reduce(want.data(), a.data(), b.data(), count, collieFloat32, collieSum);
  DeviceBuffer da(a.size()), db(a.size());
  cudaMemcpy(da.get(), a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.get(), b.data(), b.size(), cudaMemcpyHostToDevice);
  ASSERT_TRUE(
      reduceDevice(da.get(), nullptr, da.get(), db.get(), count, collieFloat32, collieSum, nullptr)
          .isOk());
  cudaMemcpy(got.data(), da.get(), got.size(), cudaMemcpyDeviceToHost);
  expectSame(collieFloat32, want, got, "in place");
}

TEST(ReduceCuda, ScaleMatchesScaleForAvg) {
  COLLIE_REQUIRE_GPU();
  for (int t = 0; t < collieNumTypes; ++t) {
    auto dtype = collieDataType_t(t);
    const size_t count = 3001;
    auto a = randomInput(dtype, count, 9 + t);
    std::vector<char> want = a, got(a.size());
    scaleForAvg(want.data(), count, dtype, 3);
    DeviceBuffer d(a.size());
    cudaMemcpy(d.get(), a.data(), a.size(), cudaMemcpyHostToDevice);
    ASSERT_TRUE(scaleDevice(d.get(), count, dtype, 3, nullptr).isOk());
    cudaMemcpy(got.data(), d.get(), got.size(), cudaMemcpyDeviceToHost);
    expectSame(dtype, want, got, "scale");
  }
}

// One element of a float dtype as a double (exact for every one of them).
double floatAt(collieDataType_t t, const char* p) {
  uint16_t h = 0;
  switch (t) {
    case collieFloat32: {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
    case collieFloat64: {
      double d;
      memcpy(&d, p, 8);
      return d;
    }
    case collieFloat16:
      memcpy(&h, p, 2);
      return halfToFloat(h);
    case collieBfloat16:
      memcpy(&h, p, 2);
      return bf16ToFloat(h);
    case collieFloat8e4m3:
      return fp8e4m3ToFloat(static_cast<uint8_t>(*p));
    default:
      return fp8e5m2ToFloat(static_cast<uint8_t>(*p));
  }
}

// Element i of a float dtype: a NaN, an infinity of either sign, or a small finite value, so that
// every pairing of NaN with NaN, infinity and a number shows up in a and b.
void putFloat(collieDataType_t t, char* p, double v) {
  const float f = static_cast<float>(v);
  uint16_t h = 0;
  switch (t) {
    case collieFloat32:
      memcpy(p, &f, 4);
      break;
    case collieFloat64:
      memcpy(p, &v, 8);
      break;
    case collieFloat16:
      h = floatToHalf(f);
      memcpy(p, &h, 2);
      break;
    case collieBfloat16:
      h = floatToBf16(f);
      memcpy(p, &h, 2);
      break;
    case collieFloat8e4m3:
      *p = static_cast<char>(floatToFp8e4m3(f));
      break;
    default:
      *p = static_cast<char>(floatToFp8e5m2(f));
  }
}

double specialValue(size_t i, int which) {
  const double kinds[] = {std::nan(""), 1.5, -2.0, INFINITY, -INFINITY, -std::nan("")};
  return kinds[(i / (which == 0 ? 1 : 6)) % 6];
}

// Min and max on the device propagate NaN from either input (NCCL's rule), and otherwise pick
// the smaller or larger value, infinities included; checked element by element from the
// decoded inputs, not against the CPU kernels.
TEST(ReduceCuda, MinMaxPropagateNaN) {
  COLLIE_REQUIRE_GPU();
  const collieDataType_t floats[] = {collieFloat32,  collieFloat64,    collieFloat16,
                                     collieBfloat16, collieFloat8e4m3, collieFloat8e5m2};
  const size_t count = 36 * 41;  // every pairing, many times, past a vector width
  for (collieDataType_t t : floats)
    for (collieRedOp_t op : {collieMin, collieMax}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + redOpName(op));
      const size_t esz = dtypeSize(t), bytes = count * esz;
      std::vector<char> a(bytes), b(bytes), got(bytes);
      for (size_t i = 0; i < count; ++i) {
        putFloat(t, a.data() + i * esz, specialValue(i, 0));
        putFloat(t, b.data() + i * esz, specialValue(i, 1));
      }
      DeviceBuffer da(bytes), db(bytes), dd(bytes);
      ASSERT_EQ(cudaMemcpy(da.get(), a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(db.get(), b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE(
          reduceDevice(dd.get(), nullptr, da.get(), db.get(), count, t, op, nullptr).isOk());
      ASSERT_EQ(cudaMemcpy(got.data(), dd.get(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      int nans = 0;
      for (size_t i = 0; i < count; ++i) {
        const double x = floatAt(t, a.data() + i * esz), y = floatAt(t, b.data() + i * esz);
        const double g = floatAt(t, got.data() + i * esz);
        if (std::isnan(x) || std::isnan(y)) {
          ++nans;
          ASSERT_TRUE(std::isnan(g)) << "element " << i << ": " << x << ", " << y << " gave " << g;
        } else {
          ASSERT_EQ(g, op == collieMin ? std::min(x, y) : std::max(x, y)) << "element " << i;
        }
      }
      EXPECT_GT(nans, 0);
    }
}

TEST(ReduceCuda, BadArgumentsAreInvalidArgument) {
  // No device needed: the checks come before any launch.
  EXPECT_EQ(
      reduceDevice(nullptr, nullptr, nullptr, nullptr, 4, collieFloat32, collieSum, nullptr).code(),
      collieInvalidArgument);
  EXPECT_EQ(scaleDevice(nullptr, 4, collieFloat32, 0, nullptr).code(), collieInvalidArgument);
  EXPECT_TRUE(reduceDevice(nullptr, nullptr, nullptr, nullptr, 0, collieFloat32, collieSum, nullptr)
                  .isOk());
}

}  // namespace
}  // namespace collie
