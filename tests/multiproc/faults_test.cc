// Faults over real processes: a rank SIGKILLed in the middle of an AllReduce, strangers
// throwing garbage at the store and transport ports while a communicator works, and (where the
// build has UCX) a UCX that cannot initialise.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "src/base/time.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

constexpr int kTimeoutMs = 3000;

// The victim kills itself from a second thread while its main thread is inside large
// AllReduces; every survivor must fail within the deadline + 2 s naming the victim.
enum class Op { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce };

collieResult_t runOp(Op op, std::vector<float>& buf, std::vector<float>& big, int n,
                     collieComm_t c) {
  const size_t count = buf.size() / static_cast<size_t>(n);
  switch (op) {
    case Op::kAllGather:
      return collieAllGather(buf.data(), big.data(), count, collieFloat32, c, nullptr);
    case Op::kReduceScatter:
      return collieReduceScatter(buf.data(), big.data(), count, collieFloat32, collieSum, c,
                                 nullptr);
    case Op::kBroadcast:
      return collieBroadcast(buf.data(), buf.data(), buf.size(), collieFloat32, 0, c, nullptr);
    case Op::kReduce:
      return collieReduce(buf.data(), big.data(), buf.size(), collieFloat32, collieMax, 0, c,
                          nullptr);
    default:
      return collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieMax, c,
                             nullptr);
  }
}

const char* opWord(Op op) {
  switch (op) {
    case Op::kAllGather:
      return "allgather";
    case Op::kReduceScatter:
      return "reducescatter";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kReduce:
      return "reduce";
    default:
      return "allreduce";
  }
}

// From a second thread, 150 ms from now: the main thread is then inside a collective.
void signalSelfSoon(int sig) {
  std::thread([sig] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    kill(getpid(), sig);
  }).detach();
}

// withinMs: how soon after the op began each survivor must have failed.
void killMidOp(int n, int victim, const char* transport = "",
               const std::vector<std::pair<std::string, std::string>>& env = {},
               Op which = Op::kAllReduce, int withinMs = kTimeoutMs + 2000) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", std::to_string(kTimeoutMs)}, {"COLLIE_TRANSPORT", transport}};
  opt.env.insert(opt.env.end(), env.begin(), env.end());
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<float> buf(16 << 20, 1.0f);  // 64 MiB: each op takes a while over TCP
    std::vector<float> big(which == Op::kAllGather ? buf.size() * static_cast<size_t>(n)
                                                   : buf.size());
    if (rank == victim) signalSelfSoon(SIGKILL);
    for (int iter = 0; iter < 1000; ++iter) {
      uint64_t t0 = nowNs();
      collieResult_t r = runOp(which, buf, big, n, c);
      double ms = (nowNs() - t0) / 1e6;
      if (r == collieSuccess) continue;
      std::string msg = collieGetLastError(c);
      std::string dead = "peer rank " + std::to_string(victim);
      if (msg.find(dead) == std::string::npos) rep.fail("error does not name " + dead + ": " + msg);
      if (msg.find("on rank " + std::to_string(rank)) == std::string::npos)
        rep.fail("error does not name the local rank: " + msg);
      if (msg.find(opWord(which)) == std::string::npos)
        rep.fail("error does not name the op: " + msg);
      if (ms > withinMs) rep.fail("failed after " + std::to_string(ms) + " ms");
      rep.note("failed after " + std::to_string(ms) + " ms: " + msg);
      collieCommAbort(c);
      return;
    }
    rep.fail("every op succeeded although a rank was killed");
  });
  for (const auto& o : out) {
    if (o.rank == victim) {
      EXPECT_TRUE(o.signaled) << "the victim was meant to die of SIGKILL";
      continue;
    }
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << ":\n" << o.output;
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
    EXPECT_EQ(o.notes.size(), 1u) << "rank " << o.rank << " did not report its error";
  }
}

TEST(Faults, SigkillOneOfTwoRanksMidAllReduce) { killMidOp(2, 1); }
TEST(Faults, SigkillMidAllGatherOverShm) { killMidOp(3, 1, "shm", {}, Op::kAllGather); }
TEST(Faults, SigkillMidReduceScatterOverTcp) { killMidOp(3, 2, "tcp", {}, Op::kReduceScatter); }
TEST(Faults, SigkillOfTheBroadcastRootOverTcp) { killMidOp(3, 0, "tcp", {}, Op::kBroadcast); }
TEST(Faults, SigkillMidReduceOverShm) { killMidOp(4, 3, "shm", {}, Op::kReduce); }
TEST(Faults, SigkillOneOfFourRanksMidAllReduce) { killMidOp(4, 2); }
TEST(Faults, SigkillMidSingleCopyAllReduceOverShm) {
  killMidOp(3, 2, "shm", {{"COLLIE_SHM_CMA", "on"}, {"COLLIE_SHM_CMA_BYTES", "1"}});
}
TEST(Faults, SigkillRankZeroOfFour) { killMidOp(4, 0); }
TEST(Faults, SigkillOneOfTwoRanksOverTcp) { killMidOp(2, 0, "tcp"); }
TEST(Faults, SigkillOneOfFourRanksOverTcp) { killMidOp(4, 3, "tcp"); }
TEST(Faults, SigkillOneOfThreeRanksRingOverShm) {
  setenv("COLLIE_ALGO", "ring", 1);
  killMidOp(3, 1, "shm");
  unsetenv("COLLIE_ALGO");
}

