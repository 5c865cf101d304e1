// Pointer classification on the CPU: host memory is host, the decision from a query result,
// and a process that never loaded the CUDA driver asks nothing.
#include "src/memory/memory_kind.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace collie {
namespace {

TEST(MemoryKind, HostMemoryIsHost) {
  std::vector<char> heap(64);
  char stack[16];
  EXPECT_EQ(classifyPointer(heap.data()).kind, MemoryKind::kHost);
  EXPECT_EQ(classifyPointer(stack).kind, MemoryKind::kHost);
  EXPECT_EQ(classifyPointer(nullptr).kind, MemoryKind::kHost);
}

TEST(MemoryKind, DecisionFollowsTheQuery) {
  int x = 0;
  auto device = [](const void*) { return PointerQuery{true, true, 3}; };
  auto pinned = [](const void*) { return PointerQuery{true, false, -1}; };
  auto failed = [](const void*) { return PointerQuery{false, true, 0}; };
  PointerInfo d = classifyPointerWith(&x, device);
  EXPECT_EQ(d.kind, MemoryKind::kCuda);
  EXPECT_EQ(d.device, 3);
  EXPECT_EQ(classifyPointerWith(&x, pinned).kind, MemoryKind::kHost);
  EXPECT_EQ(classifyPointerWith(&x, failed).kind, MemoryKind::kHost);
  EXPECT_EQ(classifyPointerWith(nullptr, device).kind, MemoryKind::kHost);
  EXPECT_EQ(classifyPointerWith(&x, nullptr).kind, MemoryKind::kHost);
}

TEST(MemoryKind, DeviceCountSaysWhyWhenZero) {
  std::string why;
  int n = cudaDeviceCount(&why);
  if (n == 0) {
    EXPECT_FALSE(why.empty());
  }
  EXPECT_STREQ(memoryKindName(MemoryKind::kCuda), "cuda");
}

}  // namespace
}  // namespace collie
