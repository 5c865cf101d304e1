// The smallest AllReduces of shm_direct travel in one cache line with their tag (up to 48 bytes;
// larger ones take the flag-guarded one-shot path), and so do its barriers, without data. Every
// dtype and op at counts on either side of that bound, in place and out of place, exact against the
// reference; and ranks whose counts disagree, inside the line or across the bound, get an error on
// every rank, never a hang.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/time.h"
#include "tests/harness/allreduce_cases.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

WorldOptions lineWorld() {
  WorldOptions opt;
  opt.env = {
      {"COLLIE_TIMEOUT_MS", "20000"}, {"COLLIE_TRANSPORT", "shm"}, {"COLLIE_ALGO", "shm_direct"}};
  return opt;
}

// Counts whose bytes fall inside, at and past 48 for elements of 1, 2, 4 and 8 bytes.
const std::vector<size_t> kCounts = {1, 2, 3, 5, 6, 7, 11, 12, 13, 23, 24, 25, 47, 48, 49, 64};

void everyCaseOnEitherSide(int n) {
  auto out = runWorld(n, lineWorld(), [n](int rank, Reporter& rep) {
    collieComm_t comm = nullptr;
    if (collieCommInitFromEnv(&comm) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    if (!runAllReduceCases(comm, rank, n, kCounts, CaseTypes::kAll, rep)) return;
    const char* algo = "";
    collieCommLastAlgorithm(comm, &algo);
    if (std::string(algo) != "shm_direct") rep.fail(std::string("ran ") + algo);
    if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
  });
  expectAllPassed(out);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out[0].notes.size(), 1u);
  EXPECT_EQ(out[0].notes[0],
            "cases " + std::to_string(kCounts.size() * kMatrixDtypes * collieNumOps * 2));
}

TEST(ShmLine, EveryDtypeOpAndCountAroundTheLineIsExactOn2Ranks) { everyCaseOnEitherSide(2); }
TEST(ShmLine, EveryDtypeOpAndCountAroundTheLineIsExactOn3Ranks) { everyCaseOnEitherSide(3); }
TEST(ShmLine, EveryDtypeOpAndCountAroundTheLineIsExactOn5Ranks) { everyCaseOnEitherSide(5); }

// A slot's data area holds whatever the caller's bytes were: a line message kept there would
// find, three events on, a stale tag that is the one it waits for, where those bytes held that
// number. Event 0 stages eight int64s all 4 in slot 0; events 1-3 are line messages, and event
// 3's, in slot 0, waits for tag 4 while rank 1 is late to write it.
TEST(ShmLine, ACallersBytesInTheSlotAreNeverTakenForATag) {
  auto out = runWorld(2, lineWorld(), [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<int64_t> staged(8, 4), v(4);
    if (collieAllReduce(staged.data(), staged.data(), 8, collieInt64, collieSum, c, nullptr) !=
        collieSuccess)
      return rep.fail(collieGetLastError(c));
    for (int call = 1; call <= 3; ++call) {
      if (call == 3 && rank == 1) usleep(50000);
      for (size_t i = 0; i < v.size(); ++i) v[i] = 10 * (rank + 1) + call + static_cast<int64_t>(i);
      if (collieAllReduce(v.data(), v.data(), v.size(), collieInt64, collieSum, c, nullptr) !=
          collieSuccess)
        return rep.fail(collieGetLastError(c));
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != 30 + 2 * (call + static_cast<int64_t>(i)))
          return rep.fail("call " + std::to_string(call) + " element " + std::to_string(i) + ": " +
                          std::to_string(v[i]));
    }
    collieCommDestroy(c);
  });
  expectAllPassed(out);
}

