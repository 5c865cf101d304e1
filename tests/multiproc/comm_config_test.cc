// Per-communicator configs, non-blocking communicators and finalize, over real processes: a
// config's fields hold for its communicator and not for another of the same process, a
// non-blocking init and its ops finish through polling, an abort during init returns at once,
// finalize flushes and refuses what follows.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Polls collieCommGetAsyncError while it says collieInProgress, for up to limitMs.
collieResult_t pollDone(collieComm_t c, int limitMs = 20000) {
  const auto until = Clock::now() + std::chrono::milliseconds(limitMs);
  collieResult_t state = collieInProgress;
  while (Clock::now() < until) {
    if (collieCommGetAsyncError(c, &state) != collieSuccess) return collieInternalError;
    if (state != collieInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return state;
}

std::vector<collieUniqueId> makeIds(int n) {
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  std::vector<collieUniqueId> ids(static_cast<size_t>(n));
  for (auto& id : ids) EXPECT_EQ(collieGetUniqueId(&id), collieSuccess);
  unsetenv("COLLIE_SOCKET_IFNAME");
  return ids;
}

// An AllReduce of n int32 on comm checked against the reference; "" when right.
std::string allreduceWrong(collieComm_t comm, int rank, int nranks, size_t n) {
  std::vector<int32_t> v(n);
  fillInput(v.data(), collieInt32, collieSum, rank, n, nranks);
  const collieResult_t r =
      collieAllReduce(v.data(), v.data(), n, collieInt32, collieSum, comm, nullptr);
  if (r != collieSuccess) return "allreduce: " + std::string(collieGetLastError(comm));
  std::string bad;
  countWrong(v.data(), collieInt32, collieSum, n, nranks, &bad);
  return bad;
}

const char* lastAlgo(collieComm_t c) {
  const char* name = "?";
  collieCommLastAlgorithm(c, &name);
  return name;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The deadlines of A (the config's 1 s) and B (the environment's 60 s), on a stalled op.
void checkDeadlines(collieComm_t a, collieComm_t b, int rank, Reporter& rep) {
  // B keeps the environment's deadline: rank 1 comes 1.5 s late, past A's.
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  if (collieBarrier(b) != collieSuccess)
    rep.fail("B late barrier: " + std::string(collieGetLastError(b)));
  // A's deadline: rank 1 never joins this AllReduce.
  if (rank == 0) {
    const auto t0 = Clock::now();
    std::vector<float> v(64, 1.0f);
    const collieResult_t r =
        collieAllReduce(v.data(), v.data(), v.size(), collieFloat32, collieSum, a, nullptr);
    const std::string msg = collieGetLastError(a);
    if (r != collieTimeout) rep.fail("A stalled: code " + std::to_string(r) + ": " + msg);
    if (!has(msg, "rank 0 of communicator 'dp'")) rep.fail("A's error names no comm: " + msg);
    if (secondsSince(t0) < 0.9 || secondsSince(t0) > 8)
      rep.fail("A timed out after " + std::to_string(secondsSince(t0)) + " s");
  }
  if (collieBarrier(b) != collieSuccess)
    rep.fail("B barrier: " + std::string(collieGetLastError(b)));
}

// Each rank makes A (a config over every field the environment also sets), B (no config) and
// C (a config that leaves the interface to the environment, which names none that exists).
void configAgainstEnvironment(const std::vector<collieUniqueId>& ids, int rank, Reporter& rep) {
  collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
  cfg.commName = "dp";
  cfg.algorithm = "ring";
  cfg.transports = "tcp";
  cfg.timeoutMs = 1000;
  cfg.socketIfname = "lo";
  cfg.nsocks = 3;
  cfg.chunkBytes = 8192;
  collieComm_t a = nullptr, b = nullptr, c = nullptr;
  if (collieCommInitRankConfig(&a, 2, ids[0], rank, &cfg) != collieSuccess)
    return rep.fail("A: " + std::string(collieGetLastError(nullptr)));
  if (collieCommInitRank(&b, 2, ids[1], rank) != collieSuccess)
    return rep.fail("B: " + std::string(collieGetLastError(nullptr)));
  collieConfig_t tcpOnly = COLLIE_CONFIG_INITIALIZER;
  tcpOnly.transports = "tcp";
  const collieResult_t rc = collieCommInitRankConfig(&c, 2, ids[2], rank, &tcpOnly);
  const std::string cMsg = collieGetLastError(nullptr);
  if (rc != collieInvalidArgument || !has(cMsg, "socket interface 'bogus0'"))
    rep.fail("C: code " + std::to_string(rc) + ": " + cMsg);
  for (collieComm_t comm : {a, b}) {
    const std::string wrong = allreduceWrong(comm, rank, 2, 10007);
    if (!wrong.empty()) rep.fail(wrong);
  }
  if (std::string(lastAlgo(a)) != "ring") rep.fail(std::string("A ran ") + lastAlgo(a));
  if (std::string(lastAlgo(b)) != "recursive_doubling")
    rep.fail(std::string("B ran ") + lastAlgo(b));
  checkDeadlines(a, b, rank, rep);
  collieCommDestroy(a);
  collieCommDestroy(b);
}

TEST(CommConfig, FieldsHoldForTheirCommunicatorAndNotAnother) {
  const std::vector<collieUniqueId> ids = makeIds(3);
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_ALGO", "recursive_doubling"},
             {"COLLIE_TRANSPORT", "shm"},
             {"COLLIE_TIMEOUT_MS", "60000"},
             {"COLLIE_SOCKET_IFNAME", "bogus0"},
             {"COLLIE_NSOCKS", "2"},
             {"COLLIE_CHUNK_BYTES", "64K"},
             {"COLLIE_DEBUG", "INFO"},
             {"COLLIE_DEBUG_SUBSYS", "INIT"}};
  auto out = runWorld(
      2, opt, [&ids](int rank, Reporter& rep) { configAgainstEnvironment(ids, rank, rep); });
  expectAllPassed(out);
  // The transports, deadlines and the rest each communicator was made with, as init logs them.
  for (const RankOutcome& o : out) {
    const std::string r = "rank " + std::to_string(o.rank), peer = std::to_string(1 - o.rank);
    EXPECT_TRUE(has(o.output, r + " of communicator 'dp' ready (2 ranks, blocking): peers " + peer +
                                  ":tcp; timeout 1000 ms"))
        << o.output;
    EXPECT_TRUE(has(o.output, "algorithm ring; socket interface 'lo'; nsocks 3; chunk 8192"))
        << o.output;
    EXPECT_TRUE(
        has(o.output, r + " ready (2 ranks, blocking): peers " + peer + ":shm; timeout 60000 ms"))
        << o.output;
    EXPECT_TRUE(has(o.output,
                    "algorithm recursive_doubling; socket interface 'bogus0'; nsocks 2; chunk "
                    "65536"))
        << o.output;
  }
}

TEST(CommConfig, BadConfigsAreRefusedBeforeInit) {
  const std::vector<collieUniqueId> ids = makeIds(1);
  collieComm_t c = reinterpret_cast<collieComm_t>(1);
  collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
  cfg.algorithm = "pigeon";
  EXPECT_EQ(collieCommInitRankConfig(&c, 1, ids[0], 0, &cfg), collieInvalidArgument);
  EXPECT_TRUE(has(collieGetLastError(nullptr), "collieCommInitRankConfig: config.algorithm"))
      << collieGetLastError(nullptr);
  EXPECT_EQ(c, nullptr);
  cfg = COLLIE_CONFIG_INITIALIZER;
  cfg.magic = 7;
  EXPECT_EQ(collieCommInitRankConfig(&c, 1, ids[0], 0, &cfg), collieInvalidArgument);
  EXPECT_TRUE(has(collieGetLastError(nullptr), "magic 7")) << collieGetLastError(nullptr);
  cfg = COLLIE_CONFIG_INITIALIZER;
  cfg.timeoutMs = -1;
  EXPECT_EQ(collieCommInitRankConfig(&c, 1, ids[0], 0, &cfg), collieInvalidArgument);
  EXPECT_TRUE(has(collieGetLastError(nullptr), "config.timeoutMs=-1"));
  EXPECT_EQ(collieCommInitRankConfig(&c, 1, ids[0], 1, &cfg), collieInvalidArgument);
  EXPECT_EQ(collieCommInitRankConfig(nullptr, 1, ids[0], 0, nullptr), collieInvalidArgument);
  Communicator cc;
  EXPECT_EQ(Communicator::initRank(&cc, 1, ids[0], 0, Config().nsocks(99)).code(),
            collieInvalidArgument);
  EXPECT_FALSE(cc.valid());
}

// The C API's non-blocking communicator: init, refusals while it runs, then collectives, sends
// and receives and a group queued and finished through polling, finalize.
void nonBlockingRank(const collieUniqueId& id, int rank, Reporter& rep) {
  // Rank 1 comes late, so rank 0's init is surely still running when it looks.
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nb";
  collieComm_t c = nullptr;
  collieResult_t r = collieCommInitRankConfig(&c, 2, id, rank, &cfg);
  if (r != collieInProgress || c == nullptr) return rep.fail("init gave " + std::to_string(r));
  int n = 0;
  if (collieCommCount(c, &n) != collieSuccess || n != 2) rep.fail("count during init");
  std::vector<int32_t> v(5000);
  if (rank == 0) {
    collieResult_t state = collieSuccess;
    collieCommGetAsyncError(c, &state);
    if (state != collieInProgress) rep.fail("state during init " + std::to_string(state));
    r = collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr);
    if (r != collieInvalidUsage || !has(collieGetLastError(c), "init is still in progress"))
      rep.fail("allreduce during init: " + std::to_string(r) + ": " + collieGetLastError(c));
  }
  if ((r = pollDone(c)) != collieSuccess) return rep.fail("init ended " + std::to_string(r));
  // Three AllReduces, a send and receive each way outside a group, and a group: all queued.
  auto value = [](size_t k, size_t i, int r) {
    return static_cast<int32_t>((i * 7 + k * 13 + static_cast<size_t>(r) * 31) % 1000);
  };
  std::vector<std::vector<int32_t>> bufs(3, std::vector<int32_t>(20011));
  for (size_t k = 0; k < bufs.size(); ++k)
    for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = value(k, i, rank);
  std::vector<double> mine(3001, rank + 0.5), theirs(3001), gmine(77, rank * 3.0), gtheirs(77);
  const int peer = 1 - rank;
  std::vector<collieResult_t> codes;
  for (auto& b : bufs)
    codes.push_back(
        collieAllReduce(b.data(), b.data(), b.size(), collieInt32, collieMax, c, nullptr));
  codes.push_back(collieRecv(theirs.data(), theirs.size(), collieFloat64, peer, c, nullptr));
  codes.push_back(collieSend(mine.data(), mine.size(), collieFloat64, peer, c, nullptr));
  collieGroupStart();
  collieSendTagged(gmine.data(), gmine.size(), collieFloat64, peer, 3, c, nullptr);
  collieRecvTagged(gtheirs.data(), gtheirs.size(), collieFloat64, peer, 3, c, nullptr);
  codes.push_back(collieGroupEnd());
  for (size_t i = 0; i < codes.size(); ++i)
    if (codes[i] != collieInProgress)
      rep.fail("op " + std::to_string(i) + " gave " + std::to_string(codes[i]));
  if ((r = pollDone(c)) != collieSuccess)
    return rep.fail("ops ended " + std::to_string(r) + ": " + collieGetLastError(c));
  for (size_t k = 0; k < bufs.size(); ++k) {
    for (size_t i = 0; i < bufs[k].size(); ++i)
      if (bufs[k][i] != std::max(value(k, i, 0), value(k, i, 1))) {
        rep.fail("allreduce " + std::to_string(k) + " wrong at " + std::to_string(i));
        break;
      }
  }
  if (theirs != std::vector<double>(3001, peer + 0.5)) rep.fail("recv wrong");
  if (gtheirs != std::vector<double>(77, peer * 3.0)) rep.fail("group recv wrong");
  if ((r = collieCommFinalize(c)) != collieInProgress) rep.fail("finalize " + std::to_string(r));
  if ((r = pollDone(c)) != collieSuccess) rep.fail("finalize ended " + std::to_string(r));
  r = collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr);
  if (r != collieInvalidUsage) rep.fail("allreduce after finalize gave " + std::to_string(r));
  if (collieCommDestroy(c) != collieSuccess) rep.fail("destroy");
}

