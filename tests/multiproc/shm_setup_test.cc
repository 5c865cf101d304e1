// The shared-memory transport where the host is not what it assumes. A /dev/shm too small for
// the segments (a container's is 64 MiB unless asked for more; 8 ranks need 96 MiB at the
// default sizes): the ranks of the host shrink the default sizes together until they fit, or
// reach each other over tcp, or, with COLLIE_TRANSPORT=shm, each fails at init saying why
// (before, the segments were sized without taking their pages, and the first rank to touch a
// page the tmpfs could not give died of SIGBUS). Ranks of one host that see different /dev/shm,
// or run in different PID namespaces (containers without --ipc=host or --pid=host), and ranks
// that disagree on the segments' layout. Each test mounts or unshares what it needs in
// namespaces of its own (as root; skipped elsewhere).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
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

// Runs fn in a process of a new PID namespace, as its pid 2 + extra (the namespace's first
// process makes extra short-lived ones first); returns fn's result, what killed it (128 +
// signal), or -1 where no namespace could be made.
int inOwnPidNamespace(int extra, const std::function<int()>& fn) {
  if (unshare(CLONE_NEWPID) != 0) return -1;
  auto status = [](pid_t p) {
    int st = 0;
    if (waitpid(p, &st, 0) != p) return 127;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  };
  const pid_t first = fork();
  if (first < 0) return -1;
  if (first == 0) {
    for (int i = 0; i < extra; ++i) {
      const pid_t d = fork();
      if (d == 0) _exit(0);
      if (d > 0) status(d);
    }
    const pid_t worker = fork();
    if (worker == 0) _exit(fn());
    _exit(worker > 0 ? status(worker) : 127);
  }
  return status(first);
}

// Inits a communicator from the environment and runs int32 sum AllReduces of each count, in
// place, rank r contributing (i % 1000) * (r + 1) at element i, checked exactly; returns what
// went wrong, or "". pause runs before each call. withoutShm: no shm_ algorithm may have run.
std::string initAndSum(
    int rank, int nranks, bool withoutShm, std::initializer_list<size_t> counts,
    const std::function<void()>& pause = [] {}) {
  collieComm_t c = nullptr;
  if (collieCommInitFromEnv(&c) != collieSuccess)
    return std::string("init: ") + collieGetLastError(nullptr);
  const int32_t ranksSum = nranks * (nranks + 1) / 2;
  std::string bad;
  for (size_t count : counts) {
    pause();
    std::vector<int32_t> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(i % 1000) * (rank + 1);
    if (collieAllReduce(buf.data(), buf.data(), count, collieInt32, collieSum, c, nullptr) !=
        collieSuccess) {
      bad = "count " + std::to_string(count) + ": " + collieGetLastError(c);
      break;
    }
    for (size_t i = 0; i < count && bad.empty(); ++i)
      if (buf[i] != static_cast<int32_t>(i % 1000) * ranksSum)
        bad = "count " + std::to_string(count) + ", element " + std::to_string(i) + ": " +
              std::to_string(buf[i]);
    if (!bad.empty()) break;
  }
  const char* algo = nullptr;
  collieCommLastAlgorithm(c, &algo);
  if (bad.empty() && withoutShm && algo != nullptr && std::string(algo).rfind("shm_", 0) == 0)
    bad = std::string(algo) + " ran without shared memory";
  collieCommDestroy(c);
  return bad;
}

class ShmSetup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for mount and PID namespaces";
    // Tried in a child first: a container may refuse them even to root.
    const pid_t p = fork();
    if (p == 0) {
      if (!ownDevShm(1).empty()) _exit(1);
      _exit(inOwnPidNamespace(1, [] { return 0; }) == 0 ? 0 : 2);
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      GTEST_SKIP() << "this machine refuses mount or PID namespaces here"
                   << (WIFEXITED(st) && WEXITSTATUS(st) == 2 ? " (PID)" : "");
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
TEST_F(ShmSetup, RanksThatSeeAnotherDevShmFallBackToTcpTogether) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    const std::string why = ownDevShm(0);
    if (!why.empty()) return rep.fail(why);
    const std::string bad = initAndSum(rank, 3, true, {4099});
    if (!bad.empty()) rep.fail(bad);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out) {
    EXPECT_NE(r.output.find("no such segment in this rank's /dev/shm"), std::string::npos)
        << "rank " << r.rank << ": " << r.output;
    EXPECT_NE(r.output.find("use tcp instead"), std::string::npos) << r.output;
  }
}