// The victim stops (SIGSTOP) from a second thread while its main thread is inside AllReduces:
// alive but silent. Each survivor times out waiting on some peer, which in a ring is mostly a
// live neighbour that waits too; every survivor's error must still name the stopped rank. The
// lowest survivor kills the victim once it has reported.
void stopMidOp(int n, int victim, const char* transport, const char* algo) {
  constexpr int kStopTimeoutMs = 3000;
  int pidPipe[2];
  ASSERT_EQ(pipe(pidPipe), 0);
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_TIMEOUT_MS", std::to_string(kStopTimeoutMs)},
             {"COLLIE_TRANSPORT", transport},
             {"COLLIE_ALGO", algo}};
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<float> buf(1 << 20, 1.0f);
    if (rank == victim) {
      const pid_t me = getpid();
      if (write(pidPipe[1], &me, sizeof(me)) != sizeof(me)) return rep.fail("pid pipe");
      signalSelfSoon(SIGSTOP);
    }
    for (int iter = 0; iter < 100000; ++iter) {
      uint64_t t0 = nowNs();
      collieResult_t r =
          collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieMax, c, nullptr);
      double ms = (nowNs() - t0) / 1e6;
      if (r == collieSuccess) continue;
      std::string msg = collieGetLastError(c);
      // The ranks named silent must include the stopped one. (A live peer whose abort does not
      // reach this rank within the grace is named too: it was, under ASan over shm in 1 run in
      // 12, while that peer's abort waited behind a frame begun; see
      // StreamConnection.ListeningAfterHearingThePeerStillSendsThisRanksAbort.)
      const size_t from = msg.find("after this failure peer rank");
      const size_t to = msg.find(" sent no word", from);
      bool named = false;
      if (from != std::string::npos && to != std::string::npos) {
        std::string list = msg.substr(from, to - from);
        for (char& ch : list)
          if (ch < '0' || ch > '9') ch = ' ';
        std::istringstream in(list);
        for (int r = -1; in >> r;) named = named || r == victim;
      }
      if (!named)
        rep.fail("error does not name the stopped rank " + std::to_string(victim) + ": " + msg);
      if (msg.find("on rank " + std::to_string(rank)) == std::string::npos)
        rep.fail("error does not name the local rank: " + msg);
      // The deadline, the grace (1 s here) and room for a busy machine.
      if (ms > kStopTimeoutMs + 1000 + 3000) rep.fail("failed after " + std::to_string(ms) + " ms");
      rep.note(msg);
      collieCommAbort(c);
      if (rank == (victim == 0 ? 1 : 0)) {
        pid_t v = 0;
        if (read(pidPipe[0], &v, sizeof(v)) == sizeof(v) && v > 0) kill(v, SIGKILL);
      }
      return;
    }
    rep.fail("every op succeeded although a rank was stopped");
  });
  close(pidPipe[0]);
  close(pidPipe[1]);
  for (const auto& o : out) {
    if (o.rank == victim) continue;
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << ":\n" << o.output;
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
    EXPECT_EQ(o.notes.size(), 1u) << "rank " << o.rank << " did not report its error";
  }
}

// A ring over tcp: before, a survivor blamed a live neighbour in most runs.
TEST(Faults, AStoppedRankIsNamedByEverySurvivorOfARingOverTcp) { stopMidOp(4, 2, "tcp", "ring"); }
TEST(Faults, AStoppedRankIsNamedByEverySurvivorOverShm) { stopMidOp(4, 1, "shm", "auto"); }
TEST(Faults, AStoppedRankIsNamedByEverySurvivorOfATreeOverTcp) { stopMidOp(3, 0, "tcp", "tree"); }

