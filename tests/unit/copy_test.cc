// copyStreaming: the same bytes as memcpy for every length and alignment, and nothing else
// touched, in every variant of the CPU kernels this CPU runs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "src/reduce/cpu/cpu_dispatch.h"
#include "src/reduce/reduce.h"

namespace collie {
namespace {

void checkCopy(CopyFn copy) {
  std::vector<unsigned char> src(5000), dst(5200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (size_t so : {0, 1, 31}) {
    for (size_t d : {0, 1, 17, 32, 33, 63, 64, 65}) {
      for (size_t n : {0, 1, 31, 63, 127, 128, 129, 255, 256, 257, 1000, 4096 + 5}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        copy(dst.data() + d, src.data() + so, n);
        ASSERT_EQ(memcmp(dst.data() + d, src.data() + so, n), 0) << so << " " << d << " " << n;
        for (size_t i = 0; i < d; ++i) ASSERT_EQ(dst[i], 0xEE);
        for (size_t i = d + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
      }
    }
  }
}

TEST(CopyStreaming, MatchesMemcpyAtEveryOffsetAndLength) { checkCopy(&copyStreaming); }

TEST(CopyStreaming, EveryVariantMatchesMemcpy) {
  const unsigned usable = builtCpuIsas() & supportedCpuIsas();
  for (int i = 0; i < kNumCpuIsas; ++i) {
    if (!(usable & (1u << i))) continue;
    SCOPED_TRACE(cpuIsaName(static_cast<CpuIsa>(i)));
    checkCopy(cpuKernels(static_cast<CpuIsa>(i)).copyStreaming);
  }
}

}  // namespace
}  // namespace collie