TEST_F(ShmSetup, TooLittleRoomForTheDefaultSizesShrinksTheSegments) {
  // Each of 4 ranks needs about 8 MiB at the default sizes (4 rings of 1 MiB, 4 MiB of
  // staging): 20 MiB holds two such segments, so two ranks make theirs and two cannot. At half
  // the sizes (4 MiB each) all four fit: they try again together, and keep shm.
  mountSmall(20);
  if (IsSkipped()) return;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(4, opt, [](int rank, Reporter& rep) {
    const std::string bad =
        initAndSum(rank, 4, false, {1, 4099, (size_t{1} << 20) + 3});  // and one over a ring
    if (!bad.empty()) rep.fail(bad);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out) {
    EXPECT_NE(r.output.find("rings of 512 KiB and staging of 2048 KiB instead"), std::string::npos)
        << "rank " << r.rank << ": " << r.output;
    EXPECT_EQ(r.output.find("use tcp instead"), std::string::npos) << r.output;
  }
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
}

// The room a host needs is its whole layout, every ring of every pair, though a rank holds only
// the rings its calls use: a /dev/shm that holds the segments only without their unused rings
// shrinks them at init, and calls that then use more rings still find room.
TEST_F(ShmSetup, TheRoomTakenAtInitIsTheWholeLayoutsNotWhatTheRanksHoldAfterIt) {
  // 4 ranks at the default sizes: 32 MiB with every ring, 16 without. In 26 MiB they shrink
  // to half (16 MiB with every ring). Before, a rank gave its rings back as soon as it had made
  // its segment, and a rank that made its own after that found the room: where no two ranks
  // held their whole segments at once, none shrank (4 runs of 6), and the calls below, which
  // take 10 or more rings of 1 MiB, ran out of room.
  mountSmall(26);
  if (IsSkipped()) return;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {
      {"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TRANSPORT", "shm"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(4, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    // Between them every rank writes to 3 peers: 10 of the 12 rings.
    for (const char* algo : {"ring", "recursive_doubling", "tree", "rhd"}) {
      collieCommSetAlgorithm(c, algo);
      std::vector<int32_t> v((1 << 20) + 3, rank + 1);
      if (collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr) !=
          collieSuccess)
        return rep.fail(std::string(algo) + ": " + collieGetLastError(c));
      if (v.front() != 10 || v.back() != 10) return rep.fail(std::string(algo) + ": wrong sum");
    }
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out)
    EXPECT_NE(r.output.find("rings of 512 KiB and staging of 2048 KiB instead"), std::string::npos)
        << "rank " << r.rank << ": " << r.output;
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
}

// Sizes the user chose are not shrunk: without room for them the host's ranks take tcp.
// Also where only one rank chose them: whether to shrink is the host's decision, not each
// rank's (before, that rank took tcp and the others waited for it to shrink until the deadline,
// then failed with "store: 3 keys never appeared").
TEST_F(ShmSetup, TooLittleRoomForChosenSizesFallsBackToTcpTogether) {
  mountSmall(20);
  if (IsSkipped()) return;
  for (bool onlyRankZeroChose : {false, true}) {
    SCOPED_TRACE(onlyRankZeroChose ? "rank 0 chose the ring size" : "every rank chose it");
    WorldOptions opt;
    opt.timeoutSec = 120;
    opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
    auto out = runWorld(4, opt, [onlyRankZeroChose](int rank, Reporter& rep) {
      // The default value, chosen explicitly.
      if (rank == 0 || !onlyRankZeroChose) setenv("COLLIE_SHM_RING_BYTES", "1M", 1);
      const std::string bad = initAndSum(rank, 4, true, {(size_t{1} << 20) + 3});
      if (!bad.empty()) rep.fail(bad);
    });
    expectAllPassed(out);
    for (const RankOutcome& r : out) {
      EXPECT_NE(r.output.find(kNoRoom), std::string::npos) << "rank " << r.rank << ": " << r.output;
      EXPECT_NE(r.output.find("use tcp instead"), std::string::npos) << r.output;
    }
    EXPECT_TRUE(leftovers().empty()) << leftovers().front();
  }
}

TEST_F(ShmSetup, TooLittleRoomWithShmForcedFailsOnEveryRank) {
  // Each of 3 ranks needs about 7 MiB, and 0.9 MiB at the smallest sizes (an eighth): 1 MiB
  // holds one of them at most.
  mountSmall(1);
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

// What this process's /dev/shm holds, in bytes.
double devShmUsed() {
  struct statvfs fs;
  if (statvfs("/dev/shm", &fs) != 0) return -1;
  return static_cast<double>(fs.f_blocks - fs.f_bfree) * static_cast<double>(fs.f_frsize);
}

// A ring's pages are taken in /dev/shm when its writer first uses it; until then a rank holds
// only its header, the rings' control blocks and its staging. Where /dev/shm has filled up
// since init, the first use of a ring is an error on every rank, not a SIGBUS.
TEST_F(ShmSetup, RingsTakeTheirPagesOnFirstUseAndANowFullDevShmIsAnError) {
  if (!shmPopulatesOnDemand())
    GTEST_SKIP() << "this kernel cannot populate on demand (before 5.14): every page stays";
  // 3 ranks, each segment 3 rings and the staging of 1 MiB: 12 MiB at init, held only there.
  mountSmall(16);
  if (IsSkipped()) return;
  constexpr double kMiB = 1 << 20;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"},
             {"COLLIE_TRANSPORT", "shm"},
             {"COLLIE_TIMEOUT_MS", "30000"},
             {"COLLIE_SHM_RING_BYTES", "1M"},
             {"COLLIE_SHM_STAGING_BYTES", "1M"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    // Each phase starts with every rank past the last (barriers use the staging, not rings).
    auto phase = [&](const char* what) {
      if (collieBarrier(c) != collieSuccess)
        rep.fail(std::string("barrier before ") + what + ": " + collieGetLastError(c));
    };
    auto sum = [&](const char* algo) {
      collieCommSetAlgorithm(c, algo);
      std::vector<int32_t> v((1 << 20) + 3, rank + 1);
      const collieResult_t r =
          collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr);
      if (r == collieSuccess && (v.front() != 6 || v.back() != 6)) rep.fail("wrong sum");
      return r;
    };
    phase("the first look");
    // The staging and the small parts of 3 segments: no rings, but their heads.
    const double atInit = devShmUsed();
    if (atInit > 3 * 1.1 * kMiB)
      rep.fail("/dev/shm holds " + std::to_string(atInit / kMiB) + " MiB after init");
    phase("the ring");
    if (sum("ring") != collieSuccess) rep.fail(std::string("ring: ") + collieGetLastError(c));
    phase("the second look");
    // The ring sends to the next rank only: one inbound ring in each segment.
    const double afterRing = devShmUsed() - atInit;
    if (afterRing < 3 * 0.95 * kMiB || afterRing > 3 * 1.05 * kMiB)
      rep.fail("the ring took " + std::to_string(afterRing / kMiB) + " MiB of rings");
    phase("the filler");
    if (rank == 0) {
      // Another program fills /dev/shm.
      const int fd = open("/dev/shm/filler", O_CREAT | O_RDWR, 0600);
      struct statvfs fs;
      if (fd < 0 || statvfs("/dev/shm", &fs) != 0) return rep.fail("making the filler");
      off_t left = static_cast<off_t>(fs.f_bavail * fs.f_frsize);
      while (left > 0 && posix_fallocate(fd, 0, left) != 0) left -= 4096;
      close(fd);
    }
    phase("recursive doubling");
    // Recursive doubling on 3 ranks: the fold 0 -> 1, the exchange 1 <-> 2 and the unfold
    // 1 -> 0, so rank 2 writes to rank 1 and rank 1 to rank 0 for the first time.
    Deadline d = Deadline::afterMs(25000);
    if (sum("recursive_doubling") == collieSuccess)
      rep.fail("recursive doubling succeeded with /dev/shm full");
    else
      rep.note(collieGetLastError(c));
    if (d.expired()) rep.fail("the error took too long");
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  // Rank 2 cannot write to rank 1, nor rank 1 to rank 0 (the unfold); each that cannot still
  // sends its abort, so every rank has the reason.
  for (const RankOutcome& r : out) {
    ASSERT_EQ(r.notes.size(), 1u) << "rank " << r.rank << ": " << r.output;
    EXPECT_NE(r.notes[0].find("No space left on device for its shared-memory ring"),
              std::string::npos)
        << "rank " << r.rank << ": " << r.notes[0];
  }
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

// Ranks in PID namespaces of their own (containers without --pid=host) cannot tell from a
// peer's pid whether it lives: the number names another process there, or none. They keep shm.
// Before, a rank that found its ring empty for 2 ms took the peer for dead and failed the op.
TEST_F(ShmSetup, RanksInOtherPidNamespacesKeepShmWithoutFalseDeaths) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    const int rc = inOwnPidNamespace(rank, [&] {
      // The others wait on an empty ring meanwhile, long past a check for a dead peer.
      const std::string bad = initAndSum(rank, 3, false, {1, 4099, (size_t{1} << 20) + 3}, [rank] {
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      });
      if (!bad.empty()) rep.fail(bad);
      return bad.empty() ? 0 : 1;
    });
    if (rc < 0)
      rep.fail(std::string("unshare(CLONE_NEWPID): ") + strerror(errno));
    else if (rc != 0)
      rep.fail("the rank's process ended with " + std::to_string(rc));
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out)
    EXPECT_EQ(r.output.find("use tcp instead"), std::string::npos) << r.output;
}

// And they still notice a peer that dies: by the robust mutex its progress thread holds in its
// segment, which the kernel marks, not at the deadline.
TEST_F(ShmSetup, ADeadPeerInAnotherPidNamespaceIsNoticedAtOnce) {
  constexpr int kVictim = 2;
  constexpr int kDeadlineMs = 60000;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"},
             {"COLLIE_TRANSPORT", "shm"},
             {"COLLIE_TIMEOUT_MS", std::to_string(kDeadlineMs)}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    const int rc = inOwnPidNamespace(rank, [&] {
      collieComm_t c = nullptr;
      if (collieCommInitFromEnv(&c) != collieSuccess) {
        rep.fail(std::string("init: ") + collieGetLastError(nullptr));
        return 1;
      }
      std::vector<float> buf(1 << 20, 1.0f);
      if (rank == kVictim) {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
          kill(getpid(), SIGKILL);
        }).detach();
      }
      for (int iter = 0; iter < 100000; ++iter) {
        const uint64_t t0 = nowNs();
        if (collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieMax, c,
                            nullptr) == collieSuccess)
          continue;
        const double ms = (nowNs() - t0) / 1e6;
        const std::string msg = collieGetLastError(c);
        if (msg.find("peer rank " + std::to_string(kVictim)) == std::string::npos)
          rep.fail("the error does not name the dead peer: " + msg);
        if (ms > 10000) rep.fail("noticed after " + std::to_string(ms) + " ms: " + msg);
        collieCommAbort(c);
        return 0;
      }
      rep.fail("every op succeeded although a rank was killed");
      return 1;
    });
    if (rc < 0) rep.fail(std::string("unshare(CLONE_NEWPID): ") + strerror(errno));
    const int want = rank == kVictim ? 128 + SIGKILL : 0;
    if (rc >= 0 && rc != want)
      rep.fail("the rank's process ended with " + std::to_string(rc) + ", want " +
               std::to_string(want));
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