#ifdef COLLIE_HAVE_UCX
// UCX over its tcp transport: the dead peer fails its endpoint (error handling mode PEER).
TEST(Faults, SigkillOneOfTwoRanksOverUcx) { killMidOp(2, 1, "ucx", {{"UCX_TLS", "tcp"}}); }
TEST(Faults, SigkillOneOfFourRanksOverUcx) { killMidOp(4, 2, "ucx", {{"UCX_TLS", "tcp"}}); }
// Over UCX too the survivors listen after a timeout and name the rank that sent no abort; a
// rank answers a peer whose abort came first (before, it did not, and that peer named it).
TEST(Faults, AStoppedRankIsNamedByEverySurvivorOfARingOverUcx) { stopMidOp(5, 3, "ucx", "ring"); }
TEST(Faults, AStoppedRankIsNamedByEverySurvivorOfATreeOverUcx) { stopMidOp(6, 1, "ucx", "tree"); }
// Over UCX's shared memory alone (no endpoint error there) the survivors watch the peers'
// processes, and with every transport UCX has the endpoints report the dead peer: either way
// it is named well before the deadline, and no survivor dies with it.
TEST(Faults, SigkillOneOfThreeRanksOverUcxSharedMemory) {
  killMidOp(3, 1, "ucx", {{"UCX_TLS", "posix,cma"}}, Op::kAllReduce, kTimeoutMs / 2);
  killMidOp(3, 2, "ucx", {}, Op::kAllReduce, kTimeoutMs / 2);
}

// Two ranks on two pretend hosts (so that the automatic choice considers UCX), one AllReduce;
// each rank notes its init error or the result, and the parent reads the notes and the logs.
std::vector<RankOutcome> initAndAllReduce(
    const std::vector<std::pair<std::string, std::string>>& env) {
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}};
  opt.env.insert(opt.env.end(), env.begin(), env.end());
  return runWorld(2, opt, [](int rank, Reporter& rep) {
    setenv("COLLIE_HOSTID", ("host" + std::to_string(rank)).c_str(), 1);
    collieComm_t c = nullptr;
    uint64_t t0 = nowNs();
    collieResult_t r = collieCommInitFromEnv(&c);
    rep.note("init " + std::to_string(r) + " after " + std::to_string((nowNs() - t0) / 1000000) +
             " ms: " + (r == collieSuccess ? "" : collieGetLastError(nullptr)));
    if (r != collieSuccess) return;
    std::vector<float> buf(1000, static_cast<float>(rank + 1));
    if (collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieSum, c, nullptr) !=
        collieSuccess)
      rep.fail(std::string("allreduce: ") + collieGetLastError(c));
    else if (buf[0] != 3.0f || buf[999] != 3.0f)
      rep.fail("wrong sum " + std::to_string(buf[0]));
    collieCommDestroy(c);
  });
}

TEST(Faults, UcxThatCannotInitialiseFallsBackToTcpUnlessForced) {
  // Not forced: a WARN, then tcp.
  auto out = initAndAllReduce(
      {{"UCX_TLS", "nonexistent_tl"}, {"COLLIE_DEBUG", "INFO"}, {"COLLIE_DEBUG_SUBSYS", "INIT"}});
  expectAllPassed(out);
  for (const auto& o : out) {
    ASSERT_EQ(o.notes.size(), 1u) << o.output;
    EXPECT_EQ(o.notes[0].rfind("init 0 ", 0), 0u) << o.notes[0];
    EXPECT_NE(o.output.find("WARN INIT UCX cannot initialise"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("peers on other hosts use tcp instead"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("via tcp"), std::string::npos) << o.output;
  }
  // Forced: a clear error at init, at once, naming UCX and what failed.
  out = initAndAllReduce({{"UCX_TLS", "nonexistent_tl"}, {"COLLIE_TRANSPORT", "ucx"}});
  for (const auto& o : out) {
    EXPECT_EQ(o.exitCode, 0) << o.output;
    ASSERT_EQ(o.notes.size(), 1u) << o.output;
    const std::string& n = o.notes[0];
    EXPECT_EQ(n.rfind("init " + std::to_string(collieSystemError) + " ", 0), 0u) << n;
    EXPECT_NE(n.find("COLLIE_TRANSPORT=ucx: UCX cannot initialise: ucp_init failed"),
              std::string::npos)
        << n;
    EXPECT_NE(n.find("init of rank " + std::to_string(o.rank)), std::string::npos) << n;
    EXPECT_LT(std::stoi(n.substr(n.find(" after ") + 7)), 5000) << n;
  }
  // A UCX that works but has no RDMA device (this host): the automatic choice stays on tcp.
  out = initAndAllReduce({{"COLLIE_DEBUG", "INFO"}, {"COLLIE_DEBUG_SUBSYS", "INIT"}});
  expectAllPassed(out);
  for (const auto& o : out) {
    EXPECT_EQ(o.output.find("WARN"), std::string::npos) << o.output;
    EXPECT_EQ(o.output.find("via ucx"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("via tcp"), std::string::npos) << o.output;
  }
}
#endif

// Listening TCP ports owned by the given processes (from /proc: their socket inodes matched
// against /proc/net/tcp entries in LISTEN state).
std::set<int> listeningPorts(const std::vector<int>& pids) {
  std::set<std::string> inodes;
  for (int pid : pids) {
    std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      char link[256];
      ssize_t n = readlink((dir + "/" + e->d_name).c_str(), link, sizeof(link) - 1);
      if (n <= 0) continue;
      link[n] = 0;
      if (strncmp(link, "socket:[", 8) == 0) inodes.insert(std::string(link + 8, strlen(link) - 9));
    }
    closedir(d);
  }
  std::set<int> ports;
  FILE* f = fopen("/proc/net/tcp", "r");
  if (!f) return ports;
  char line[512];
  if (!fgets(line, sizeof(line), f)) {
    fclose(f);
    return ports;
  }
  while (fgets(line, sizeof(line), f)) {
    unsigned localPort = 0, state = 0;
    char inode[64];
    if (sscanf(line, "%*d: %*8X:%4X %*8X:%*4X %2X %*s %*s %*s %*s %*s %63s", &localPort, &state,
               inode) == 3 &&
        state == 0x0A && inodes.count(inode))
      ports.insert(static_cast<int>(localPort));
  }
  fclose(f);
  return ports;
}

void throwGarbageAt(int port, int kind) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    char junk[300];
    for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = static_cast<char>(i * 37 + kind);
    if (kind == 1) memcpy(junk, "CLHI", 4);  // a plausible magic, then nonsense
    if (kind == 2) memcpy(junk, "GET / HTTP/1.0\r\n\r\n", 18);
    if (kind != 3) send(fd, junk, sizeof(junk), MSG_NOSIGNAL);  // kind 3: connect and close
  }
  close(fd);
}