// Barriers take the line without data: mixed with AllReduces in and past the line, every result
// stays exact, and a barrier passes only once every rank has reached it (each leaves its round
// number in shared memory first).
TEST(ShmLine, BarriersBetweenAllReducesInAndPastTheLine) {
  const int n = 3;
  std::atomic<int>* marks = static_cast<std::atomic<int>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(marks, MAP_FAILED);
  for (int r = 0; r < n; ++r) new (&marks[r]) std::atomic<int>(-1);
  auto out = runWorld(n, lineWorld(), [marks](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    std::vector<int32_t> v(100);
    for (int round = 0; round < 500; ++round) {
      for (size_t count : {size_t{3}, size_t{100}}) {
        for (size_t i = 0; i < count; ++i) v[i] = rank + round + static_cast<int32_t>(i);
        if (collieAllReduce(v.data(), v.data(), count, collieInt32, collieSum, c, nullptr) !=
            collieSuccess)
          return rep.fail(collieGetLastError(c));
        for (size_t i = 0; i < count; ++i)
          if (v[i] != n * (round + static_cast<int32_t>(i)) + n * (n - 1) / 2)
            return rep.fail("round " + std::to_string(round) + " count " + std::to_string(count) +
                            " element " + std::to_string(i));
        if (round % 7 == rank) usleep(200);
        marks[rank].store(round);
        if (collieBarrier(c) != collieSuccess) return rep.fail(collieGetLastError(c));
        for (int r = 0; r < n; ++r)
          if (marks[r].load() < round)
            return rep.fail("round " + std::to_string(round) + ": passed the barrier before rank " +
                            std::to_string(r) + " reached it");
      }
    }
    const char* algo = "";
    collieCommLastAlgorithm(c, &algo);
    if (std::string(algo) != "shm_direct") rep.fail(std::string("the barrier ran ") + algo);
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  munmap(marks, 4096);
}

// On n ranks: after a call they agree on, each makes call(rank, comm), which they disagree on.
// Every rank must get an error that says so within seconds (the deadline is 20 s), not a hang.
template <typename Call>
void expectDisagreement(int n, Call call) {
  auto out = runWorld(n, lineWorld(), [=](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    float agreed[4] = {1, 1, 1, 1};
    // The next call then reuses nothing of a fresh slot.
    if (collieAllReduce(agreed, agreed, 4, collieFloat32, collieSum, c, nullptr) != collieSuccess)
      return rep.fail(std::string("the agreed call: ") + collieGetLastError(c));
    Deadline d = Deadline::afterMs(10000);
    const collieResult_t r = call(rank, c);
    const std::string msg = collieGetLastError(c);
    if (r == collieSuccess) rep.fail("succeeded although the ranks made different calls");
    if (d.expired()) rep.fail("took longer than 10 s to fail");
    if (msg.find("disagree") == std::string::npos) rep.fail("message lacks 'disagree': " + msg);
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

// Rank odd calls with oddCount floats, the others with count.
void disagreeOnCount(int n, int odd, size_t count, size_t oddCount) {
  expectDisagreement(n, [=](int rank, collieComm_t c) {
    std::vector<float> buf(256, 1.0f);
    return collieAllReduce(buf.data(), buf.data(), rank == odd ? oddCount : count, collieFloat32,
                           collieSum, c, nullptr);
  });
}

// One rank in a barrier while the other makes a one-element AllReduce: both in the line, told
// apart by the collective.
TEST(ShmLine, ABarrierAgainstAnAllReduceFails) {
  expectDisagreement(2, [](int rank, collieComm_t c) {
    float x = 1;
    return rank == 0 ? collieBarrier(c)
                     : collieAllReduce(&x, &x, 1, collieFloat32, collieSum, c, nullptr);
  });
}

// The same call on both ranks, but rank 0 has the line turned off: it stages the call, the other
// sends it in its line. A misuse, named as such (it was an internal error).
TEST(ShmLine, RanksWhoseLineSettingsDifferFailNamingTheSettings) {
  auto out = runWorld(2, lineWorld(), [](int rank, Reporter& rep) {
    if (rank == 0) setenv("COLLIE_SHM_LINE_BYTES", "0", 1);
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail("init");
    float x[4] = {1, 2, 3, 4};
    const collieResult_t r = collieAllReduce(x, x, 4, collieFloat32, collieSum, c, nullptr);
    const std::string msg = collieGetLastError(c);
    if (r != collieInvalidUsage) rep.fail("want invalid usage, got " + std::to_string(r));
    if (msg.find("disagree") == std::string::npos ||
        msg.find("COLLIE_SHM_LINE_BYTES") == std::string::npos)
      rep.fail("message: " + msg);
    collieCommAbort(c);
  });
  expectAllPassed(out);
}

TEST(ShmLine, RanksThatDisagreeInsideTheLineFail) { disagreeOnCount(2, 1, 4, 3); }
TEST(ShmLine, RanksThatDisagreeInsideTheLineFailOn3Ranks) { disagreeOnCount(3, 0, 2, 12); }
TEST(ShmLine, ARankPastTheLineWhileTheOthersAreInItFails) { disagreeOnCount(3, 2, 4, 100); }
TEST(ShmLine, ARankInTheLineWhileTheOthersArePastItFails) { disagreeOnCount(2, 0, 100, 4); }

}  // namespace
}  // namespace testing
}  // namespace collie
