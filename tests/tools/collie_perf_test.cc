// End-to-end tests of collie-perf: runs the built tool under collie-run and reads its table the
// way a script reading nccl-tests output would, checking sizes, rows, correctness and exit codes.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
  std::string algo;  // the last column of --algo auto tables
};

// algoColumn: rows end with the algorithm the library picked (--algo auto).
std::vector<Row> parseRows(const std::string& out, bool algoColumn = false) {
  std::vector<Row> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Row r;
    fields >> r.bytes >> r.count >> r.type >> r.op >> r.root;
    for (int p = 0; p < 2; ++p) fields >> r.time[p] >> r.algBw[p] >> r.busBw[p] >> r.wrong[p];
    if (algoColumn) fields >> r.algo;
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
  const char* types[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
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
  EXPECT_EQ(seen.size(), 12u * 5u * 3u);
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

  for (const char* flags : {"-d float128", "-o mean", "-b 1Q", "-n 0", "-b 2M -e 1M", "-z 7", "-w",
                            "--backend bogus", "--backend nccl"}) {
    Outcome bad = runCommand(kPerf + " " + flags + " 2>&1");
    EXPECT_EQ(bad.exitCode, 2) << flags << ": " << bad.out;
  }

  Outcome other = runCommand(kPerf + " alltoallv -b 8 2>&1");
  EXPECT_EQ(other.exitCode, 2) << other.out;
  EXPECT_TRUE(contains(other.out, "collective alltoallv is not available in this build"))
      << other.out;
  EXPECT_TRUE(contains(other.out, "sendrecv, alltoall, gather, scatter")) << other.out;

  Outcome launched = runPerf(2, "--no-such-flag 2>&1");
  EXPECT_NE(launched.exitCode, 0) << launched.out;
}

// A file name in the test temp dir, unique per process and use.
std::string tempPath(const std::string& what) {
  return testing::TempDir() + "collie_perf_" + what + "_" + std::to_string(getpid());
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t countOf(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ColliePerf, TransportFlagPicksTheTransport) {
  // The library's own INFO line names the transport of each peer, independently of the tool.
  for (const char* transport : {"tcp", "shm"}) {
    std::string log = tempPath(std::string("log_") + transport);
    Outcome run = runCommand("env COLLIE_DEBUG=INFO " + kRun + " -n 2 " + kPerf +
                             " -b 1K -e 4K -f 4 -n 2 --transport " + transport + " 2>" + log);
    std::string err = readFile(log);
    ASSERT_EQ(run.exitCode, 0) << run.out << err;
    EXPECT_TRUE(contains(err, std::string("via ") + transport)) << err;
    for (const Row& r : parseRows(run.out)) EXPECT_EQ(r.wrong[0], "0") << transport;
    unlink(log.c_str());
  }
  Outcome bad = runPerf(2, "-b 8 -e 8 --transport carrier-pigeon 2>&1");
  EXPECT_NE(bad.exitCode, 0) << bad.out;
  EXPECT_TRUE(contains(bad.out, "COLLIE_TRANSPORT=carrier-pigeon")) << bad.out;
}

TEST(ColliePerf, AlgoFlagForcesTheAlgorithm) {
  // The library reports which algorithm ran (collieCommLastAlgorithm): --algo auto names it.
  std::string path = tempPath("algo") + ".json";
  for (const char* algo : {"ring", "recursive_doubling"}) {
    Outcome run =
        runPerf(2, std::string("-b 4 -e 1M -f 16 -n 2 --algo ") + algo + " --json " + path);
    ASSERT_EQ(run.exitCode, 0) << algo << ": " << run.out;
    EXPECT_TRUE(contains(run.out, std::string("# Algorithm: ") + algo)) << run.out;
    std::vector<Row> rows = parseRows(run.out);
    EXPECT_EQ(rows.size(), 5u) << run.out;  // 4, 64, 1K, 16K, 256K
    for (const Row& r : rows) EXPECT_EQ(r.wrong[1], "0") << algo << " " << r.bytes;
    // Every timed call ran the forced algorithm.
    std::string json = readFile(path);
    EXPECT_EQ(countOf(json, std::string("\"algos\": [\"") + algo + "\"]"), 10u) << json;
  }
  unlink(path.c_str());
  Outcome autoRun = runPerf(2, "-b 4 -e 1M -f 16 -n 2 --algo auto");
  ASSERT_EQ(autoRun.exitCode, 0) << autoRun.out;
  EXPECT_TRUE(contains(autoRun.out, "#wrong  algo")) << autoRun.out;
  std::vector<Row> rows = parseRows(autoRun.out, true);
  ASSERT_EQ(rows.size(), 5u) << autoRun.out;
  // The tuner's choice, whichever its trials made it. No timed call is one of the trials: a
  // "ring (trial)" column would not parse as a row.
  for (const Row& r : rows) {
    std::string first = r.algo.substr(0, r.algo.find('/'));
    EXPECT_TRUE(first == "ring" || first == "recursive_doubling" || first == "shm_direct" ||
                first == "shm_single_copy" || first == "tree" || first == "rhd")
        << r.bytes << ": '" << r.algo << "'";
  }
  // An unknown name reaches the library, which says which algorithms it has.
  Outcome bad = runPerf(2, "-b 8 -e 8 --algo bubble 2>&1");
  EXPECT_NE(bad.exitCode, 0) << bad.out;
  EXPECT_TRUE(contains(bad.out, "COLLIE_ALGO=bubble")) << bad.out;
  EXPECT_TRUE(contains(bad.out, "ring")) << bad.out;
  // -a keeps its nccl-tests meaning (how rank times combine): a name is not a valid value.
  EXPECT_EQ(runCommand(kPerf + " -a ring 2>&1").exitCode, 2);
}

// The tuner picks once per call shape for both columns of a row, so its trials must be calls
// like the timed ones: out of place and in place alike, on the offsets the -n timed iterations
// walk (not the whole of -e, whose far offsets are out of cache when the timed calls' are in it).
// A shim loaded into each rank counts the trial calls.
TEST(ColliePerf, TheTunersTrialsAreCallsLikeTheTimedOnes) {
  const std::string dir = tempPath("trials");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  const int iters = 4;
  Outcome run = runCommand("env LD_PRELOAD=" + std::string(COLLIE_TRIAL_CALLS_SHIM) +
                           " ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0" +
                           " COLLIE_TRIAL_CALLS=" + dir + "/calls " + kRun + " -n 2 " + kPerf +
                           " -b 4K -e 1M -f 256 -w 1 -c 0 -n " + std::to_string(iters));
  ASSERT_EQ(run.exitCode, 0) << run.out;
  int files = 0;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = dir + "/" + e->d_name;
    std::istringstream lines(readFile(path));
    size_t count = 0, inSpan = 0, outSpan = 0;
    long in = 0, out = 0;
    int shapes = 0;
    while (lines >> count >> in >> out >> inSpan >> outSpan) {
      // collie-perf's own small reductions (the times of the ranks, the check) are tuned too.
      if (count != 1024 && count != 262144) continue;
      ++shapes;
      const long all = in + out;
      const size_t bytes = count * sizeof(float);
      EXPECT_GE(all, 8) << path << " count " << count;
      EXPECT_GE(in, all / 4) << path << " count " << count << ": " << in << " of " << all;
      EXPECT_GE(out, all / 4) << path << " count " << count << ": " << out << " of " << all;
      EXPECT_LE(inSpan, (iters - 1) * bytes) << path << " count " << count;
      EXPECT_LE(outSpan, (iters - 1) * bytes) << path << " count " << count;
    }
    EXPECT_EQ(shapes, 2) << path << ": " << readFile(path);  // 4 KiB and 1 MiB of floats
    unlink(path.c_str());
    ++files;
  }
  closedir(d);
  rmdir(dir.c_str());
  EXPECT_EQ(files, 2);  // one per rank
}

TEST(ColliePerf, AlgoAllPrintsATablePerAlgorithm) {
  std::string log = tempPath("algo_all_progress");
  // Without single copy, whose table runs only where this machine's vote at init takes it.
  Outcome run = runCommand("env COLLIE_SHM_CMA=off " + kRun + " -n 2 " + kPerf +
                           " -b 64 -e 4K -f 8 -n 2 --algo all --progress 1 2>" + log);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  // The algorithms are measured size by size: every algorithm at 64 B, then every one at 512 B.
  std::istringstream progress(readFile(log));
  std::vector<std::pair<size_t, std::string>> measured;  // (size, algorithm) in measuring order
  for (std::string line; std::getline(progress, line);) {
    std::istringstream fields(line);
    std::string tool, word, sweep, coll, algo;
    size_t bytes = 0;
    if (fields >> tool >> word >> sweep >> coll >> algo >> bytes && word == "sweep")
      measured.emplace_back(bytes, algo);
  }
  ASSERT_EQ(measured.size(), 3u * 6 * 2) << readFile(log);  // sizes x tables x placements
  for (size_t i = 0; i < measured.size(); ++i) {
    EXPECT_EQ(measured[i].first, i < 12 ? 64u : i < 24 ? 512u : 4096u) << i;
    EXPECT_EQ(measured[i].second, measured[i % 12].second) << i;
  }
  EXPECT_EQ(measured[0].second, "ring");
  EXPECT_EQ(measured[11].second, "auto");
  for (const char* algo : {"ring", "tree", "rhd", "recursive_doubling", "shm_direct", "auto"}) {
    EXPECT_TRUE(contains(run.out, std::string("# Algorithm: ") + algo)) << algo << run.out;
  }
  // 3 sizes (64, 512, 4K) in each of 5 forced tables (hierarchical needs several hosts and
  // shm_single_copy the vote, and are skipped), then auto's with its extra column.
  std::string forced = run.out.substr(0, run.out.find("# Algorithm: auto"));
  std::string autoPart = run.out.substr(run.out.find("# Algorithm: auto"));
  EXPECT_EQ(parseRows(forced).size(), 15u) << run.out;
  EXPECT_TRUE(contains(run.out, "# algorithm hierarchical does not run all_reduce here: skipped"))
      << run.out;
  EXPECT_TRUE(
      contains(run.out, "# algorithm shm_single_copy does not run all_reduce here: skipped"))
      << run.out;
  EXPECT_EQ(parseRows(autoPart, true).size(), 3u) << run.out;
  // An algorithm that cannot run a collective is skipped with a line, not an error.
  Outcome rs = runPerf(2, "reduce_scatter -b 64 -e 4K -f 8 -n 2 --algo all");
  ASSERT_EQ(rs.exitCode, 0) << rs.out;
  EXPECT_TRUE(
      contains(rs.out, "# algorithm recursive_doubling does not run reduce_scatter here: skipped"))
      << rs.out;
  EXPECT_TRUE(contains(rs.out, "# Algorithm: ring")) << rs.out;
  // The same algorithm asked for alone: nothing measured, an error.
  Outcome alone = runPerf(2, "reduce_scatter -b 64 -e 4K -f 8 -n 2 --algo recursive_doubling");
  EXPECT_EQ(alone.exitCode, 1) << alone.out;
  EXPECT_TRUE(
      contains(alone.out, "# algorithm recursive_doubling does not run reduce_scatter here"))
      << alone.out;
}

TEST(ColliePerf, EveryCollectiveIsCheckedWithItsBusFactor) {
  // busbw / algbw: 2(n-1)/n, (n-1)/n, (n-1)/n, 1, 1 at 3 ranks; sizes are per-rank totals, so
  // the split collectives round 1 KiB of floats (256) down to 255 elements.
  struct Case {
    const char* coll;
    const char* factor;  // as Python reads it
    size_t count;
    const char* op;
    int root;
  } cases[] = {{"all_reduce", "4/3", 256, "sum", -1},
               {"reduce_scatter", "2/3", 255, "sum", -1},
               {"all_gather", "2/3", 255, "none", -1},
               {"broadcast", "1", 256, "none", 2},
               {"reduce", "1", 256, "sum", 2}};
  std::string path = tempPath("coll") + ".json";
  for (const Case& c : cases) {
    Outcome run =
        runPerf(3, std::string(c.coll) + " -b 1K -e 16K -f 4 -n 2 -r 2 -d all --json " + path);
    ASSERT_EQ(run.exitCode, 0) << c.coll << ": " << run.out;
    EXPECT_TRUE(contains(run.out, "# Out of bounds values : 0 OK")) << run.out;
    std::vector<Row> rows = parseRows(run.out);
    EXPECT_EQ(rows.size(), 12u * 3u) << c.coll << run.out;  // every datatype, 1K 4K 16K
    for (const Row& r : rows) {
      EXPECT_EQ(r.op, c.op) << c.coll;
      EXPECT_EQ(r.root, c.root) << c.coll;
      EXPECT_EQ(r.wrong[0], "0") << c.coll << " " << r.type << " " << r.bytes;
      EXPECT_EQ(r.wrong[1], "0") << c.coll << " " << r.type << " " << r.bytes << " in place";
      if (r.type == "float" && r.bytes <= 1024) {
        EXPECT_EQ(r.count, c.count) << c.coll;
      }
    }
    if (runCommand("sh -c 'command -v python3' >/dev/null").exitCode == 0) {
      Outcome ratio = runCommand(
          "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
          "print(\"%.6f\" % max(abs(x[\"busbw_GBs\"]/x[\"algbw_GBs\"]/eval(sys.argv[2])-1) "
          "for x in d[\"results\"] if x[\"algbw_GBs\"]>0))' " +
          path + " " + c.factor);
      EXPECT_EQ(ratio.out, "0.000000\n") << c.coll;
    }
  }
  unlink(path.c_str());
}

// The collectives beyond nccl-tests' first five, at 2 ranks: every datatype checked against
// its reference, root 1 for the rooted ones, and busbw / algbw = 1 for sendrecv, (n-1)/n = 1/2
// for the others. sendrecv in place sends and receives one buffer, so it is timed, not checked.
TEST(ColliePerf, SendRecvAlltoAllGatherScatterAreChecked) {
  struct Case {
    const char* coll;
    const char* factor;  // as Python reads it
    int root;
    bool inPlaceChecked;
  } cases[] = {{"sendrecv", "1", -1, false},
               {"alltoall", "1/2", -1, true},
               {"gather", "1/2", 1, true},
               {"scatter", "1/2", 1, true}};
  std::string path = tempPath("p2p") + ".json";
  for (const Case& c : cases) {
    Outcome run =
        runPerf(2, std::string(c.coll) + " -b 1K -e 16K -f 16 -n 2 -r 1 -d all --json " + path);
    ASSERT_EQ(run.exitCode, 0) << c.coll << ": " << run.out;
    EXPECT_TRUE(contains(run.out, std::string("# Collective test starting: ") + c.coll)) << run.out;
    EXPECT_TRUE(contains(run.out, "# Out of bounds values : 0 OK")) << run.out;
    std::vector<Row> rows = parseRows(run.out);
    EXPECT_EQ(rows.size(), 12u * 2u) << c.coll << run.out;  // every datatype, 1K and 16K
    for (const Row& r : rows) {
      EXPECT_EQ(r.op, "none") << c.coll;
      EXPECT_EQ(r.root, c.root) << c.coll;
      EXPECT_EQ(r.wrong[0], "0") << c.coll << " " << r.type << " " << r.bytes;
      EXPECT_EQ(r.wrong[1], c.inPlaceChecked ? "0" : "N/A")
          << c.coll << " " << r.type << " " << r.bytes << " in place";
      if (r.type == "float") {
        EXPECT_EQ(r.count, r.bytes / 4) << c.coll;
      }
    }
    if (runCommand("sh -c 'command -v python3' >/dev/null").exitCode == 0) {
      Outcome ratio = runCommand(
          "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
          "print(\"%.6f\" % max(abs(x[\"busbw_GBs\"]/x[\"algbw_GBs\"]/eval(sys.argv[2])-1) "
          "for x in d[\"results\"] if x[\"algbw_GBs\"]>0))' " +
          path + " " + c.factor);
      EXPECT_EQ(ratio.out, "0.000000\n") << c.coll;
    }
  }
  unlink(path.c_str());
  // No algorithm runs point-to-point calls: auto names them p2p, a forced algorithm is refused.
  Outcome p2p = runPerf(2, "sendrecv -b 1K -e 1K -n 2 --algo auto");
  ASSERT_EQ(p2p.exitCode, 0) << p2p.out;
  std::vector<Row> autoRows = parseRows(p2p.out, true);
  ASSERT_EQ(autoRows.size(), 1u) << p2p.out;
  EXPECT_EQ(autoRows[0].algo, "p2p") << p2p.out;
  Outcome ring = runPerf(2, "sendrecv -b 1K -e 1K -n 2 --algo ring");
  EXPECT_EQ(ring.exitCode, 1) << ring.out;
  EXPECT_TRUE(contains(ring.out, "# algorithm ring does not run sendrecv here: skipped"))
      << ring.out;
  // A root that is no rank is refused before anything runs.
  Outcome bad = runPerf(2, "gather -b 1K -e 1K -r 2 2>&1");
  EXPECT_NE(bad.exitCode, 0) << bad.out;
  EXPECT_TRUE(contains(bad.out, "root 2 is not a rank of 2")) << bad.out;
}

TEST(ColliePerf, JsonHasEveryResult) {
  std::string path = tempPath("json") + ".json";
  Outcome run = runPerf(2, "-b 8 -e 32 -f 2 -n 2 -d int32 --json " + path);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  std::string json = readFile(path);
  EXPECT_TRUE(contains(json, "\"collective\": \"all_reduce\"")) << json;
  EXPECT_TRUE(contains(json, "\"nranks\": 2")) << json;
  // 3 sizes x 2 placements, each checked clean.
  EXPECT_EQ(countOf(json, "\"bytes\": "), 6u) << json;
  EXPECT_EQ(countOf(json, "\"wrong\": 0}"), 6u) << json;
  EXPECT_TRUE(contains(json, "{\"bytes\": 8, \"count\": 2, \"type\": \"int32\"")) << json;
  EXPECT_TRUE(contains(json, "{\"bytes\": 32, \"count\": 8, \"type\": \"int32\"")) << json;
  // The file is valid JSON if Python's parser accepts it (skipped where python3 is missing).
  if (runCommand("sh -c 'command -v python3' >/dev/null").exitCode == 0) {
    Outcome parsed = runCommand(
        "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
        "print(len(d[\"results\"]))' " +
        path);
    EXPECT_EQ(parsed.exitCode, 0) << json;
    EXPECT_EQ(parsed.out, "6\n") << json;
  }
  unlink(path.c_str());
  Outcome bad = runPerf(2, "-b 8 -e 8 --json /no/such/dir/x.json 2>&1");
  EXPECT_NE(bad.exitCode, 0) << bad.out;
  EXPECT_TRUE(contains(bad.out, "cannot write JSON file")) << bad.out;
}

TEST(ColliePerf, RepeatPrintsMediansAndSummary) {
  std::string path = tempPath("repeat") + ".json";
  Outcome run = runPerf(2, "-b 1K -e 16K -f 4 -n 2 --repeat 3 --json " + path);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  std::vector<Row> rows = parseRows(run.out);
  ASSERT_EQ(rows.size(), 3u) << run.out;  // one row per size, not one per sweep
  EXPECT_EQ(rows[0].bytes, 1024u);
  EXPECT_EQ(rows[2].bytes, 16384u);
  EXPECT_TRUE(contains(run.out, "# Over 3 sweeps")) << run.out;
  EXPECT_EQ(countOf(run.out, "out-of-place"), 3u + 1u) << run.out;  // summary + table header
  std::string json = readFile(path);
  EXPECT_TRUE(contains(json, "\"repeat\": 3")) << json;
  // Every result holds three sweep times; min <= median follows from them.
  if (runCommand("sh -c 'command -v python3' >/dev/null").exitCode == 0) {
    Outcome parsed = runCommand(
        "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"results\"]; "
        "print(all(len(x[\"times_us\"])==3 and x[\"time_us_min\"]==min(x[\"times_us\"]) and "
        "x[\"time_us\"]==sorted(x[\"times_us\"])[1] for x in r), len(r))' " +
        path);
    EXPECT_EQ(parsed.out, "True 6\n") << json;
  }
  unlink(path.c_str());
  EXPECT_EQ(runCommand(kPerf + " --repeat 0 2>&1").exitCode, 2);
}

TEST(ColliePerf, ProgressGoesToStderr) {
  std::string log = tempPath("progress");
  Outcome run = runPerf(2, "-b 8 -e 64 -f 8 -n 2 --repeat 2 --progress 1 2>" + log);
  std::string err = readFile(log);
  ASSERT_EQ(run.exitCode, 0) << run.out << err;
  // 2 sizes x 2 placements x 2 sweeps, and none of it on stdout.
  EXPECT_EQ(countOf(err, "collie-perf: sweep "), 8u) << err;
  EXPECT_TRUE(contains(err, "sweep 2/2 all_reduce 64 B float sum in-place")) << err;
  EXPECT_FALSE(contains(run.out, "collie-perf: sweep")) << run.out;
  Outcome quiet = runPerf(2, "-b 8 -e 8 -n 2 --progress 0 2>" + log);
  ASSERT_EQ(quiet.exitCode, 0);
  EXPECT_FALSE(contains(readFile(log), "collie-perf: sweep"));
  unlink(log.c_str());
}

// --device where no GPU is visible (or the build has no CUDA): a clear failure, not a crash.
TEST(ColliePerf, DeviceWithoutAGpuSaysWhy) {
  Outcome o = runPerf(1, "--device -b 1M -e 1M -n 2 2>&1");
  if (o.exitCode == 0)
    GTEST_SKIP() << "a GPU is present: tests/gpu/device_check.sh covers --device";
  EXPECT_EQ(o.exitCode, 1) << o.out;
  EXPECT_TRUE(contains(o.out, "--device")) << o.out;
}

}  // namespace
}  // namespace collie