TEST(Faults, StrangersAreDroppedWhileFourRanksAllReduce) {
  WorldOptions opt;
  // Over tcp, whose listeners stay up for the whole run (ranks of one host on shm alone listen
  // nowhere once the store has closed).
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"}, {"COLLIE_DEBUG", "WARN"}, {"COLLIE_TRANSPORT", "tcp"}};
  std::atomic<int> hits{0};
  // The world forks from this thread; the stranger starts right after, aimed at every listening
  // port of the rank processes (found like a port scanner would, plus the store's port).
  auto body = [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail(collieGetLastError(nullptr));
    const size_t count = 100003;
    std::vector<float> in(count), out(count);
    for (int iter = 0; iter < 100; ++iter) {
      fillInput(in.data(), collieFloat32, collieSum, rank, count, 4);
      if (collieAllReduce(in.data(), out.data(), count, collieFloat32, collieSum, c, nullptr) !=
          collieSuccess)
        return rep.fail(collieGetLastError(c));
      std::string bad;
      if (countWrong(out.data(), collieFloat32, collieSum, count, 4, &bad))
        rep.fail("wrong result: " + bad);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    collieCommDestroy(c);
  };
  // Run the world in a child so this process can scan while it runs.
  pid_t world = fork();
  if (world == 0) {
    auto out = runWorld(4, opt, body);
    int bad = 0;
    for (const auto& o : out) {
      bad += o.exitCode != 0 || !o.failures.empty();
      for (const auto& f : o.failures) fprintf(stderr, "rank %d: %s\n", o.rank, f.c_str());
      if (o.exitCode != 0) fprintf(stderr, "rank %d output:\n%s\n", o.rank, o.output.c_str());
    }
    bool warned = false;
    for (const auto& o : out) warned |= o.output.find("dropped a connection") != std::string::npos;
    if (!warned) fprintf(stderr, "no rank logged a WARN about a dropped stranger\n");
    _exit(bad == 0 && warned ? 0 : 1);
  }
  Deadline until = Deadline::afterMs(60000);
  int kind = 0;
  int status = 0;
  while (waitpid(world, &status, WNOHANG) == 0 && !until.expired()) {
    std::vector<int> all;  // the world process and its ranks
    all.push_back(world);
    if (FILE* f = fopen(
            ("/proc/" + std::to_string(world) + "/task/" + std::to_string(world) + "/children")
                .c_str(),
            "r")) {
      int p;
      while (fscanf(f, "%d", &p) == 1) all.push_back(p);
      fclose(f);
    }
    for (int port : listeningPorts(all)) {
      throwGarbageAt(port, kind++ % 4);
      ++hits;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (until.expired()) kill(world, SIGKILL), waitpid(world, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the ranks failed or logged no WARN under a stranger's garbage (see stderr)";
  EXPECT_GT(hits.load(), 10) << "the stranger found no ports to hit";
}

}  // namespace
}  // namespace testing
}  // namespace collie
