// End-to-end tests of collie-perf: runs the built tool under collie-run and reads its table the
// way a script reading nccl-tests output would, checking sizes, rows, correctness and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#ifndef COLLIE_BIN_DIR
#define COLLIE_BIN_DIR "."
#endif

namespace collie {
namespace {

const std::string kBin = COLLIE_BIN_DIR;
const std::string kRun = kBin + "/collie-run";
const std::string kPerf = kBin + "/collie-perf";

struct Outcome {
  int exitCode = -1;
  std::string out;
};

// Runs a shell command bounded by timeout(1), so a hung rank fails the test instead of ctest.
Outcome runCommand(const std::string& command) {
  Outcome outcome;
  std::string bounded = "timeout 120 " + command;
  FILE* pipe = popen(bounded.c_str(), "r");
  if (!pipe) return outcome;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) outcome.out.append(buf, n);
  int status = pclose(pipe);
  if (WIFEXITED(status)) outcome.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.exitCode = 128 + WTERMSIG(status);
  return outcome;
}

Outcome runPerf(int ranks, const std::string& flags) {
  return runCommand(kRun + " -n " + std::to_string(ranks) + " " + kPerf + " " + flags);
}

// One table row: size count type redop root, then time algbw busbw #wrong twice.
struct Row {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;
  int root = 0;
  double time[2] = {0, 0};
  std::string algBw[2];
  std::string busBw[2];
  std::string wrong[2];
};

std::vector<Row> parseRows(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Row r;
    fields >> r.bytes >> r.count >> r.type >> r.op >> r.root;
    for (int p = 0; p < 2; ++p) fields >> r.time[p] >> r.algBw[p] >> r.busBw[p] >> r.wrong[p];
    std::string extra;
    if (fields.fail() || (fields >> extra)) {
      ADD_FAILURE() << "not a table row: '" << line << "'";
      continue;
    }
    rows.push_back(r);
  }
  return rows;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ColliePerf, TwoRanksTableSizesAndCheck) {
  Outcome run = runPerf(2, "-b 8 -e 1M -f 4 -c 1 -n 3 -w 1");
  ASSERT_EQ(run.exitCode, 0) << run.out;

  EXPECT_TRUE(contains(run.out,
                       "# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 4(factor) "
                       "warmup iters: 1 iters: 3 agg iters: 1 validation: 1 graph: 0"))
      << run.out;
  EXPECT_TRUE(contains(run.out, "#  Rank  0 Group  0 Pid")) << run.out;
  EXPECT_TRUE(contains(run.out, "#  Rank  1 Group  0 Pid")) << run.out;
  EXPECT_TRUE(contains(run.out, "device host")) << run.out;
  EXPECT_TRUE(contains(run.out,
                       "#       size         count      type   redop    root     time   "
                       "algbw   busbw  #wrong     time   algbw   busbw  #wrong"))
      << run.out;
  EXPECT_TRUE(contains(run.out, "# Out of bounds values : 0 OK")) << run.out;
  EXPECT_TRUE(contains(run.out, "# Avg bus bandwidth    : ")) << run.out;

  std::vector<size_t> want;
  for (size_t size = 8; size <= (1u << 20); size *= 4) want.push_back(size);
  std::vector<Row> rows = parseRows(run.out);
  ASSERT_EQ(rows.size(), want.size()) << run.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    EXPECT_EQ(r.bytes, want[i]);
    EXPECT_EQ(r.count, want[i] / 4);
    EXPECT_EQ(r.type, "float");
    EXPECT_EQ(r.op, "sum");
    EXPECT_EQ(r.root, -1);
    for (int p = 0; p < 2; ++p) {
      EXPECT_EQ(r.wrong[p], "0") << "size " << r.bytes << (p ? " in-place" : " out-of-place");
      EXPECT_GT(r.time[p], 0.0);
      // With two ranks the bus bandwidth factor 2(n-1)/n is exactly 1.
      EXPECT_EQ(r.algBw[p], r.busBw[p]);
    }
  }
}

