// Tests of the performance suite: collie-limits' bounds follow from its own probes, the peer
// drivers check their sums, perf/compare writes every output it promises, and collie-micro
// runs. Parts whose peer library or tool is not installed skip and say why.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#ifndef COLLIE_BIN_DIR
#define COLLIE_BIN_DIR "."
#endif
#ifndef COLLIE_SOURCE_DIR
#define COLLIE_SOURCE_DIR "."
#endif

namespace collie {
namespace {

const std::string kBin = COLLIE_BIN_DIR;

struct Outcome {
  int exitCode = -1;
  std::string out;
};

// Bounded by timeout(1), so that a hung run fails the test instead of the whole ctest run.
Outcome runCommand(const std::string& command, int seconds = 120) {
  Outcome outcome;
  FILE* pipe = popen(("timeout " + std::to_string(seconds) + " " + command).c_str(), "r");
  if (!pipe) return outcome;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) outcome.out.append(buf, n);
  int status = pclose(pipe);
  if (WIFEXITED(status)) outcome.exitCode = WEXITSTATUS(status);
  return outcome;
}

bool exists(const std::string& path) { return access(path.c_str(), X_OK) == 0; }
bool haveCommand(const std::string& name) {
  return runCommand("sh -c 'command -v " + name + "' >/dev/null").exitCode == 0;
}

size_t countOf(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// "key=value" words of the first line that starts with prefix and has name=<name>.
std::map<std::string, std::string> fieldsOf(const std::string& out, const std::string& prefix,
                                            const std::string& name) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix + " ", 0) != 0) continue;
    std::map<std::string, std::string> f;
    std::istringstream words(line.substr(prefix.size()));
    std::string w;
    while (words >> w) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) f[w.substr(0, eq)] = w.substr(eq + 1);
    }
    if (f["name"] == name) return f;
  }
  return {};
}

TEST(PerfSuite, LimitsBoundsFollowFromTheProbes) {
  Outcome run = runCommand(kBin + "/collie-limits --quick");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  // The shm bound is the lower of 1/(1/R + 1/C), from the two-thread add and copy lines
  // printed above it, and the core-to-core rate X.
  double r = 0, c = 0;
  std::istringstream lines(run.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("threads=2") == std::string::npos) continue;
    double v = std::stod(line.substr(line.find("GBps=") + 5));
    if (line.find("name=add_f32_stream ") != std::string::npos) r = v;
    if (line.find("name=copy_stream ") != std::string::npos) c = v;
  }
  ASSERT_GT(r, 0) << run.out;
  ASSERT_GT(c, 0) << run.out;
  // The core-to-core probe runs wherever two CPUs are there to run it.
  auto cores = fieldsOf(run.out, "limit", "core_to_core_bidir_per_direction");
  double x = 1e300;
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
    ASSERT_FALSE(cores.empty()) << run.out;
    x = std::stod(cores["GBps"]);
    EXPECT_GT(x, 0.01) << run.out;
    auto latency = fieldsOf(run.out, "latency", "core_to_core_oneway");
    ASSERT_FALSE(latency.empty()) << run.out;
    EXPECT_GT(std::stod(latency["us"]), 0) << run.out;
    EXPECT_LT(std::stod(latency["us"]), 1000) << run.out;
  }
  auto shm = fieldsOf(run.out, "bound", "shm");
  ASSERT_FALSE(shm.empty()) << run.out;
  EXPECT_NEAR(std::stod(shm["GBps"]), std::min(x, 1.0 / (1.0 / r + 1.0 / c)), 0.002) << run.out;
  auto tcp = fieldsOf(run.out, "bound", "tcp");
  auto bidir = fieldsOf(run.out, "limit", "tcp_loopback_bidir_per_direction");
  ASSERT_FALSE(tcp.empty()) << run.out;
  EXPECT_EQ(tcp["GBps"], bidir["GBps"]) << run.out;
  EXPECT_GT(std::stod(tcp["GBps"]), 0.01) << run.out;
}

