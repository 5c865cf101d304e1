// Deadline on the coarse clock: it expires no sooner than its wait less a clock step (a few ms),
// and the limits (never, a negative or an absurd wait) behave.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "src/base/time.h"

namespace collie {
namespace {

TEST(Deadline, ZeroIsExpiredAtOnce) {
  const Deadline d = Deadline::afterMs(0);
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.remainingMs(), 0);
}

TEST(Deadline, NeverAndANegativeWaitNeverExpire) {
  for (const Deadline& d : {Deadline::never(), Deadline::afterMs(-1), Deadline()}) {
    EXPECT_FALSE(d.expired());
    EXPECT_EQ(d.remainingMs(), 1 << 30);
    EXPECT_EQ(d.remainingMs(250), 250);
  }
}

TEST(Deadline, AnAbsurdWaitDoesNotWrapIntoThePast) {
  const Deadline d = Deadline::afterMs(INT64_MAX - 1);
  EXPECT_FALSE(d.expired());
  EXPECT_EQ(d.remainingMs(), 1 << 30);
}

TEST(Deadline, ExpiresAfterItsWaitGiveOrTakeAClockStep) {
  const auto t0 = std::chrono::steady_clock::now();
  const Deadline d = Deadline::afterMs(100);
  EXPECT_LE(d.remainingMs(), 100);
  while (!d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_GE(waited.count(), 100 - 20) << "the coarse clock steps by a few ms, not 20";
  EXPECT_EQ(d.remainingMs(), 0);
}

}  // namespace
}  // namespace collie
