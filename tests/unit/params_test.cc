// The environment parameters: sizes with suffixes, and values that cannot mean what they say
// (unparsable, overflowing, below a parameter's least) fall back to the default.
#include "src/base/params.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace collie {
namespace {

// Sets name to value for the scope.
class EnvValue {
 public:
  EnvValue(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvValue() { unsetenv(name_); }

 private:
  const char* name_;
};

int64_t intWith(const char* name, const char* value) {
  EnvValue v(name, value);
  return params().getInt(name);
}

TEST(Params, SizesTakeBinarySuffixes) {
  EXPECT_EQ(intWith("COLLIE_SHM_RING_BYTES", "64K"), 64 << 10);
  EXPECT_EQ(intWith("COLLIE_SHM_RING_BYTES", "2M"), 2 << 20);
  EXPECT_EQ(intWith("COLLIE_SHM_STAGING_BYTES", "1G"), int64_t{1} << 30);
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "2500"), 2500);
}

TEST(Params, ValuesThatDoNotParseOrOverflowTakeTheDefault) {
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "soon"), 300000);
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "10s"), 300000);
  // Past int64 once multiplied: before, it wrapped to a negative deadline, which is none.
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "8000000000000G"), 300000);
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "99999999999999999999"), 300000);
}

TEST(Params, ValuesBelowTheLeastTakeTheDefault) {
  // A deadline of 0 or less would be none (or expire at once).
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "-1"), 300000);
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "0"), 300000);
  EXPECT_EQ(intWith("COLLIE_TIMEOUT_MS", "1"), 1);
  // An empty ring takes no message: every call over it waited out its deadline.
  EXPECT_EQ(intWith("COLLIE_SHM_RING_BYTES", "0"), 1 << 20);
  EXPECT_EQ(intWith("COLLIE_SHM_RING_BYTES", "-1"), 1 << 20);
  EXPECT_EQ(intWith("COLLIE_SHM_CHUNK_BYTES", "3"), 512 << 10);
  // Parameters without a least take what they are given.
  EXPECT_EQ(intWith("COLLIE_SOCKET_BUFFER", "0"), 0);
}

}  // namespace
}  // namespace collie
