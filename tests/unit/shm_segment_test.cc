// The shared-memory segments at setup: the header, the rings' control blocks and the staging
// are in /dev/shm and in every mapping's page tables, so no call pays for faulting them in; a
// ring's data takes its pages when it is first used, whole, in /dev/shm and in both the writer's
// and the reader's page tables. A rank holds the rings its algorithms use, not one per peer.
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transports/shm/shm_transport.h"

namespace collie {
namespace {

struct Mapping {
  long sizeKb = 0, rssKb = 0;
};

// This process's mappings whose path holds name, from /proc/self/smaps.
std::vector<Mapping> mappingsOf(const std::string& name) {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<Mapping> out;
  bool in = false;
  std::string line;
  while (std::getline(smaps, line)) {
    std::istringstream f(line);
    std::string key;
    f >> key;
    if (!key.empty() && key.back() != ':') {  // "start-end perms offset dev inode path"
      in = line.find(name) != std::string::npos;
      if (in) out.emplace_back();
    } else if (in && key == "Size:") {
      f >> out.back().sizeKb;
    } else if (in && key == "Rss:") {
      f >> out.back().rssKb;
    }
  }
  return out;
}

// Bytes of /dev/shm that the segment name holds.
long usedKb(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm" + name).c_str(), &st) == 0 ? static_cast<long>(st.st_blocks) / 2 : -1;
}

TEST(ShmSegment, EveryPageIsHeldUntilReleasedThenARingTakesItsOnFirstUse) {
  if (!shmPopulatesOnDemand())
    GTEST_SKIP() << "this kernel cannot populate on demand (before 5.14): every page stays";
  const uint64_t comm = 0x5e9000u + static_cast<uint64_t>(getpid());
  ShmOptions opt;
  opt.ringBytes = 256 << 10;
  opt.stagingBytes = 512 << 10;
  const long ringKb = 256, headKb = 8;  // a ring's head stays, for an abort frame
  std::vector<std::unique_ptr<ShmTransport>> t;
  std::vector<std::string> names;
  for (int r = 0; r < 2; ++r) {
    auto made = ShmTransport::create(comm, r, {0, 1}, opt);
    ASSERT_TRUE(made.isOk()) << made.status().message();
    t.push_back(made.take());
    names.push_back(t.back()->segmentName());
  }
  for (auto& x : t) ASSERT_TRUE(x->mapPeers(names).isOk());
  // ringsUsed[s]: the rings of segment s in use (of its two, its peer writes into one);
  // released: whether its owner gave back the pages of the rings not in use.
  auto expectPages = [&](const std::vector<long>& ringsUsed, bool released) {
    for (size_t s = 0; s < names.size(); ++s) {
      SCOPED_TRACE(names[s]);
      std::vector<Mapping> maps = mappingsOf(names[s].substr(1));  // without the leading '/'
      ASSERT_EQ(maps.size(), 2u) << "its owner's mapping and its peer's";
      const long unused = (2 - ringsUsed[s]) * (ringKb - headKb);
      EXPECT_GT(maps[0].sizeKb, 2 * ringKb + 512);  // both rings and the staging
      EXPECT_EQ(usedKb(names[s]), maps[0].sizeKb - (released ? unused : 0));
      for (const Mapping& m : maps) EXPECT_EQ(m.rssKb, m.sizeKb - unused);
    }
  };
  // Until every local rank holds its whole segment, each keeps every page in /dev/shm: the
  // room the host's layout needs is all taken at once, or setup fails there.
  expectPages({0, 0}, false);
  if (HasFatalFailure()) return;
  for (auto& x : t) x->releaseRingPages();
  expectPages({0, 0}, true);
  if (HasFatalFailure()) return;
  // Rank 0 sends rank 1 a message: the ring in rank 1's segment that rank 0 writes.
  std::vector<std::unique_ptr<Connection>> c0(2), c1(2);
  t[0]->makeConnections(&c0);
  t[1]->makeConnections(&c1);
  const uint64_t sent = 0x1234567890abcdefull;
  uint64_t got = 0;
  FrameTag tag;
  tag.seq = 1;
  tag.count = 1;
  Request sq, rq;
  ASSERT_TRUE(c0[1]->isend(&sent, sizeof(sent), tag, &sq).isOk());
  ASSERT_TRUE(c1[0]->irecv(&got, sizeof(got), tag, &rq).isOk());
  for (int i = 0; i < 1000000 && !(sq.done && rq.done); ++i) {
    bool moved = false;
    ASSERT_TRUE(c0[1]->progress(&moved).isOk());
    ASSERT_TRUE(c1[0]->progress(&moved).isOk());
  }
  ASSERT_TRUE(sq.done && rq.done);
  EXPECT_EQ(got, sent);
  expectPages({0, 1}, true);
}

#if defined(__SANITIZE_ADDRESS__)
#define COLLIE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLLIE_UNDER_ASAN 1
#endif
#endif

// Not in a sanitized build: the sanitizer's shadow memory needs an address space without a limit.
#ifndef COLLIE_UNDER_ASAN
// Entries of /dev/shm that belong to communicator comm.
std::vector<std::string> segmentsOf(uint64_t comm) {
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "%s%016" PRIx64 "-", kShmPrefix, comm);
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

// Address space of this process, in bytes, from /proc/self/status.
size_t addressSpace() {
  std::ifstream status("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (status >> key)
    if (key == "VmSize:" && status >> kb) return kb << 10;
  return 0;
}

// A segment made whose mapping then fails is removed again: nobody else knows its name, so
// nobody else would remove it, and it would hold its pages of /dev/shm until the host reboots.
TEST(ShmSegment, ASegmentThatCannotBeMappedIsNotLeftBehind) {
  const uint64_t comm = 0x5ea000u + static_cast<uint64_t>(getpid());
  const size_t vm = addressSpace();
  ASSERT_GT(vm, 0u);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Room for the process as it is, not for a 64 MiB mapping: the pages are taken in /dev/shm
    // (no address space needed), and the mmap after fails.
    rlimit lim{vm + (16u << 20), vm + (16u << 20)};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(2);
    ShmOptions opt;
    opt.ringBytes = 32 << 20;
    opt.stagingBytes = 4 << 20;
    auto t = ShmTransport::create(comm, 0, {0, 1}, opt);
    // The mapping must be what failed: a /dev/shm without room fails before it, and another
    // failure would not test this path.
    _exit(t.isOk() ? 3 : t.status().message().rfind("mmap ", 0) == 0 ? 0 : 4);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
  if (WEXITSTATUS(st) == 4)
    GTEST_SKIP() << "the segment failed before its mapping (/dev/shm full?)";
  ASSERT_EQ(WEXITSTATUS(st), 0) << "2: setrlimit failed; 3: the mapping did not fail";
  const std::vector<std::string> left = segmentsOf(comm);
  for (const std::string& n : left) shm_unlink(("/" + n).c_str());
  EXPECT_TRUE(left.empty()) << left.size() << " segment(s) left, the first " << left[0];
}
#endif

}  // namespace
}  // namespace collie
