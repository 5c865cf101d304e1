// The cuda_ipc address bytes, on the CPU: every field round trips, handles keep every byte
// value, and short, foreign or other-version bytes are rejected with a reason.
#include "transports/cuda_ipc/cuda_ipc_address.h"

#include <gtest/gtest.h>

namespace collie {
namespace {

CudaIpcAddress sample() {
  CudaIpcAddress a;
  a.pid = 123456;
  a.device = 3;
  a.busId = "0000:19:00.0";
  a.buffer = 0x7f0012345000ull;
  a.bytes = 64ull << 20;
  a.event = 0x55550000aaaaull;
  for (size_t i = 0; i < CudaIpcAddress::kHandleBytes; ++i) {
    a.memHandle += static_cast<char>(i * 7);
    a.eventHandle += static_cast<char>(255 - i);
  }
  return a;
}

TEST(CudaIpcAddress, RoundTrips) {
  CudaIpcAddress a = sample();
  auto b = CudaIpcAddress::decode(a.encode());
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_EQ(b.value().pid, a.pid);
  EXPECT_EQ(b.value().device, a.device);
  EXPECT_EQ(b.value().busId, a.busId);
  EXPECT_EQ(b.value().buffer, a.buffer);
  EXPECT_EQ(b.value().bytes, a.bytes);
  EXPECT_EQ(b.value().event, a.event);
  EXPECT_EQ(b.value().memHandle, a.memHandle);
  EXPECT_EQ(b.value().eventHandle, a.eventHandle);
}

TEST(CudaIpcAddress, BadBytesAreRejected) {
  std::string good = sample().encode();
  EXPECT_EQ(CudaIpcAddress::decode(good.substr(1)).status().code(), collieInvalidArgument);
  std::string foreign = good;
  foreign[0] = 'X';
  EXPECT_EQ(CudaIpcAddress::decode(foreign).status().code(), collieInvalidArgument);
  std::string version = good;
  version[4] = 9;
  auto v = CudaIpcAddress::decode(version);
  EXPECT_EQ(v.status().code(), collieInvalidArgument);
  EXPECT_NE(v.status().message().find("version"), std::string::npos);
  CudaIpcAddress empty = sample();
  empty.bytes = 0;
  EXPECT_EQ(CudaIpcAddress::decode(empty.encode()).status().code(), collieInvalidArgument);
}

}  // namespace
}  // namespace collie
