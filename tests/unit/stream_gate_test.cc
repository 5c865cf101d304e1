// StreamGate: the stream-ordering bookkeeping of device ops, on the CPU. The waiter (the
// caller's thread) sees the op's status once opened, and gives up after its timeout.
#include "src/core/device/stream_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace collie {
namespace {

TEST(StreamGate, WaiterGetsTheStatusItWasOpenedWith) {
  StreamGate gate(5000);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open(remoteError("peer died"));
  });
  Status s = gate.wait();
  opener.join();
  EXPECT_EQ(s.code(), collieRemoteError);
  EXPECT_TRUE(gate.isOpen());
  gate.open(Status::ok());  // a second open changes nothing
  EXPECT_EQ(gate.wait().code(), collieRemoteError);
}

TEST(StreamGate, OpenBeforeWaitDoesNotBlock) {
  StreamGate gate(5000);
  gate.open(Status::ok());
  EXPECT_TRUE(gate.wait().isOk());
}

TEST(StreamGate, WaitGivesUpAtItsTimeout) {
  StreamGate gate(30);
  auto t0 = std::chrono::steady_clock::now();
  Status s = gate.wait();
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(s.code(), collieTimeout);
  EXPECT_GE(ms, 25);
  EXPECT_LT(ms, 2000);
  EXPECT_FALSE(gate.isOpen());
}

}  // namespace
}  // namespace collie
