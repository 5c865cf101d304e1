// collie-sim's command line: the scale it accepts is one it can hold in memory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#ifndef COLLIE_BIN_DIR
#define COLLIE_BIN_DIR "."
#endif

namespace collie {
namespace {

// Runs collie-sim with args (stderr to stdout); its exit code and output.
int runSim(const std::string& args, std::string* out) {
  const std::string cmd =
      std::string("timeout 120 ") + COLLIE_BIN_DIR + "/collie-sim " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out->append(buf, n);
  const int st = pclose(pipe);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A ring's schedule has 2(n-1) steps for each of n ranks: 16384 ranks took the machine's 24 GB
// before they were refused.
TEST(CollieSim, RanksBeyondWhatFitsInMemoryAreRefused) {
  std::string out;
  EXPECT_EQ(runSim("--ranks 4097 -b 8 -e 8", &out), 2) << out;
  EXPECT_NE(out.find("bad value '4097' for --ranks (1 to 4096)"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(runSim("--ranks 1024 --hosts 128 -b 8 -e 8", &out), 0) << out;
}

}  // namespace
}  // namespace collie
