// Collie's UCX defaults: which apply under which environment, and that they reach UCX's
// transports while a variable the user set still wins.
#ifdef COLLIE_HAVE_UCX
#include "transports/ucx/ucx_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "transports/ucx/ucx_transport.h"

namespace collie {
namespace {

const char* emptyEnv(const char*) { return nullptr; }
const char* userSetRxSeg(const char* name) {
  return strcmp(name, "UCX_TCP_RX_SEG_SIZE") == 0 ? "64k" : nullptr;
}

bool hasField(const std::vector<UcxDefault>& ds, const char* field) {
  for (const UcxDefault& d : ds)
    if (strcmp(d.field, field) == 0) return true;
  return false;
}

TEST(UcxConfig, ADefaultAppliesOnlyToItsTransportAndWhereTheUserSetNothing) {
  const std::vector<UcxDefault> tcp = ucxDefaults({"posix", "tcp"}, &emptyEnv);
  ASSERT_TRUE(hasField(tcp, "RX_SEG_SIZE"));
  for (const UcxDefault& d : tcp) {
    EXPECT_STREQ(d.transport, "tcp");
    EXPECT_EQ(std::string(d.env).rfind("UCX_TCP_", 0), 0u) << d.env;
  }
  // UCX warns of a setting that no transport of the context takes.
  EXPECT_TRUE(ucxDefaults({"posix", "cma"}, &emptyEnv).empty());
  EXPECT_FALSE(hasField(ucxDefaults({"tcp"}, &userSetRxSeg), "RX_SEG_SIZE"));
}

// UCX's tcp refuses a send segment larger than its receive segment (64 KiB of its own): a
// 256 KiB one works only where Collie's receive segment reached the transport.
TEST(UcxConfig, TheTcpReceiveSegmentReachesUcxAndTheUsersOwnWins) {
  setenv("UCX_TLS", "tcp", 1);
  setenv("UCX_TCP_TX_SEG_SIZE", "256k", 1);
  auto ours = UcxTransport::create(0, 2, 0x5eed, false);
  EXPECT_TRUE(ours.isOk()) << ours.status().message();
  setenv("UCX_TCP_RX_SEG_SIZE", "64k", 1);
  auto theirs = UcxTransport::create(0, 2, 0x5eed, false);
  EXPECT_FALSE(theirs.isOk()) << "the user's 64k receive segment was overridden";
  unsetenv("UCX_TCP_RX_SEG_SIZE");
  unsetenv("UCX_TCP_TX_SEG_SIZE");
  unsetenv("UCX_TLS");
}

}  // namespace
}  // namespace collie
#endif
