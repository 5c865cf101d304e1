// Bad input and misuse: every case gets its documented code and a message, never a crash or a
// hang. Ranks that disagree on count or dtype get an error on every rank.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "src/base/log.h"
#include "src/base/time.h"
#include "src/core/bootstrap/bootstrap.h"
#include "src/memory/memory_kind.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

// A one-rank communicator made through the unique-id path, for local argument checks.
collieComm_t oneRankComm() {
  collieUniqueId id;
  EXPECT_EQ(collieGetUniqueId(&id), collieSuccess) << collieGetLastError(nullptr);
  collieComm_t c = nullptr;
  EXPECT_EQ(collieCommInitRank(&c, 1, id, 0), collieSuccess) << collieGetLastError(nullptr);
  return c;
}

class ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("COLLIE_SOCKET_IFNAME", "lo", 1); }
};

TEST_F(ErrorsTest, BadArgumentsGetInvalidArgumentWithMessage) {
  collieComm_t c = oneRankComm();
  ASSERT_NE(c, nullptr);
  float buf[4] = {1, 2, 3, 4};
  auto expectErr = [&](collieResult_t got, collieResult_t want, const char* needle) {
    EXPECT_EQ(got, want) << collieGetErrorString(got);
    EXPECT_NE(std::string(collieGetLastError(c)).find(needle), std::string::npos)
        << "message: " << collieGetLastError(c);
  };
  expectErr(collieAllReduce(nullptr, buf, 4, collieFloat32, collieSum, c, nullptr),
            collieInvalidArgument, "sendbuff is NULL");
  expectErr(collieAllReduce(buf, nullptr, 4, collieFloat32, collieSum, c, nullptr),
            collieInvalidArgument, "recvbuff is NULL");
  expectErr(collieAllReduce(buf, buf, SIZE_MAX / 2, collieFloat32, collieSum, c, nullptr),
            collieInvalidArgument, "overflows");
  expectErr(collieAllReduce(buf, buf, SIZE_MAX, collieInt8, collieSum, c, nullptr),
            collieInvalidArgument, "overflows");
  expectErr(collieAllReduce(buf, buf, 4, static_cast<collieDataType_t>(42), collieSum, c, nullptr),
            collieInvalidArgument, "unknown datatype");
  expectErr(collieAllReduce(buf, buf, 4, static_cast<collieDataType_t>(-1), collieSum, c, nullptr),
            collieInvalidArgument, "unknown datatype");
  expectErr(collieAllReduce(buf, buf, 4, collieFloat32, static_cast<collieRedOp_t>(17), c, nullptr),
            collieInvalidArgument, "reduction op 17 is not a live op");
  expectErr(collieAllReduce(buf, buf + 1, 3, collieFloat32, collieSum, c, nullptr),
            collieInvalidArgument, "overlap");
  // Host memory ignores the stream (device memory would be enqueued on it).
  int fakeStream = 0;
  float viaStream[4];
  EXPECT_EQ(collieAllReduce(buf, viaStream, 4, collieFloat32, collieSum, c, &fakeStream),
            collieSuccess);
  EXPECT_EQ(viaStream[3], buf[3]);
  // Null buffers with count 0 are fine, as in NCCL.
  EXPECT_EQ(collieAllReduce(nullptr, nullptr, 0, collieFloat32, collieSum, c, nullptr),
            collieSuccess);
  // After all that the communicator still works.
  float out[4];
  EXPECT_EQ(collieAllReduce(buf, out, 4, collieFloat32, collieMax, c, nullptr), collieSuccess);
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST_F(ErrorsTest, DestroyedAndNullCommunicatorsAreRejected) {
  collieComm_t c = oneRankComm();
  ASSERT_NE(c, nullptr);
  float buf[1] = {1};
  // A call first: this thread has then found c live once (and may remember it), and another
  // thread destroys it.
  ASSERT_EQ(collieAllReduce(buf, buf, 1, collieFloat32, collieSum, c, nullptr), collieSuccess);
  collieResult_t destroyed = collieInternalError;
  std::thread([&] { destroyed = collieCommDestroy(c); }).join();
  ASSERT_EQ(destroyed, collieSuccess);
  EXPECT_EQ(collieAllReduce(buf, buf, 1, collieFloat32, collieSum, c, nullptr), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("not a live communicator"),
            std::string::npos);
  EXPECT_EQ(collieCommDestroy(c), collieInvalidUsage);
  EXPECT_EQ(collieCommAbort(c), collieInvalidUsage);
  int n = 0;
  EXPECT_EQ(collieCommCount(c, &n), collieInvalidUsage);
  EXPECT_EQ(collieCommCount(nullptr, &n), collieInvalidArgument);
  EXPECT_EQ(collieAllReduce(buf, buf, 1, collieFloat32, collieSum, nullptr, nullptr),
            collieInvalidArgument);
  EXPECT_EQ(collieCommDestroy(nullptr), collieInvalidArgument);
}

TEST_F(ErrorsTest, BadInitArguments) {
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  collieComm_t c = nullptr;
  EXPECT_EQ(collieCommInitRank(&c, 2, id, 2), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("out of range"), std::string::npos);
  EXPECT_EQ(collieCommInitRank(&c, 2, id, -1), collieInvalidArgument);
  EXPECT_EQ(collieCommInitRank(&c, 0, id, 0), collieInvalidArgument);
  EXPECT_EQ(collieCommInitRank(nullptr, 1, id, 0), collieInvalidArgument);
  collieUniqueId garbage;
  memset(&garbage, 0x7f, sizeof(garbage));
  EXPECT_EQ(collieCommInitRank(&c, 1, garbage, 0), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("unique id"), std::string::npos);
  EXPECT_EQ(collieGetUniqueId(nullptr), collieInvalidArgument);
  int v = 0;
  EXPECT_EQ(collieGetVersion(&v), collieSuccess);
  EXPECT_EQ(v, COLLIE_VERSION_CODE);
  EXPECT_STREQ(collieGetErrorString(collieTimeout), "operation timed out");
}

TEST_F(ErrorsTest, InitFromEnvWithoutEnvironmentIsAClearError) {
  WorldOptions opt;
  opt.setRankEnv = false;
  auto out = runWorld(1, opt, [](int, Reporter& rep) {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("SLURM_PROCID");
    unsetenv("PMI_RANK");
    unsetenv("PMIX_RANK");
    collieComm_t c = nullptr;
    collieResult_t r = collieCommInitFromEnv(&c);
    if (r != collieInvalidArgument) rep.fail("want invalid argument, got " + std::to_string(r));
    if (std::string(collieGetLastError(nullptr)).find("RANK") == std::string::npos)
      rep.fail(std::string("message does not say RANK: ") + collieGetLastError(nullptr));
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    unsetenv("MASTER_ADDR");
    if (collieCommInitFromEnv(&c) != collieInvalidArgument ||
        std::string(collieGetLastError(nullptr)).find("MASTER_ADDR") == std::string::npos)
      rep.fail(std::string("missing MASTER_ADDR: ") + collieGetLastError(nullptr));
  });
  expectAllPassed(out);
}

// Ranks calling with different counts or dtypes: every rank returns an error (no hang, no
// wrong answer); ranks that see the mismatch say collieInvalidUsage, and the rest learn it from
// them.
// transport: COLLIE_TRANSPORT (null: the automatic choice); oddCount: the odd rank's count.
void disagree(int n, int oddRank, bool byDtype, const char* transport = nullptr,
              size_t oddCount = 2048) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}};
  if (transport != nullptr) opt.env.push_back({"COLLIE_TRANSPORT", transport});
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<int32_t> buf(4096, 1);
    size_t count = (!byDtype && rank == oddRank) ? oddCount : 4096;
    collieDataType_t dt = (byDtype && rank == oddRank) ? collieInt32 : collieFloat32;
    Deadline d = Deadline::afterMs(10000);
    collieResult_t r = collieAllReduce(buf.data(), buf.data(), count, dt, collieSum, c, nullptr);
    std::string msg = collieGetLastError(c);
    if (r == collieSuccess) rep.fail("allreduce succeeded although ranks disagree");
    if (d.expired()) rep.fail("took longer than 10 s to fail");
    if (msg.find("disagree") == std::string::npos) rep.fail("message lacks 'disagree': " + msg);
    rep.note(std::to_string(r));
    collieCommAbort(c);
  });
  expectAllPassed(out);
  int usage = 0;
  for (const auto& o : out) {
    ASSERT_EQ(o.notes.size(), 1u) << o.output;
    int code = std::stoi(o.notes[0]);
    EXPECT_TRUE(code == collieInvalidUsage || code == collieRemoteError) << code;
    usage += code == collieInvalidUsage;
  }
  EXPECT_GE(usage, 1);
}

