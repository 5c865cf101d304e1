// The shared-memory segments are mapped whole: every page of a rank's own segment and of the
// peers' it maps is in its page tables once the transport is set up, so no call pays for
// faulting in ring pages on first touch.
#include <unistd.h>

#include <cstdint>
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

TEST(ShmSegment, EveryPageOfOwnAndPeerSegmentsIsMappedAtSetup) {
  const uint64_t comm = 0x5e9000u + static_cast<uint64_t>(getpid());
  ShmOptions opt;
  opt.ringBytes = 256 << 10;
  opt.stagingBytes = 512 << 10;
  auto a = ShmTransport::create(comm, 0, {0, 1}, opt);
  auto b = ShmTransport::create(comm, 1, {0, 1}, opt);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  ASSERT_TRUE(b.isOk()) << b.status().message();
  const std::vector<std::string> names = {a.value()->segmentName(), b.value()->segmentName()};
  ASSERT_TRUE(a.value()->mapPeers(names).isOk());
  ASSERT_TRUE(b.value()->mapPeers(names).isOk());
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    std::vector<Mapping> maps = mappingsOf(n.substr(1));  // without the leading '/'
    ASSERT_EQ(maps.size(), 2u) << "its owner's mapping and its peer's";
    for (const Mapping& m : maps) {
      EXPECT_GT(m.sizeKb, 2 * 256 + 512);  // both rings and the staging
      EXPECT_EQ(m.rssKb, m.sizeKb);
    }
  }
}

}  // namespace
}  // namespace collie
