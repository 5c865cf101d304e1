// Tests of collie-run, the local launcher: the environment each rank gets, tagged output,
// teardown when a rank fails, on signals and on timeout, and usage errors. They run the built
// collie-run on collie-test-rank; every wait has a deadline.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tools/collie_run_options.h"

#ifndef COLLIE_BIN_DIR
#error "COLLIE_BIN_DIR must name the folder holding collie-run and collie-test-rank"
#endif

namespace collie {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kBinDir = COLLIE_BIN_DIR;
const std::string kRun = kBinDir + "/collie-run";
const std::string kRank = kBinDir + "/collie-test-rank";

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Result {
  int code = -1;  // exit code, 128+S for signal S, -1 if it had to be killed by the test
  std::string out, err;
  double seconds = 0;
};

// collie-run started by the test, its stdout and stderr captured through pipes.
class Launch {
 public:
  Launch(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    int out[2], err[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv{const_cast<char*>(kRun.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(126);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~Launch() {
    if (pid_ > 0) finish(1);
  }
  pid_t pid() const { return pid_; }

  // Collects all output and the exit status; kills collie-run if it outlives the timeout.
  Result finish(double timeout_s) {
    Result r;
    auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(timeout_s));
    bool killed = false;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (Clock::now() >= deadline && !killed) {
        kill(pid_, SIGKILL);
        killed = true;
        deadline = Clock::now() + std::chrono::seconds(5);  // for the last bytes
      } else if (Clock::now() >= deadline) {
        break;
      }
      drain(deadline, &r);
    }
    for (int* fd : {&out_fd_, &err_fd_}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
    int status = 0;
    while (waitpid(pid_, &status, killed ? 0 : WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        killed = true;
      }
      usleep(10000);
    }
    pid_ = -1;
    r.seconds = secondsSince(start_);
    if (!killed) r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

 private:
  void drain(Clock::time_point deadline, Result* r) {
    std::vector<pollfd> fds;
    for (int fd : {out_fd_, err_fd_}) {
      if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    int ms = static_cast<int>(std::max<long long>(1, left.count()));
    if (poll(fds.data(), fds.size(), ms) <= 0) return;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      char buf[4096];
      ssize_t n = read(p.fd, buf, sizeof(buf));
      bool is_out = p.fd == out_fd_;
      if (n > 0) {
        (is_out ? r->out : r->err).append(buf, static_cast<size_t>(n));
      } else {
        close(p.fd);
        (is_out ? out_fd_ : err_fd_) = -1;
      }
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  Clock::time_point start_;
};

Result runLauncher(const std::vector<std::string>& args, double timeout_s = 30,
                   const std::vector<std::string>& env = {}) {
  Launch l(args, env);
  return l.finish(timeout_s);
}

// A zombie is as gone as a rank can be once its parent has been killed.
bool processGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

// A folder where each rank writes its pid (COLLIE_TEST_PID_DIR), removed afterwards.
class PidDir {
 public:
  PidDir() {
    char tmpl[] = "/tmp/collie-run-test-XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
    EXPECT_FALSE(path_.empty());
  }
  ~PidDir() {
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') unlink((path_ + "/" + e->d_name).c_str());
      }
      closedir(d);
    }
    rmdir(path_.c_str());
  }
  std::string env() const { return "COLLIE_TEST_PID_DIR=" + path_; }

  // The pids of ranks 0..n-1, waiting up to timeout_s for them to appear.
  std::vector<pid_t> pids(int n, double timeout_s = 10) const {
    auto start = Clock::now();
    std::vector<pid_t> pids;
    while (secondsSince(start) < timeout_s) {
      pids.clear();
      for (int r = 0; r < n; ++r) {
        std::ifstream f(path_ + "/" + std::to_string(r));
        int pid = 0;
        if (f >> pid) pids.push_back(pid);
      }
      if (static_cast<int>(pids.size()) == n) return pids;
      usleep(10000);
    }
    ADD_FAILURE() << "only " << pids.size() << " of " << n << " ranks recorded their pid";
    return pids;
  }

 private:
  std::string path_;
};

void expectAllGone(const std::vector<pid_t>& pids, double timeout_s = 0) {
  auto start = Clock::now();
  for (pid_t pid : pids) {
    while (!processGone(pid) && secondsSince(start) < timeout_s) usleep(10000);
    EXPECT_TRUE(processGone(pid)) << "rank pid " << pid << " outlived collie-run";
  }
}

class CollieRunEnvTest : public ::testing::TestWithParam<int> {};

TEST_P(CollieRunEnvTest, EveryRankGetsItsEnvironment) {
  const int n = GetParam();
  // A MASTER_PORT already in the environment is replaced by a fresh one.
  Result r = runLauncher({"-n", std::to_string(n), kRank, "env"}, 30, {"MASTER_PORT=1"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = splitLines(r.out);
  ASSERT_EQ(static_cast<int>(lines.size()), n) << r.out;
  std::set<int> ranks;
  std::set<int> ports;
  for (const std::string& line : lines) {
    int rank, world, local_rank, local_world, port;
    char addr[64];
    ASSERT_EQ(std::sscanf(line.c_str(),
                          "RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d "
                          "MASTER_ADDR=%63s MASTER_PORT=%d",
                          &rank, &world, &local_rank, &local_world, addr, &port),
              6)
        << line;
    ranks.insert(rank);
    ports.insert(port);
    EXPECT_EQ(world, n);
    EXPECT_EQ(local_rank, rank);
    EXPECT_EQ(local_world, n);
    EXPECT_STREQ(addr, "127.0.0.1");
  }
  EXPECT_EQ(static_cast<int>(ranks.size()), n);
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), n - 1);
  ASSERT_EQ(ports.size(), 1u) << "ranks disagree on MASTER_PORT";
  EXPECT_GT(*ports.begin(), 1);
  EXPECT_LE(*ports.begin(), 65535);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CollieRunEnvTest, ::testing::Values(1, 3, 4));

TEST(CollieRunTest, PortFlagAndAliasAndSeparator) {
  Result r = runLauncher({"-np", "2", "--port", "23456", "--", kRank, "env"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = splitLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const std::string& line : lines) {
    EXPECT_NE(line.find("WORLD_SIZE=2 "), std::string::npos) << line;
    EXPECT_NE(line.find("MASTER_PORT=23456"), std::string::npos) << line;
  }
}

// Checks that every line of one stream is "[R] rank=R stream=NAME line=I x..." and that each
// rank's lines arrive complete and in order.
void expectTaggedLines(const std::string& text, const std::string& stream, int n, int count) {
  std::map<int, int> next;  // rank -> next line number expected
  for (const std::string& line : splitLines(text)) {
    int tag = -1, rank = -1, i = -1, consumed = 0;
    char name[8] = {};
    int got = std::sscanf(line.c_str(), "[%d] rank=%d stream=%7s line=%d %n", &tag, &rank, name, &i,
                          &consumed);
    ASSERT_EQ(got, 4) << "malformed line: " << line;
    EXPECT_EQ(tag, rank) << line;
    EXPECT_EQ(name, stream) << line;
    EXPECT_EQ(i, next[rank]) << line;
    next[rank] = i + 1;
    EXPECT_EQ(line.substr(static_cast<size_t>(consumed)),
              std::string(static_cast<size_t>(20 + i % 50), 'x'))
        << line;
  }
  ASSERT_EQ(static_cast<int>(next.size()), n);
  for (const auto& [rank, lines] : next) EXPECT_EQ(lines, count) << "rank " << rank;
}

TEST(CollieRunTest, TagOutputPrefixesWholeLines) {
  const int n = 4, count = 200;
  Result r = runLauncher(
      {"-n", std::to_string(n), "--tag-output", kRank, "print-lines", std::to_string(count)});
  ASSERT_EQ(r.code, 0) << r.err;
  expectTaggedLines(r.out, "out", n, count);
  expectTaggedLines(r.err, "err", n, count);
}

TEST(CollieRunTest, TagOutputFlushesAnUnterminatedLine) {
  Result r = runLauncher({"-n", "2", "--tag-output", kRank, "no-newline"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> out = splitLines(r.out);
  std::vector<std::string> err = splitLines(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[0] partial out", "[1] partial out"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[0] partial err", "[1] partial err"}));
}

TEST(CollieRunTest, FailingRankTerminatesTheOthers) {
  PidDir dir;
  Launch l({"-n", "4", kRank, "exit-rank", "2", "3"}, {dir.env()});
  std::vector<pid_t> pids = dir.pids(4);
  Result r = l.finish(20);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(r.err.find("rank 2 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 3; terminating the other ranks"), std::string::npos)
      << r.err;
  expectAllGone(pids);
}

TEST(CollieRunTest, KilledRankGivesStatus137) {
  PidDir dir;
  Launch l({"-n", "3", "--tag-output", kRank, "kill-rank", "1"}, {dir.env()});
  std::vector<pid_t> pids = dir.pids(3);
  Result r = l.finish(20);
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << r.err;
  expectAllGone(pids);
}

TEST(CollieRunTest, SigtermIsForwardedToTheRanks) {
  PidDir dir;
  Launch l({"-n", "3", kRank, "sleep", "30"}, {dir.env()});
  std::vector<pid_t> pids = dir.pids(3);
  ASSERT_EQ(kill(l.pid(), SIGTERM), 0);
  Result r = l.finish(15);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, 10);
  expectAllGone(pids);
}

TEST(CollieRunTest, RanksDieWithASigkilledLauncher) {
  PidDir dir;
  Launch l({"-n", "3", kRank, "sleep", "30"}, {dir.env()});
  std::vector<pid_t> pids = dir.pids(3);
  ASSERT_EQ(kill(l.pid(), SIGKILL), 0);
  Result r = l.finish(15);
  EXPECT_EQ(r.code, 128 + SIGKILL);
  expectAllGone(pids, 5);
}

TEST(CollieRunTest, TimeoutKillsRanksThatIgnoreSigterm) {
  PidDir dir;
  Launch l({"--timeout", "1", "-n", "2", kRank, "ignore-term", "30"}, {dir.env()});
  std::vector<pid_t> pids = dir.pids(2);
  Result r = l.finish(20);
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_GE(r.seconds, 1);
  EXPECT_LT(r.seconds, 10);  // 1 s timeout + 3 s grace before SIGKILL
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  expectAllGone(pids);
}

TEST(CollieRunTest, ProgramThatCannotRunGivesStatus127) {
  Result r = runLauncher({"-n", "2", "/nonexistent/collie-no-such-program"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("cannot execute"), std::string::npos) << r.err;
}

TEST(CollieRunTest, BadUsageExits2) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"-n", "2"},
      {"-n"},
      {"-n", "0", kRank, "env"},
      {"-n", "abc", kRank, "env"},
      {"-np", "-3", kRank, "env"},
      {"--bogus", kRank, "env"},
      {"--timeout", "-1", kRank, "env"},
      {"--timeout", "soon", kRank, "env"},
      {"--port", "70000", kRank, "env"},
      {"--tag-output", "--"},
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    Result r = runLauncher(args);
    EXPECT_EQ(r.code, 2) << "args: " << shown;
    EXPECT_NE(r.err.find("collie-run: "), std::string::npos) << "args: " << shown;
    EXPECT_TRUE(r.out.empty()) << "args: " << shown;
  }
}

// parseRunArgs on a command line; returns its result (-1: launch) and fills *opt.
int parse(std::vector<std::string> args, RunOptions* opt) {
  args.insert(args.begin(), "collie-run");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  int rc = parseRunArgs(static_cast<int>(args.size()), argv.data(), opt);
  opt->argv.clear();  // it points into args, which go away
  return rc;
}

TEST(CollieRunOptionsTest, NodesGiveWorldAndGlobalRanks) {
  RunOptions o;
  ASSERT_EQ(parse({"--nnodes", "3", "--node-rank=2", "--master-addr", "node0", "--nproc-per-node",
                   "4", "prog"},
                  &o),
            -1);
  EXPECT_EQ(o.nnodes, 3);
  EXPECT_EQ(o.node_rank, 2);
  EXPECT_EQ(o.nranks, 4);
  EXPECT_EQ(o.master_addr, "node0");
  EXPECT_EQ(o.port, 0);  // main picks the torchrun default across nodes
  EXPECT_EQ(o.worldSize(), 12);
  EXPECT_EQ(o.globalRank(0), 8);
  EXPECT_EQ(o.globalRank(3), 11);
  RunOptions one;
  ASSERT_EQ(parse({"-n", "2", "--nproc-per-node", "2", "--master-port", "1234", "prog"}, &one), -1);
  EXPECT_EQ(one.nnodes, 1);
  EXPECT_EQ(one.worldSize(), 2);
  EXPECT_EQ(one.globalRank(1), 1);
  EXPECT_EQ(one.port, 1234);
  EXPECT_TRUE(one.master_addr.empty());
}

TEST(CollieRunOptionsTest, BadNodeCombinationsAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "prog"},  // rank >= nnodes
      {"--node-rank", "1", "prog"},                                         // one node: only 0
      {"--nnodes", "2", "--node-rank", "0", "prog"},                        // no master address
      {"--nnodes", "0", "--master-addr", "h", "prog"},
      {"--node-rank", "-1", "prog"},
      {"--nnodes", "2", "--master-addr", "--node-rank", "1", "prog"},
      {"--master-port", "0", "prog"},
      {"-n", "2", "--nproc-per-node", "3", "prog"},                      // disagree
      {"--nnodes", "1048576", "-n", "2", "--master-addr", "h", "prog"},  // world too large
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    RunOptions o;
    EXPECT_EQ(parse(args, &o), kRunUsageError) << shown;
  }
}

// One node of a job across hosts: global ranks, the node's own local ranks, node 0's address
// and the torchrun default port.
TEST(CollieRunTest, NodeRankShiftsTheRanks) {
  Result r = runLauncher({"--nnodes", "3", "--node-rank", "1", "--master-addr", "10.9.8.7",
                          "--nproc-per-node", "2", kRank, "env"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = splitLines(r.out);
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (int local = 0; local < 2; ++local) {
    EXPECT_EQ(lines[local], "RANK=" + std::to_string(2 + local) +
                                " WORLD_SIZE=6 LOCAL_RANK=" + std::to_string(local) +
                                " LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.9.8.7 MASTER_PORT=29500");
  }
  Result bad = runLauncher({"--nnodes", "2", "--node-rank", "5", "--master-addr", "h", kRank});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--node-rank 5 is out of range for --nnodes 2 (0..1)"), std::string::npos)
      << bad.err;
  Result noaddr = runLauncher({"--nnodes", "2", kRank, "env"});
  EXPECT_EQ(noaddr.code, 2);
  EXPECT_NE(noaddr.err.find("--nnodes 2 needs --master-addr"), std::string::npos) << noaddr.err;
}

TEST(CollieRunTest, HelpPrintsUsage) {
  for (const char* flag : {"-h", "--help"}) {
    Result r = runLauncher({flag});
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out.rfind("usage: collie-run", 0), 0u) << r.out;
  }
}

}  // namespace
}  // namespace collie