TEST_F(ErrorsTest, RanksDisagreeOnCount2) { disagree(2, 1, false); }

// One rank calls another collective, or names another root, over each transport: an error on
// every rank, never a wrong answer.
void disagreeOnCall(int n, const char* transport, bool byRoot) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}, {"COLLIE_TRANSPORT", transport}};
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) {
      // Init ends with collective steps (over tcp, the link probe): a rank still finishing
      // them when its peers have already failed the next call learns of that failure in init.
      std::string msg = collieGetLastError(nullptr);
      if (msg.find("disagree") == std::string::npos)
        rep.fail("init failed, and not for the disagreement: " + msg);
      return;
    }
    std::vector<float> buf(4096 * n, 1.0f), all(4096 * n);
    collieResult_t r;
    if (byRoot)
      r = collieBroadcast(buf.data(), buf.data(), 4096, collieFloat32, rank == 1 ? 1 : 0, c,
                          nullptr);
    else if (rank == 1)
      r = collieAllGather(buf.data(), all.data(), 4096, collieFloat32, c, nullptr);
    else
      r = collieBroadcast(buf.data(), buf.data(), 4096, collieFloat32, 0, c, nullptr);
    // A rank that only sends (a broadcast root) may finish before a peer sees the mismatch;
    // then its next call fails.
    if (r == collieSuccess) r = collieBarrier(c);
    std::string msg = collieGetLastError(c);
    if (r == collieSuccess)
      rep.fail("the call and the next succeeded although ranks disagree");
    else if (msg.find("disagree") == std::string::npos && msg.find("aborted") == std::string::npos)
      rep.fail("message names neither the disagreement nor the peer that saw it: " + msg);
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

