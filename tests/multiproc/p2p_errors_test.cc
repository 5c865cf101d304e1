// Point-to-point failures over real processes: refused arguments, a receive whose count or
// datatype disagrees with the send (an error on both ranks, never a wrong buffer), a peer that
// never posts its side (a timeout naming it), and a rank killed in a grouped exchange (every
// survivor names it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "src/base/time.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

bool has(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos;
}

void expectCode(Reporter& rep, collieComm_t comm, collieResult_t got, collieResult_t want,
                const std::string& what, const std::string& mentions) {
  const std::string msg = collieGetLastError(comm);
  if (got != want)
    rep.fail(what + ": got " + collieGetErrorString(got) + " (" + msg + "), want " +
             collieGetErrorString(want));
  else if (!has(msg, mentions))
    rep.fail(what + ": the message does not mention '" + mentions + "': " + msg);
}

void refusals(int rank, int n, Reporter& rep) {
  collieComm_t c = nullptr;
  if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
  float v[4] = {0, 0, 0, 0};
  expectCode(rep, c, collieSend(v, 4, collieFloat32, n, c, nullptr), collieInvalidArgument,
             "peer n", "out of range");
  expectCode(rep, c, collieRecv(v, 4, collieFloat32, -1, c, nullptr), collieInvalidArgument,
             "peer -1", "out of range");
  expectCode(rep, c, collieSendTagged(v, 4, collieFloat32, 0, -3, c, nullptr),
             collieInvalidArgument, "negative tag", "negative");
  expectCode(rep, c, collieRecv(nullptr, 4, collieFloat32, 0, c, nullptr), collieInvalidArgument,
             "null buffer", "NULL");
  expectCode(rep, c, collieSend(v, 4, static_cast<collieDataType_t>(99), 0, c, nullptr),
             collieInvalidArgument, "bad dtype", "datatype");
  expectCode(rep, c, collieSend(v, 4, collieFloat32, rank, c, nullptr), collieInvalidUsage,
             "self send outside a group", "group");
  collieGroupStart();
  collieRecv(v, 4, collieFloat32, rank, c, nullptr);
  expectCode(rep, nullptr, collieGroupEnd(), collieInvalidUsage, "self receive alone",
             "no matching send");
  collieGroupStart();
  int from = -1;
  expectCode(rep, c, collieRecvAny(v, 4, collieFloat32, 0, &from, c, nullptr), collieInvalidUsage,
             "recv any in a group", "group");
  collieGroupEnd();
  expectCode(rep, nullptr, collieGroupEnd(), collieInvalidUsage, "end without start",
             "collieGroupStart");
  expectCode(rep, c, collieRecvAny(v, 4, collieFloat32, 0, nullptr, c, nullptr),
             collieInvalidArgument, "recv any without peer", "NULL");
  // Still usable, and in step, after the refusals.
  std::vector<float> x(9, 1.0f);
  if (collieAllReduce(x.data(), x.data(), 9, collieFloat32, collieSum, c, nullptr) !=
          collieSuccess ||
      x[8] != static_cast<float>(n))
    rep.fail("allreduce after the refusals failed");
  rep.note("ok");
  collieCommDestroy(c);
}

TEST(P2PErrors, BadArgumentsAreRefusedAndLeaveTheCommunicatorUsable) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) { refusals(rank, 2, rep); });
  expectAllPassed(out);
}