TEST(ColliePerf, EveryDatatypeAndOpIsExact) {
  Outcome run = runPerf(2, "-d all -o all -b 1K -e 4K -f 2 -n 5 -w 1");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  const char* types[] = {"int8",   "uint8", "int32", "uint32", "int64",
                         "uint64", "half",  "float", "double", "bfloat16"};
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  std::set<std::tuple<std::string, std::string, size_t>> seen;
  for (const Row& r : parseRows(run.out)) {
    seen.insert({r.type, r.op, r.bytes});
    EXPECT_EQ(r.wrong[0], "0") << r.type << " " << r.op << " " << r.bytes << " out-of-place";
    EXPECT_EQ(r.wrong[1], "0") << r.type << " " << r.op << " " << r.bytes << " in-place";
  }
  for (const char* t : types) {
    for (const char* o : ops) {
      for (size_t bytes : {1024u, 2048u, 4096u}) {
        EXPECT_TRUE(seen.count({t, o, bytes})) << "missing row " << t << " " << o << " " << bytes;
      }
    }
  }
  EXPECT_EQ(seen.size(), 10u * 5u * 3u);
  EXPECT_TRUE(contains(run.out, "# Out of bounds values : 0 OK")) << run.out;
}

TEST(ColliePerf, CsvHasOneRowPerSizeAndPlacement) {
  std::string path = testing::TempDir() + "collie_perf_" + std::to_string(getpid()) + ".csv";
  Outcome run = runPerf(2, "-b 8 -e 64 -f 2 -n 2 -d int32 -o max --csv " + path);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  std::ifstream csv(path);
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line, "size,count,type,redop,placement,time_us,algbw,busbw,wrong");
  std::vector<std::string> rows;
  while (std::getline(csv, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 8u);  // sizes 8, 16, 32, 64, each out-of-place and in-place
  EXPECT_EQ(rows[0].rfind("8,2,int32,max,out-of-place,", 0), 0u) << rows[0];
  EXPECT_EQ(rows[1].rfind("8,2,int32,max,in-place,", 0), 0u) << rows[1];
  for (const std::string& row : rows) EXPECT_EQ(row.substr(row.rfind(',') + 1), "0") << row;
  unlink(path.c_str());
}

TEST(ColliePerf, CheckOffPrintsNotApplicable) {
  Outcome run = runPerf(2, "-b 64 -e 64 -c 0 -n 2");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  std::vector<Row> rows = parseRows(run.out);
  ASSERT_EQ(rows.size(), 1u) << run.out;
  EXPECT_EQ(rows[0].wrong[0], "N/A");
  EXPECT_EQ(rows[0].wrong[1], "N/A");
}

TEST(ColliePerf, BadFlagsExitTwo) {
  Outcome unknown = runCommand(kPerf + " --no-such-flag 2>&1");
  EXPECT_EQ(unknown.exitCode, 2) << unknown.out;
  EXPECT_TRUE(contains(unknown.out, "USAGE")) << unknown.out;

  for (const char* flags :
       {"-d float128", "-o mean", "-b 1Q", "-n 0", "-b 2M -e 1M", "-z 7", "-w",
        "--backend bogus", "--backend nccl"}) {
    Outcome bad = runCommand(kPerf + " " + flags + " 2>&1");
    EXPECT_EQ(bad.exitCode, 2) << flags << ": " << bad.out;
  }

  Outcome other = runCommand(kPerf + " broadcast -b 8 2>&1");
  EXPECT_EQ(other.exitCode, 2) << other.out;
  EXPECT_TRUE(contains(other.out, "collective broadcast is not available in this build"))
      << other.out;

  Outcome launched = runPerf(2, "--no-such-flag 2>&1");
  EXPECT_NE(launched.exitCode, 0) << launched.out;
}

// --device where no GPU is visible (or the build has no CUDA): a clear failure, not a crash.
TEST(ColliePerf, DeviceWithoutAGpuSaysWhy) {
  Outcome o = runPerf(1, "--device -b 1M -e 1M -n 2 2>&1");
  if (o.exitCode == 0) GTEST_SKIP() << "a GPU is present: tests/gpu/device_check.sh covers --device";
  EXPECT_EQ(o.exitCode, 1) << o.out;
  EXPECT_TRUE(contains(o.out, "--device")) << o.out;
}

}  // namespace
}  // namespace collie