TEST(PerfSuite, MpiDriverChecksItsSums) {
  if (!exists(kBin + "/collie-peer-mpi") || !haveCommand("mpirun")) {
    GTEST_SKIP() << "OpenMPI is not installed (apt-get install openmpi-bin libopenmpi-dev)";
  }
  std::string root = geteuid() == 0 ? " --allow-run-as-root" : "";
  Outcome run = runCommand("mpirun -n 2" + root + " " + kBin +
                           "/collie-peer-mpi -b 8 -e 32K -f 8 -n 3 -R 2 --label t 2>&1");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_EQ(countOf(run.out, "result system=t ranks=2 "), 5u) << run.out;  // 8 .. 32K by 8
  EXPECT_EQ(countOf(run.out, " wrong=0"), 5u) << run.out;
  EXPECT_EQ(countOf(run.out, "version Open MPI"), 1u) << run.out;
  // Every collective perf/compare measures, each checked against its own expected layout.
  for (const char* coll : {"reducescatter", "allgather", "broadcast", "reduce", "alltoall",
                           "sendrecv", "gather", "scatter"}) {
    Outcome one = runCommand("mpirun -n 2" + root + " " + kBin + "/collie-peer-mpi --coll " + coll +
                             " -b 64 -e 4K -f 64 -n 2 -R 1 --label t 2>&1");
    ASSERT_EQ(one.exitCode, 0) << coll << ": " << one.out;
    EXPECT_EQ(countOf(one.out, std::string("ranks=2 coll=") + coll + " "), 2u) << one.out;
    EXPECT_EQ(countOf(one.out, " wrong=0"), 2u) << coll << ": " << one.out;
  }
  Outcome bad = runCommand(kBin + "/collie-peer-mpi --coll allgatherv 2>&1");
  EXPECT_NE(bad.exitCode, 0) << bad.out;
}

TEST(PerfSuite, GlooDriverChecksItsSums) {
  if (!exists(kBin + "/collie-peer-gloo")) {
    GTEST_SKIP() << "Gloo is not installed (apt-get install libgloo-dev), so no driver was built";
  }
  for (const char* algo : {"ring", "ring_chunked", "halving_doubling"}) {
    char dir[] = "/tmp/collie-gloo-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    Outcome run = runCommand(kBin + "/collie-run -n 2 " + kBin + "/collie-peer-gloo --algo " +
                             algo + " --store " + dir + " -b 8 -e 4K -f 8 -n 2 -R 2 2>&1");
    runCommand(std::string("rm -rf ") + dir);
    ASSERT_EQ(run.exitCode, 0) << algo << ": " << run.out;
    EXPECT_EQ(countOf(run.out, " wrong=0"), 4u) << algo << ": " << run.out;
  }
  // The other collectives: reduce-scatter's halving-doubling, Gloo's one algorithm for the rest.
  for (const char* coll : {"reducescatter", "allgather", "broadcast", "reduce", "alltoall",
                           "sendrecv", "gather", "scatter"}) {
    char dir[] = "/tmp/collie-gloo-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    Outcome run = runCommand(kBin + "/collie-run -n 2 " + kBin + "/collie-peer-gloo --coll " +
                             coll + " --store " + dir + " -b 64 -e 4K -f 64 -n 2 -R 1 2>&1");
    runCommand(std::string("rm -rf ") + dir);
    ASSERT_EQ(run.exitCode, 0) << coll << ": " << run.out;
    EXPECT_EQ(countOf(run.out, std::string("coll=") + coll + " "), 2u) << run.out;
    EXPECT_EQ(countOf(run.out, " wrong=0"), 2u) << coll << ": " << run.out;
  }
  Outcome bad = runCommand(kBin + "/collie-run -n 1 " + kBin +
                           "/collie-peer-gloo --coll gather --algo ring --store /tmp 2>&1");
  EXPECT_EQ(bad.exitCode, 2) << bad.out;
  EXPECT_TRUE(bad.out.find("no --algo ring for gather") != std::string::npos) << bad.out;
}