// Rank 0 sends sendCount elements of sendType; rank 1 receives 12 floats. Both must end with
// collieInvalidUsage: rank 1 at its receive, rank 0 at its next call.
void mismatch(const char* transport, size_t sendCount, collieDataType_t sendType) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}, {"COLLIE_TRANSPORT", transport}};
  auto out = runWorld(2, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<double> buf(64, 1.0);
    if (rank == 0) {
      collieResult_t r = collieSend(buf.data(), sendCount, sendType, 1, c, nullptr);
      if (r == collieSuccess) r = collieBarrier(c);
      expectCode(rep, c, r, collieInvalidUsage, "sender", "disagree");
    } else {
      std::vector<float> got(12, -7.0f);
      expectCode(rep, c, collieRecv(got.data(), 12, collieFloat32, 0, c, nullptr),
                 collieInvalidUsage, "receiver", "peer rank 0");
      for (float g : got)
        if (g != -7.0f && g != 1.0f) rep.fail("a mismatched receive wrote garbage");
    }
    rep.note("ok");
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

TEST(P2PErrors, CountMismatchFailsBothRanksOverTcp) { mismatch("tcp", 10, collieFloat32); }
TEST(P2PErrors, CountMismatchFailsBothRanksOverShm) { mismatch("shm", 13, collieFloat32); }
TEST(P2PErrors, DtypeMismatchFailsBothRanksOverUcx) { mismatch("ucx", 12, collieInt32); }

// A receive (or a send too large for the buffers between the ranks) whose peer never posts the
// other side times out, naming the peer, the local rank and the call.
void neverPosted(bool receive, const char* transport) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "1500"}, {"COLLIE_TRANSPORT", transport}};
  auto out = runWorld(2, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
      rep.note("ok");
      collieCommAbort(c);
      return;
    }
    std::vector<float> buf(receive ? 16 : 16 << 20, 1.0f);
    const uint64_t t0 = nowNs();
    collieResult_t r = receive ? collieRecv(buf.data(), buf.size(), collieFloat32, 1, c, nullptr)
                               : collieSend(buf.data(), buf.size(), collieFloat32, 1, c, nullptr);
    const double ms = static_cast<double>(nowNs() - t0) / 1e6;
    const std::string msg = collieGetLastError(c);
    if (r != collieTimeout) rep.fail(std::string("got ") + collieGetErrorString(r) + ": " + msg);
    for (const char* w : {"peer rank 1", "on rank 0", receive ? "recv" : "send"})
      if (!has(msg, w)) rep.fail(std::string("the error does not name '") + w + "': " + msg);
    if (ms > 1500 + 2500) rep.fail("timed out after " + std::to_string(ms) + " ms");
    rep.note("ok");
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

TEST(P2PErrors, ReceiveNobodySendsTimesOutNamingThePeer) { neverPosted(true, "tcp"); }
TEST(P2PErrors, SendNobodyReceivesTimesOutNamingThePeer) { neverPosted(false, "shm"); }

// Rank 2 of 3 dies of SIGKILL while the ranks exchange 64 MiB around a ring in groups.
void killedInGroup(const char* transport) {
  constexpr int kTimeoutMs = 3000, kVictim = 2;
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", std::to_string(kTimeoutMs)}, {"COLLIE_TRANSPORT", transport}};
  auto out = runWorld(3, opt, [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<float> out(16 << 20, 1.0f), in(out.size());
    if (rank == kVictim)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        kill(getpid(), SIGKILL);
      }).detach();
    for (int iter = 0; iter < 1000; ++iter) {
      const uint64_t t0 = nowNs();
      collieGroupStart();
      collieSend(out.data(), out.size(), collieFloat32, (rank + 1) % 3, c, nullptr);
      collieRecv(in.data(), in.size(), collieFloat32, (rank + 2) % 3, c, nullptr);
      if (collieGroupEnd() == collieSuccess) continue;
      const double ms = static_cast<double>(nowNs() - t0) / 1e6;
      const std::string msg = collieGetLastError(c);
      for (std::string w : {std::string("peer rank 2"), "on rank " + std::to_string(rank)})
        if (!has(msg, w)) rep.fail("the error does not name '" + w + "': " + msg);
      if (ms > kTimeoutMs + 2000) rep.fail("failed after " + std::to_string(ms) + " ms");
      rep.note("ok");
      collieCommAbort(c);
      return;
    }
    rep.fail("every exchange succeeded although a rank was killed");
  });
  for (const auto& o : out) {
    if (o.rank == kVictim) continue;
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << ":\n" << o.output;
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
    EXPECT_EQ(o.notes.size(), 1u) << "rank " << o.rank << " did not report its error";
  }
}

TEST(P2PErrors, SigkillInAGroupedExchangeIsNamedByEverySurvivorOverTcp) { killedInGroup("tcp"); }
TEST(P2PErrors, SigkillInAGroupedExchangeIsNamedByEverySurvivorOverShm) { killedInGroup("shm"); }

}  // namespace
}  // namespace testing
}  // namespace collie