TEST_F(ErrorsTest, RanksDisagreeOnTheCollectiveOverTcp) { disagreeOnCall(3, "tcp", false); }
TEST_F(ErrorsTest, RanksDisagreeOnTheCollectiveOverShm) { disagreeOnCall(3, "shm", false); }
TEST_F(ErrorsTest, RanksDisagreeOnTheRootOverTcp) { disagreeOnCall(3, "tcp", true); }
TEST_F(ErrorsTest, RanksDisagreeOnTheRootOverShm) { disagreeOnCall(3, "shm", true); }
#ifdef COLLIE_HAVE_UCX
// Over ucx a frame of more than 4 KiB is two messages (header, payload), a smaller one is one:
// a disagreement between two large frames, and between a small and a large one.
TEST_F(ErrorsTest, RanksDisagreeOnCountOverUcx) {
  disagree(2, 1, false, "ucx", 2048);
  disagree(2, 1, false, "ucx", 256);
}
TEST_F(ErrorsTest, RanksDisagreeOnTheCollectiveOverUcx) { disagreeOnCall(3, "ucx", false); }
#endif
TEST_F(ErrorsTest, RanksDisagreeOnCount3) { disagree(3, 2, false); }
TEST_F(ErrorsTest, RanksDisagreeOnDtype4) { disagree(4, 0, true); }

TEST_F(ErrorsTest, DisagreeingWorldSizeIsInvalidUsage) {
  WorldOptions opt;
  opt.env = {{"COLLIE_CONNECT_TIMEOUT_MS", "5000"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    if (rank == 1) setenv("WORLD_SIZE", "3", 1);
    collieComm_t c = nullptr;
    collieResult_t r = collieCommInitFromEnv(&c);
    std::string msg = collieGetLastError(nullptr);
    if (r == collieSuccess) return rep.fail("init succeeded with different world sizes");
    if (rank == 0 &&
        (r != collieInvalidUsage || msg.find("agree on the size") == std::string::npos))
      rep.fail("rank 0: " + std::to_string(r) + " " + msg);
  });
  expectAllPassed(out);
}

