// A /dev/shm too small for the shared-memory segments (a container's is 64 MiB unless asked for
// more; 8 ranks need 96 MiB by default): the ranks of the host agree to reach each other over
// tcp, or, with COLLIE_TRANSPORT=shm, every one of them fails at init saying why. Before, the
// segments were sized without taking their pages, and the first rank to touch a page the
// tmpfs could not give died of SIGBUS. Each test mounts a small tmpfs on /dev/shm in a mount
// namespace of its own (as root; skipped elsewhere). And ranks of one host that see different
// /dev/shm (containers that do not share theirs) fall back to tcp together.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/time.h"
#include "tests/harness/process_world.h"
#include "transports/shm/shm_transport.h"

namespace collie {
namespace testing {
namespace {

// Mounts a tmpfs of mib MiB (0: the default size) on /dev/shm in a new mount namespace, seen by
// this process and those it forks from now on; returns why not, or "" when done.
std::string ownDevShm(int mib) {
  if (unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + strerror(errno);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("making / private: ") + strerror(errno);
  const std::string opts = mib > 0 ? "size=" + std::to_string(mib) + "m" : "";
  if (mount("tmpfs", "/dev/shm", "tmpfs", 0, opts.c_str()) != 0)
    return std::string("mounting a tmpfs on /dev/shm: ") + strerror(errno);
  return "";
}

class SmallDevShm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs on /dev/shm";
  }
  // A tmpfs of mib MiB on /dev/shm, seen by this process and the ranks it forks.
  void mountSmall(int mib) {
    const std::string why = ownDevShm(mib);
    if (!why.empty()) GTEST_SKIP() << why;
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) umount2("/dev/shm", MNT_DETACH);
  }
  // Segments of this project left in /dev/shm.
  static std::vector<std::string> leftovers() {
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = e.path().filename().string();
      if (name.rfind(kShmPrefix, 0) == 0) left.push_back(name);
    }
    return left;
  }
  bool mounted_ = false;

  static constexpr const char* kNoRoom = "/dev/shm has no room";
};

// The ranks are on one host by its id, but each sees a /dev/shm of its own (containers that do
// not share theirs): none can map its peers' segments, and all fall back to tcp together.
TEST_F(SmallDevShm, RanksThatSeeAnotherDevShmFallBackToTcpTogether) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    const std::string why = ownDevShm(0);
    if (!why.empty()) return rep.fail(why);
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    std::vector<int32_t> buf(4099, rank + 1);
    if (collieAllReduce(buf.data(), buf.data(), buf.size(), collieInt32, collieSum, c, nullptr) !=
        collieSuccess)
      return rep.fail(std::string("allreduce: ") + collieGetLastError(c));
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != 1 + 2 + 3)
        return rep.fail("element " + std::to_string(i) + ": " + std::to_string(buf[i]));
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out) {
    EXPECT_NE(r.output.find("no such segment in this rank's /dev/shm"), std::string::npos)
        << "rank " << r.rank << ": " << r.output;
    EXPECT_NE(r.output.find("use tcp instead"), std::string::npos) << r.output;
  }
}

TEST_F(SmallDevShm, TheLocalRanksFallBackToTcpTogether) {
  // Each of 4 ranks needs about 8 MiB (4 rings of 1 MiB, 4 MiB of staging): 20 MiB holds two
  // segments, so two ranks make theirs and two cannot, and all four must give up on shm alike.
  mountSmall(20);
  if (IsSkipped()) return;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(4, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    const size_t count = (size_t{1} << 20) + 3;  // larger than a ring
    std::vector<int32_t> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(i % 1000) * (rank + 1);
    if (collieAllReduce(buf.data(), buf.data(), count, collieInt32, collieSum, c, nullptr) !=
        collieSuccess)
      return rep.fail(std::string("allreduce: ") + collieGetLastError(c));
    for (size_t i = 0; i < count; ++i) {
      const int32_t want = static_cast<int32_t>(i % 1000) * (1 + 2 + 3 + 4);
      if (buf[i] != want)
        return rep.fail("element " + std::to_string(i) + ": " + std::to_string(buf[i]) + ", want " +
                        std::to_string(want));
    }
    const char* algo = nullptr;
    collieCommLastAlgorithm(c, &algo);
    if (algo != nullptr && std::string(algo) == "shm_direct")
      rep.fail("shm_direct ran without shared memory");
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out) {
    EXPECT_NE(r.output.find(kNoRoom), std::string::npos) << "rank " << r.rank << ": " << r.output;
    EXPECT_NE(r.output.find("use tcp instead"), std::string::npos) << r.output;
  }
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
}

TEST_F(SmallDevShm, ForcedShmFailsOnEveryRankSayingWhy) {
  // Each of 3 ranks needs about 7 MiB: 8 MiB holds one segment.
  mountSmall(8);
  if (IsSkipped()) return;
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TRANSPORT", "shm"}};
  auto out = runWorld(3, opt, [](int, Reporter& rep) {
    Deadline d = Deadline::afterMs(20000);
    collieComm_t c = nullptr;
    collieResult_t r = collieCommInitFromEnv(&c);
    const std::string msg = collieGetLastError(nullptr);
    if (r != collieSystemError) rep.fail("want a system error, got " + std::to_string(r));
    if (msg.find(kNoRoom) == std::string::npos ||
        msg.find("COLLIE_TRANSPORT=shm") == std::string::npos ||
        msg.find("shm: rank ") == std::string::npos)
      rep.fail("message: " + msg);
    if (d.expired()) rep.fail("took too long");
  });
  expectAllPassed(out);
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
}

// Ranks that disagree on the segments' layout are a misuse, not something to fall back from:
// every local rank fails at init, at once, naming the setting.
TEST(ShmSettings, RanksThatDisagreeOnTheRingSizeFailTogether) {
  for (int odd : {0, 2}) {  // the rank with a larger ring: first or last of the host
    WorldOptions opt;
    opt.timeoutSec = 60;
    opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}};
    auto out = runWorld(3, opt, [odd](int rank, Reporter& rep) {
      setenv("COLLIE_SHM_RING_BYTES", rank == odd ? "2M" : "1M", 1);
      Deadline d = Deadline::afterMs(20000);
      collieComm_t c = nullptr;
      collieResult_t r = collieCommInitFromEnv(&c);
      const std::string msg = collieGetLastError(nullptr);
      if (r != collieInvalidUsage) rep.fail("want invalid usage, got " + std::to_string(r));
      if (msg.find("COLLIE_SHM_* settings must agree") == std::string::npos) rep.fail(msg);
      if (d.expired()) rep.fail("took too long");
    });
    SCOPED_TRACE("rank " + std::to_string(odd) + " has the larger ring");
    expectAllPassed(out);
  }
}

}  // namespace
}  // namespace testing
}  // namespace collie