TEST(PerfSuite, CompareWritesTablesCsvJsonAndPlot) {
  if (!haveCommand("python3")) GTEST_SKIP() << "python3 is not installed";
  char dir[] = "/tmp/collie-compare-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string out = dir;
  Outcome run =
      runCommand(std::string("python3 ") + COLLIE_SOURCE_DIR + "/perf/compare --bin " + kBin +
                     " --max 64 --quick --settle 1 --systems collie-shm,collie-tcp,mpi-vader," +
                     "gloo-ring --out " + out + " 2>&1",
                 300);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  for (const char* size : {"### 8 B", "### 16 B", "### 64 B"}) {
    EXPECT_TRUE(run.out.find(size) != std::string::npos) << size << "\n" << run.out;
  }
  EXPECT_TRUE(run.out.find("## Physical limits") != std::string::npos) << run.out;
  EXPECT_TRUE(run.out.find("## Targets") != std::string::npos) << run.out;
  // Every row's busbw is recomputed here from its bytes and time (2 ranks: factor 1).
  std::string check =
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"results\"]; "
      "ok=[x for x in r if \"error\" not in x]; "
      "print(len(r), len(ok), all(abs(x[\"busbw\"]-x[\"bytes\"]/(x[\"time_us\"]*1e3))<1e-9 and "
      "x[\"wrong\"]==0 for x in ok), sorted(set(x[\"system\"] for x in ok)), "
      "bool(d[\"machine\"][\"cpu\"]), \"shm\" in d[\"limits\"][\"bounds\"], "
      "all(x[\"core_us_before\"] > 0 and x[\"core_us_after\"] > 0 for x in ok))' " +
      out + "/results.json";
  Outcome parsed = runCommand(check);
  ASSERT_EQ(parsed.exitCode, 0) << parsed.out;
  int systems = 2 + exists(kBin + "/collie-peer-mpi") + exists(kBin + "/collie-peer-gloo");
  std::string want = std::to_string(3 * systems) + " " + std::to_string(3 * systems) + " True ";
  EXPECT_EQ(parsed.out.rfind(want, 0), 0u) << parsed.out << "\n" << run.out;
  // The cores' placement is looked at around every command, where there are 2 CPUs to do it.
  EXPECT_TRUE(
      parsed.out.find(sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? "True True True\n" : "True True") !=
      std::string::npos)
      << parsed.out;
  EXPECT_TRUE(run.out.find("| cores µs |") != std::string::npos) << run.out;
  std::ifstream csv(out + "/results.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("system,family,cls,ranks,bytes,", 0), 0u) << header;
  if (haveCommand("gnuplot")) {
    std::ifstream png(out + "/busbw.png", std::ios::binary);
    char magic[4] = {};
    png.read(magic, 4);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  }
  runCommand("rm -rf " + out);
}

// --collective with a comma list: one section per collective, each with its sizes (a split
// collective's block must not be empty: 8 B is 2 floats, 1 per rank), bounds, busbw factor
// and plot, and the table of Collie against the best peer.
TEST(PerfSuite, CompareMeasuresTheCollectivesItIsGiven) {
  if (!haveCommand("python3")) GTEST_SKIP() << "python3 is not installed";
  char dir[] = "/tmp/collie-compare-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string out = dir;
  Outcome run = runCommand(std::string("python3 ") + COLLIE_SOURCE_DIR + "/perf/compare --bin " +
                               kBin + " --collective reducescatter,sendrecv --sizes 64 " +
                               "--quick --settle 0 --systems collie-shm,mpi-vader,gloo- --out " +
                               out + " 2>&1",
                           300);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  for (const char* text :
       {"float32 collectives", "## float32 sum ReduceScatter", "## float32 SendRecv",
        "### ReduceScatter 64 B (2 ranks)", "### SendRecv 64 B (2 ranks)",
        "2-rank ReduceScatter bounds: shm ", "2-rank SendRecv bounds: shm ",
        "## Collie ÷ best peer (2 ranks)", "| ReduceScatter | 64 B | collie-shm |",
        "| SendRecv | 64 B | collie-shm |"}) {
    EXPECT_TRUE(run.out.find(text) != std::string::npos) << text << "\n" << run.out;
  }
  EXPECT_TRUE(run.out.find("## Targets") == std::string::npos) << run.out;  // AllReduce's only
  // busbw = bytes * factor / time: 1/2 for reduce-scatter at 2 ranks, 1 for sendrecv.
  std::string check =
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"results\"]; "
      "ok=[x for x in r if \"error\" not in x]; "
      "f={\"reducescatter\": 0.5, \"sendrecv\": 1.0}; "
      "print(len(r), len(ok), d[\"collectives\"], all(abs(x[\"busbw\"]-x[\"bytes\"]*"
      "f[x[\"collective\"]]/(x[\"time_us\"]*1e3))<1e-9 and x[\"wrong\"]==0 for x in ok))' " +
      out + "/results.json";
  Outcome parsed = runCommand(check);
  ASSERT_EQ(parsed.exitCode, 0) << parsed.out;
  int systems = 1 + exists(kBin + "/collie-peer-mpi") + exists(kBin + "/collie-peer-gloo");
  EXPECT_EQ(parsed.out, std::to_string(2 * systems) + " " + std::to_string(2 * systems) +
                            " ['reducescatter', 'sendrecv'] True\n")
      << parsed.out << "\n"
      << run.out;
  if (haveCommand("gnuplot")) {
    EXPECT_EQ(access((out + "/busbw-sendrecv.png").c_str(), R_OK), 0);
  }
  runCommand("rm -rf " + out);
  Outcome bad = runCommand(std::string("python3 ") + COLLIE_SOURCE_DIR + "/perf/compare --bin " +
                           kBin + " --collective allgatherv 2>&1");
  EXPECT_EQ(bad.exitCode, 2) << bad.out;
  EXPECT_TRUE(bad.out.find("--collective allgatherv: not one of allreduce,") != std::string::npos)
      << bad.out;
}

// perf/compare's placement logic against a scripted probe: latencies 0.05 (the lowest), then
// 0.2 twice (cores apart), then 0.05. settle() waits through the far ones; a row is far when
// either of its looks was over 3x the lowest; with no time to wait it takes what it gets.
TEST(PerfSuite, CompareWaitsForTheCoresToBeNearAndMarksFarRows) {
  if (!haveCommand("python3")) GTEST_SKIP() << "python3 is not installed";
  char dir[] = "/tmp/collie-placement-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  {
    std::ofstream probe(d + "/collie-limits");
    probe << "#!/bin/sh\n"
             "n=$(cat "
          << d << "/n 2>/dev/null || echo 0); echo $((n + 1)) > " << d
          << "/n\n"
             "case $n in 1|2) us=0.2 ;; *) us=0.05 ;; esac\n"
             "echo \"latency name=core_to_core_oneway us=$us\"\n";
  }
  ASSERT_EQ(runCommand("chmod +x " + d + "/collie-limits").exitCode, 0);
  std::string py = std::string("python3 -c 'import sys; sys.path.insert(0, \"") +
                   COLLIE_SOURCE_DIR +
                   "/perf\"); from compare_lib import placement as P; "
                   "p = P.Placement(\"" +
                   d +
                   "\", 5); p.probe(); "
                   "print(p.settle(), p.waited_s > 0.8, p.lowest); "
                   "print(P.is_far({\"core_us_before\": 0.2, \"core_us_after\": 0.05}, 0.05), "
                   "P.is_far({\"core_us_before\": 0.1, \"core_us_after\": 0.15}, 0.05)); "
                   "q = P.Placement(\"" +
                   d +
                   "\", 0); q.lowest = 0.05; "
                   "open(\"" +
                   d + "/n\", \"w\").write(\"1\"); print(q.settle(), q.can_wait())'";
  Outcome run = runCommand(py + " 2>&1");
  runCommand("rm -rf " + d);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_EQ(run.out, "0.05 True 0.05\nTrue False\n0.2 False\n") << run.out;
}

TEST(PerfSuite, MicroBenchmarksRun) {
  if (!exists(kBin + "/collie-micro")) {
    GTEST_SKIP() << "Google Benchmark is not installed (apt-get install libbenchmark-dev)";
  }
  Outcome run = runCommand(kBin +
                           "/collie-micro --benchmark_filter='frame|pingpong|reduce/float/sum' "
                           "--benchmark_min_time=0.01 2>&1");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  for (const char* name : {"frame/encode", "frame/check", "shm/pingpong/8", "tcp/pingpong/8",
                           "reduce/float/sum/1048576", "one_way_us="}) {
    EXPECT_TRUE(run.out.find(name) != std::string::npos) << name << "\n" << run.out;
  }
  EXPECT_TRUE(run.out.find("ERROR") == std::string::npos) << run.out;
}

}  // namespace
}  // namespace collie