TEST_F(ErrorsTest, MissingRankAtRendezvousIsNamed) {
  WorldOptions opt;
  opt.env = {{"COLLIE_CONNECT_TIMEOUT_MS", "1500"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    if (rank == 2) return;  // never arrives
    Deadline d = Deadline::afterMs(1500 + 4000);
    collieComm_t c = nullptr;
    collieResult_t r = collieCommInitFromEnv(&c);
    std::string msg = collieGetLastError(nullptr);
    // Rank 0 serves the store: it times out. The others time out too, or see the store go
    // away when rank 0 gives up a moment before them; either way they name rank 2.
    if (r != collieTimeout && !(rank != 0 && r == collieRemoteError))
      rep.fail("want timeout, got " + std::to_string(r) + ": " + msg);
    if (msg.find("never arrived: 2") == std::string::npos) rep.fail("rank 2 not named: " + msg);
    if (d.expired()) rep.fail("took too long");
  });
  expectAllPassed(out);
}

TEST_F(ErrorsTest, SilentPeerTimesOutNamingIt) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "1000"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // never calls
      collieCommDestroy(c);
      return;
    }
    float x[1024] = {};
    Deadline d = Deadline::afterMs(1000 + 2000);
    collieResult_t r = collieAllReduce(x, x, 1024, collieFloat32, collieSum, c, nullptr);
    std::string msg = collieGetLastError(c);
    if (r != collieTimeout) rep.fail("want timeout, got " + std::to_string(r) + ": " + msg);
    if (msg.find("peer rank 0") == std::string::npos || msg.find("on rank 1") == std::string::npos)
      rep.fail("message lacks the ranks: " + msg);
    if (d.expired()) rep.fail("error came later than deadline + 2 s");
    // The communicator stays failed: the next op says so at once.
    if (collieAllReduce(x, x, 1024, collieFloat32, collieSum, c, nullptr) == collieSuccess)
      rep.fail("op after a failure succeeded");
    collieResult_t async = collieSuccess;
    collieCommGetAsyncError(c, &async);
    if (async != collieTimeout) rep.fail("async error is " + std::to_string(async));
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

TEST_F(ErrorsTest, AbortUnblocksAPendingAllReduce) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      collieCommDestroy(c);
      return;
    }
    std::thread aborter([c] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      collieCommAbort(c);
    });
    float x[64] = {};
    Deadline d = Deadline::afterMs(2000);
    collieResult_t r = collieAllReduce(x, x, 64, collieFloat32, collieSum, c, nullptr);
    aborter.join();
    if (r == collieSuccess) rep.fail("allreduce succeeded after abort");
    if (d.expired()) rep.fail("abort did not unblock the op within 2 s");
  });
  expectAllPassed(out);
}

// A peer that destroyed its communicator and lives on: over shared memory the others waited
// for it until their deadline. Its closed connection now says at once that it is gone.
void destroyedPeerIsNamedAtOnce(int which, const char* transport = "shm", const char* tls = "") {
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"}, {"COLLIE_TRANSPORT", transport}};
  if (*tls != '\0') opt.env.emplace_back("UCX_TLS", tls);
  auto out = runWorld(3, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    if (rank == 2) {  // alive until both others have returned (or 40 s)
      collieCommDestroy(c);
      char got[2];
      size_t n = 0;
      pollfd p{done[0], POLLIN, 0};
      while (n < sizeof(got) && poll(&p, 1, 40000) == 1) {
        const ssize_t r = read(done[0], got + n, sizeof(got) - n);
        if (r <= 0) break;
        n += static_cast<size_t>(r);
      }
      return;
    }
    std::vector<float> x(1024, 1.0f);
    const collieResult_t r =
        which == 0
            ? collieAllReduce(x.data(), x.data(), x.size(), collieFloat32, collieSum, c, nullptr)
        : which == 1 ? collieBroadcast(x.data(), x.data(), x.size(), collieFloat32, 0, c, nullptr)
                     : collieBarrier(c);
    const std::string msg = collieGetLastError(c);
    if (write(done[1], "x", 1) != 1) rep.fail("pipe");
    if (r != collieRemoteError)
      rep.fail("want the peer's loss (collieRemoteError), got " + std::to_string(r) + ": " + msg);
    if (msg.find("lost peer rank 2") == std::string::npos ||
        msg.find("destroyed its communicator") == std::string::npos)
      rep.fail("the error does not say that peer rank 2 closed: " + msg);
    if (msg.find("on rank " + std::to_string(rank)) == std::string::npos)
      rep.fail("the error does not name the local rank: " + msg);
    collieCommDestroy(c);
  });
  close(done[0]);
  close(done[1]);
  expectAllPassed(out);
}

