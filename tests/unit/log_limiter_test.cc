// The rate limit of WARN lines that strangers can provoke.
#include <gtest/gtest.h>

#include "src/base/log.h"

namespace collie {
namespace {

constexpr uint64_t kSec = 1000000000ull;

TEST(LogLimiter, PrintsABurstPerWindowThenSaysHowManyItHeldBack) {
  LogLimiter lim;
  uint64_t held = 99;
  int printed = 0;
  for (int i = 0; i < 1000; ++i)
    if (lim.allowAt(kSec + i * 1000, &held)) ++printed;
  EXPECT_EQ(printed, LogLimiter::kBurst);
  EXPECT_EQ(held, 0u);  // the burst's own lines held nothing back
  // The next window: its first line tells of the 995 held back.
  ASSERT_TRUE(lim.allowAt(kSec + LogLimiter::kWindowNs + 5000, &held));
  EXPECT_EQ(held, 1000u - LogLimiter::kBurst);
  ASSERT_TRUE(lim.allowAt(kSec + LogLimiter::kWindowNs + 6000, &held));
  EXPECT_EQ(held, 0u);
}

TEST(LogLimiter, NotesOnlyWhatWasHeldBack) {
  EXPECT_EQ(logHeldNote(0), "");
  EXPECT_EQ(logHeldNote(7), " (7 more like it held back)");
}

}  // namespace
}  // namespace collie