// The same through the C++ API.
void nonBlockingCppRank(const collieUniqueId& id, int rank, Reporter& rep) {
  Communicator cc;
  Result r = Communicator::initRank(&cc, 2, id, rank, Config().blocking(false).name("cpp"));
  if (r.code() != collieInProgress || !cc.valid()) return rep.fail("C++ init: " + r.toString());
  const auto until = Clock::now() + std::chrono::seconds(20);
  while ((r = cc.asyncError()).code() == collieInProgress && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (!r.ok()) return rep.fail("C++ init ended: " + r.toString());
  std::vector<int64_t> v(999, rank + 1);
  if ((r = cc.allreduce(View<int64_t>(v))).code() != collieInProgress)
    rep.fail("C++ allreduce: " + r.toString());
  if ((r = cc.finalize()).code() != collieInProgress) rep.fail("C++ finalize: " + r.toString());
  while ((r = cc.asyncError()).code() == collieInProgress && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (!r.ok()) rep.fail("C++ ops ended: " + r.toString());
  if (v != std::vector<int64_t>(999, 3)) rep.fail("C++ allreduce wrong");
}

TEST(CommConfig, NonBlockingInitAndOpsFinishThroughPolling) {
  const std::vector<collieUniqueId> ids = makeIds(2);
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}, {"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(2, opt, [&ids](int rank, Reporter& rep) {
    nonBlockingRank(ids[0], rank, rep);
    nonBlockingCppRank(ids[1], rank, rep);
  });
  expectAllPassed(out);
}

int threadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

// Rank 1 of each communicator never comes: an abort returns at once, and an init that times
// out reports it through polling, after which destroy works.
TEST(CommConfig, AbortDuringNonBlockingInitReturnsAtOnce) {
  const std::vector<collieUniqueId> ids = makeIds(2);
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}};
  auto out = runWorld(1, opt, [&ids](int, Reporter& rep) {
    collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.connectTimeoutMs = 30000;
    collieComm_t c = nullptr;
    const int threadsBefore = threadCount();
    if (collieCommInitRankConfig(&c, 2, ids[0], 0, &cfg) != collieInProgress)
      return rep.fail("init: " + std::string(collieGetLastError(nullptr)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    collieResult_t state = collieSuccess;
    collieCommGetAsyncError(c, &state);
    if (state != collieInProgress) rep.fail("state before abort " + std::to_string(state));
    auto t0 = Clock::now();
    if (collieCommAbort(c) != collieSuccess) rep.fail("abort failed");
    if (secondsSince(t0) > 1) rep.fail("abort took " + std::to_string(secondsSince(t0)) + " s");
    // The init the abort left behind ends soon too: its threads (set-up, store server) go.
    while (threadCount() > threadsBefore && secondsSince(t0) < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (threadCount() > threadsBefore)
      rep.fail("the aborted init still runs after " + std::to_string(secondsSince(t0)) + " s");
    // An init that times out on its own.
    cfg.connectTimeoutMs = 800;
    cfg.commName = "lonely";
    if (collieCommInitRankConfig(&c, 2, ids[1], 0, &cfg) != collieInProgress)
      return rep.fail("init 2: " + std::string(collieGetLastError(nullptr)));
    t0 = Clock::now();
    const collieResult_t r = pollDone(c);
    const std::string msg = collieGetLastError(c);
    if (r != collieTimeout) rep.fail("lonely init ended " + std::to_string(r) + ": " + msg);
    if (!has(msg, "communicator 'lonely'") || !has(msg, "ranks never arrived: 1"))
      rep.fail("lonely init's error: " + msg);
    if (secondsSince(t0) > 6) rep.fail("lonely init took " + std::to_string(secondsSince(t0)));
    std::vector<float> v(8);
    if (collieAllReduce(v.data(), v.data(), 8, collieFloat32, collieSum, c, nullptr) !=
        collieTimeout)
      rep.fail("allreduce after a failed init");
    if (collieCommDestroy(c) != collieSuccess) rep.fail("destroy after a failed init");
  });
  expectAllPassed(out);
}

// Blocking finalize: waits for the asynchronous ops issued, refuses what follows; destroy frees.
TEST(CommConfig, FinalizeFlushesThenRefusesThenDestroyFrees) {
  const std::vector<collieUniqueId> ids = makeIds(1);
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_SOCKET_IFNAME", "lo"}};
  auto out = runWorld(2, opt, [&ids](int rank, Reporter& rep) {
    Communicator cc;
    Result r = Communicator::initRank(&cc, 2, ids[0], rank, Config().name("fin").algorithm("ring"));
    if (!r.ok()) return rep.fail("init: " + r.toString());
    std::vector<float> a(100003, 1.0f + rank), b(77, 2.0f * rank);
    Work wa = cc.allreduceAsync(View<float>(a)), wb = cc.allreduceAsync(View<float>(b));
    if (!(r = cc.finalize()).ok()) rep.fail("finalize: " + r.toString());
    if (!wa.test() || !wb.test()) rep.fail("finalize returned before its ops completed");
    if (a != std::vector<float>(a.size(), 3.0f) || b != std::vector<float>(b.size(), 2.0f))
      rep.fail("async ops before finalize wrong");
    if (cc.lastAlgorithm() != "ring") rep.fail("ran " + cc.lastAlgorithm());
    r = cc.allreduce(View<float>(a));
    if (r.code() != collieInvalidUsage || !has(r.message(), "finalized"))
      rep.fail("allreduce after finalize: " + r.toString());
    if (cc.send(a.data(), 1, collieFloat32, 1 - rank).code() != collieInvalidUsage)
      rep.fail("send after finalize");
    if (cc.finalize().code() != collieInvalidUsage) rep.fail("second finalize");
    if (collieCommDestroy(cc.handle()) != collieSuccess) rep.fail("destroy");
    if (collieCommDestroy(cc.handle()) != collieInvalidUsage) rep.fail("second destroy");
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