TEST_F(ErrorsTest, APeerThatDestroyedItsCommunicatorIsNamedAtOnceInAnAllReduceOverShm) {
  destroyedPeerIsNamedAtOnce(0);
}
TEST_F(ErrorsTest, APeerThatDestroyedItsCommunicatorIsNamedAtOnceInABroadcastOverShm) {
  destroyedPeerIsNamedAtOnce(1);
}
TEST_F(ErrorsTest, APeerThatDestroyedItsCommunicatorIsNamedAtOnceInABarrierOverShm) {
  destroyedPeerIsNamedAtOnce(2);
}
#ifdef COLLIE_HAVE_UCX
// Over ucx the leaving rank's goodbye says so, with its message counts: a call that waits for a
// message it never sent fails at once, over UCX's tcp and over its shared memory alike. (Not the
// broadcast: its other ranks wait on nothing from rank 2, and a send to it may complete into its
// worker before the goodbye arrives.)
TEST_F(ErrorsTest, APeerThatDestroyedItsCommunicatorIsNamedAtOnceOverUcx) {
  destroyedPeerIsNamedAtOnce(0, "ucx", "tcp");
  destroyedPeerIsNamedAtOnce(0, "ucx", "posix,cma");
  destroyedPeerIsNamedAtOnce(2, "ucx", "tcp");
}

// A rank whose secret differs (COLLIE_SECRET) cannot join a job over ucx: init fails on every
// rank with an error that says why, within the deadline, instead of a hang. (A peer that gets
// past the store with another secret is refused by the UCX hello: tests/unit/ucx_hello_test.cc.)
TEST_F(ErrorsTest, ARankWithAnotherSecretFailsInitOverUcx) {
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_TIMEOUT_MS", "4000"}, {"COLLIE_TRANSPORT", "ucx"}, {"UCX_TLS", "tcp"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    setenv("COLLIE_SECRET", rank == 2 ? "another job" : "this job", 1);
    collieComm_t c = nullptr;
    const uint64_t t0 = nowNs();
    const collieResult_t r = collieCommInitFromEnv(&c);
    const int64_t ms = static_cast<int64_t>((nowNs() - t0) / 1000000);
    const std::string msg = collieGetLastError(nullptr);
    rep.note("init " + std::to_string(r) + " after " + std::to_string(ms) + " ms: " + msg);
    if (r == collieSuccess) return rep.fail("init succeeded although rank 2's secret differs");
    if (ms > 12000) rep.fail("init failed only after " + std::to_string(ms) + " ms");
    // The stranger is refused at the door (the store); the others name the rank that never came.
    const std::string want = rank == 2 ? "refused this rank" : "never arrived: 2";
    if (msg.find(want) == std::string::npos)
      rep.fail("the error does not say '" + want + "': " + msg);
  });
  for (const auto& o : out) {
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << ":\n" << o.output;
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
  }
}
#endif

