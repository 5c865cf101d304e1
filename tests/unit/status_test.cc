// Status: what a failure carries besides its text, kept as context is added on the way up.
#include "src/base/status.h"

#include <gtest/gtest.h>

namespace collie {
namespace {

TEST(Status, AStalledWaitNamesItsPeerThroughContext) {
  const Status s = stalledWait("timed out waiting for peer rank 3", 3);
  EXPECT_EQ(s.code(), collieTimeout);
  EXPECT_EQ(s.stalledOn(), 3);
  const Status up = s.withContext("allreduce").withContext("rank 1");
  EXPECT_EQ(up.stalledOn(), 3);
  EXPECT_EQ(up.code(), collieTimeout);
  EXPECT_EQ(up.message(), "rank 1: allreduce: timed out waiting for peer rank 3");
}

TEST(Status, OtherFailuresNameNoStalledPeer) {
  EXPECT_EQ(Status::ok().stalledOn(), -1);
  EXPECT_EQ(timeoutError("store wait").stalledOn(), -1);
  EXPECT_EQ(remoteError("timed out waiting for peer rank 3").withContext("x").stalledOn(), -1);
}

TEST(Status, ARemoteErrorCanCarryTheStalledPeer) {
  const Status s = remoteError("peer rank 2 aborted").withStalledOn(4);
  EXPECT_EQ(s.code(), collieRemoteError);
  EXPECT_EQ(s.stalledOn(), 4);
  EXPECT_EQ(s.message(), "peer rank 2 aborted");
}

}  // namespace
}  // namespace collie