// After a timeout the op listens for its peers' aborts (up to 1-3 s) to name the silent ones;
// an abort from another thread in that time ends it, and the op's error says so.
TEST_F(ErrorsTest, AbortCutsShortTheListeningAfterATimeout) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "1000"}};  // a grace of 1 s
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    Communicator comm;
    if (!Communicator::initFromEnv(&comm).ok()) return rep.fail("init");
    if (rank == 1) {  // never calls: silent through rank 0's grace
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
      return;
    }
    std::vector<float> x(1024, 1.0f);
    Work w = comm.allreduceAsync(x.data(), x.data(), x.size(), collieFloat32, collieSum);
    // The failure is recorded as the op fails, before it listens: the abort comes within it.
    Deadline d = Deadline::afterMs(10000);
    while (std::string(collieGetLastError(comm.handle())).empty() && !d.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (d.expired()) return rep.fail("the op did not fail");
    comm.abort();
    Result r = w.wait(std::chrono::milliseconds(10000));
    if (r.code() != collieTimeout)
      rep.fail("want the timeout, got " + std::to_string(r.code()) + ": " + r.message());
    if (r.message().find("cut short by collieCommAbort") == std::string::npos ||
        r.message().find("sent no word") != std::string::npos)
      rep.fail("the abort did not end the listening: " + r.message());
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie

namespace collie {
namespace testing {
namespace {

#ifdef COLLIE_HAVE_UCX
constexpr const char* kNotATransport = "bogus";
#else
constexpr const char* kNotATransport = "ucx";  // a build without UCX has no such transport
#endif

// A rank's COLLIE_DEBUG is its own, though the process that forked it logged first with its own
// (the settings are read once): run as one binary, the tests after the first one that logged
// lost their ranks' INFO lines.
TEST(EnvInit, ARankLogsAtItsOwnLevelAfterItsParentLogged) {
  unsetenv("COLLIE_DEBUG");
  logReload();
  ASSERT_FALSE(logEnabled(LogLevel::kInfo, kLogInit));  // WARN, kept
  WorldOptions opt;
  opt.env = {{"COLLIE_DEBUG", "INFO"}, {"COLLIE_DEBUG_SUBSYS", "INIT"}};
  auto out = runWorld(1, opt, [](int, Reporter& rep) {
    if (!logEnabled(LogLevel::kInfo, kLogInit)) rep.fail("INFO is off");
    if (logEnabled(LogLevel::kInfo, kLogColl)) rep.fail("COLL is on");
  });
  expectAllPassed(out);
}

// Also a setting read only at the first call that needs it (before, COLLIE_SHM_CMA was refused
// at the first large AllReduce, which then failed the communicator).
TEST(EnvInit, UnknownAlgorithmOrTransportIsRejectedAtInit) {
  for (auto kv :
       std::vector<std::pair<std::string, std::string>>{{"COLLIE_ALGO", "bogus"},
                                                        {"COLLIE_TRANSPORT", kNotATransport},
                                                        {"COLLIE_BACKEND", "bogus"},
                                                        {"COLLIE_SHM_CMA", "bogus"}}) {
    WorldOptions opt;
    opt.env = {kv};
    auto out = runWorld(1, opt, [kv](int, Reporter& rep) {
      collieComm_t c = nullptr;
      collieResult_t r = collieCommInitFromEnv(&c);
      std::string msg = collieGetLastError(nullptr);
      if (r != collieInvalidArgument || msg.find(kv.first + "=" + kv.second) == std::string::npos)
        rep.fail(std::to_string(r) + ": " + msg);
    });
    expectAllPassed(out);
  }
}

// Without a GPU (or without NCCL in the build) the NCCL backend cannot start: init says so.
TEST(EnvInit, NcclBackendWithoutAGpuFailsAtInitSayingWhy) {
  std::string why;
  if (cudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present: the GPU tests cover this";
  WorldOptions opt;
  opt.env = {{"COLLIE_BACKEND", "nccl"}};
  auto out = runWorld(1, opt, [](int, Reporter& rep) {
    collieComm_t c = nullptr;
    collieResult_t r = collieCommInitFromEnv(&c);
    std::string msg = collieGetLastError(nullptr);
    if (r == collieSuccess || msg.find("COLLIE_BACKEND=nccl") == std::string::npos)
      rep.fail(std::to_string(r) + ": " + msg);
  });
  expectAllPassed(out);
}

// What mpirun puts in the environment (no MASTER_*): ranks on one host find each other through
// a store on a port derived from the job id, each rank doing the same sum.
void mpirunStyleEnv(const std::string& job, int rank, int size) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  setenv("OMPI_COMM_WORLD_RANK", std::to_string(rank).c_str(), 1);
  setenv("OMPI_COMM_WORLD_SIZE", std::to_string(size).c_str(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(size).c_str(), 1);
  setenv("OMPI_MCA_ess_base_jobid", job.c_str(), 1);
}

void mpirunStyleRank(const std::string& job, int rank, Reporter& rep) {
  mpirunStyleEnv(job, rank, 3);
  collieComm_t c = nullptr;
  if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail(collieGetLastError(nullptr));
  int r = -1;
  collieCommUserRank(c, &r);
  if (r != rank) rep.fail("rank " + std::to_string(r));
  int64_t v = rank + 1;
  if (collieAllReduce(&v, &v, 1, collieInt64, collieSum, c, nullptr) != collieSuccess || v != 6)
    rep.fail("allreduce under mpirun-style env");
  collieCommDestroy(c);
}

TEST(EnvInit, MpirunStyleEnvironmentOnOneHost) {
  WorldOptions opt;
  opt.setRankEnv = false;
  const std::string job = std::to_string(1000000 + getpid());
  auto out = runWorld(3, opt, [job](int rank, Reporter& rep) { mpirunStyleRank(job, rank, rep); });
  expectAllPassed(out);
}

// A second communicator from the environment that made one still alive: every rank fails at
// once saying why, under mpirun-style and torchrun-style variables alike, rather than waiting
// out the rendezvous deadline.
TEST(EnvInit, ASecondCommunicatorFromOneEnvironmentFailsOnEveryRankSayingWhy) {
  for (bool mpirun : {true, false}) {
    SCOPED_TRACE(mpirun ? "mpirun-style" : "torchrun-style");
    WorldOptions opt;
    opt.setRankEnv = !mpirun;
    opt.env = {{"COLLIE_CONNECT_TIMEOUT_MS", "20000"}};
    const std::string job = std::to_string(4000000 + getpid());
    auto out = runWorld(3, opt, [job, mpirun](int rank, Reporter& rep) {
      if (mpirun) mpirunStyleEnv(job, rank, 3);
      collieComm_t first = nullptr, second = nullptr;
      if (collieCommInitFromEnv(&first) != collieSuccess)
        return rep.fail(std::string("first: ") + collieGetLastError(nullptr));
      const collieResult_t r = collieCommInitFromEnv(&second);
      const std::string msg = collieGetLastError(nullptr);
      if (r != collieInvalidUsage) rep.fail("want invalid usage, got " + std::to_string(r));
      if (msg.find("made from the same environment") == std::string::npos)
        rep.fail("message: " + msg);
      int64_t v = rank;
      if (collieAllReduce(&v, &v, 1, collieInt64, collieSum, first, nullptr) != collieSuccess ||
          v != 3)
        rep.fail("the first communicator after the second failed");
      collieCommDestroy(first);
    });
    expectAllPassed(out);
  }
}

// Ranks that run one call by different algorithms (collieCommSetAlgorithm, COLLIE_ALGO) fail
// on every rank with the reason, also where some run it through shared memory without
// messages: before, the shm_direct ranks waited for flags and the others for frames until the
// deadline.
TEST(Errors, RanksThatRunACallByDifferentAlgorithmsFailSayingSo) {
  struct Case {
    const char* transport;
    const char* most;  // ranks 0 and 1
    const char* last;  // rank 2
  };
  for (const Case& k : {Case{"shm", "shm_direct", "ring"}, Case{"shm", "ring", "shm_direct"},
                        Case{"tcp", "ring", "tree"}}) {
    SCOPED_TRACE(std::string(k.transport) + ": " + k.most + " against " + k.last);
    WorldOptions opt;
    opt.env = {{"COLLIE_TRANSPORT", k.transport}, {"COLLIE_TIMEOUT_MS", "20000"}};
    auto out = runWorld(3, opt, [k](int rank, Reporter& rep) {
      collieComm_t c = nullptr;
      if (collieCommInitFromEnv(&c) != collieSuccess)
        return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
      collieCommSetAlgorithm(c, rank == 2 ? k.last : k.most);
      std::vector<int32_t> v(1000, rank);
      if (collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr) ==
          collieSuccess)
        return rep.fail("succeeded");
      const std::string msg = collieGetLastError(c);
      if (msg.find("disagree") == std::string::npos) rep.fail("message: " + msg);
      collieCommAbort(c);
    });
    expectAllPassed(out);
  }
}

// A socket buffer under a loopback segment is raised to 64 KiB: a smaller one lets the
// receiver hold its window back, and a large transfer stalls.
TEST(Settings, ATinySocketBufferIsRaisedSoLargeTransfersFlow) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TRANSPORT", "tcp"}, {"COLLIE_SOCKET_BUFFER", "4K"},
             {"COLLIE_NSOCKS", "1"},      {"COLLIE_ALGO", "ring"},
             {"COLLIE_TUNER_PROBE", "0"}, {"COLLIE_TIMEOUT_MS", "20000"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    std::vector<int32_t> v((4 << 20) + 3, rank + 1);
    if (collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr) !=
        collieSuccess)
      return rep.fail(collieGetLastError(c));
    if (v.front() != 3 || v.back() != 3) rep.fail("wrong sum");
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  for (const RankOutcome& r : out)
    EXPECT_NE(r.output.find("COLLIE_SOCKET_BUFFER=4096 is under the least"), std::string::npos)
        << r.output;
}

// A listener on 127.0.0.1:port that never accepts nor answers; -1 where the port is taken.
int silentListener(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The first two ports derived from the job id are held by another program, which takes
// connections and never answers: rank 0 serves on the third, and the others find it there.
// A job id (from base) whose first two derived store ports this process now holds with silent
// listeners (their fds in held), and whose third was free; "" where none could be found.
std::string jobWithTwoPortsHeld(int base, std::vector<int>* held) {
  for (int i = 0; i < 100; ++i) {
    for (int fd : *held) close(fd);
    held->clear();
    const std::string job = std::to_string(base + 100 * getpid() + i);
    const std::vector<int> ports = jobStorePorts(job);
    for (int k = 0; k < 2; ++k) {
      const int fd = silentListener(ports[k]);
      if (fd < 0) break;
      held->push_back(fd);
    }
    // And the third free, for the store: a port in use elsewhere would move it on.
    const int third = held->size() == 2 ? silentListener(ports[2]) : -1;
    if (third >= 0) {
      close(third);
      return job;
    }
  }
  return "";
}

TEST(EnvInit, MpirunStyleEnvironmentWithTheDerivedPortsTaken) {
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_CONNECT_TIMEOUT_MS", "60000"}};
  ASSERT_EQ(jobStorePorts("1").size(), kJobStorePorts);
  std::vector<int> held;
  const std::string job = jobWithTwoPortsHeld(2000000, &held);
  ASSERT_FALSE(job.empty()) << "no job id whose first two ports could be held";
  auto out = runWorld(3, opt, [job](int rank, Reporter& rep) { mpirunStyleRank(job, rank, rep); });
  expectAllPassed(out);
  for (int fd : held) close(fd);
}

// An init that fails after the store was found names the port it serves on, on every rank:
// here a world of 4 where 3 ranks come.
TEST(EnvInit, MpirunStyleInitErrorsNameThePortTheStoreServesOn) {
  WorldOptions opt;
  opt.setRankEnv = false;
  opt.env = {{"COLLIE_CONNECT_TIMEOUT_MS", "8000"}};
  std::vector<int> held;
  const std::string job = jobWithTwoPortsHeld(3000000, &held);
  ASSERT_FALSE(job.empty()) << "no job id whose first two ports could be held";
  const std::vector<int> ports = jobStorePorts(job);
  auto out = runWorld(3, opt, [job, ports](int rank, Reporter& rep) {
    mpirunStyleEnv(job, rank, 4);
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) == collieSuccess) return rep.fail("init of 3 of 4 succeeded");
    const std::string msg = collieGetLastError(nullptr);
    if (msg.find("ranks never arrived: 3") == std::string::npos ||
        msg.find(":" + std::to_string(ports[2]) + ")") == std::string::npos)
      rep.fail("want the store at port " + std::to_string(ports[2]) + ": " + msg);
  });
  expectAllPassed(out);
  for (int fd : held) close(fd);
}

}  // namespace
}  // namespace testing
}  // namespace collie
