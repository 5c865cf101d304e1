// collieCommSplit over real processes: colors, keys that reorder ranks, NOCOLOR, nested splits,
// children used concurrently with their parent and with each other from two threads, destroy in
// either order, and a split that makes no store request and opens no socket or segment. 50
// splits in a loop leave no fd, mapping or memory behind. Values are checked against sums
// computed here from the members' parent ranks.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "src/core/bootstrap/store.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

// Element i of the contribution of the rank whose parent rank is p, in round r: small integers,
// exact in float.
float valueOf(int p, size_t i, int r) { return static_cast<float>((p * 5 + i * 3 + r) % 29); }

struct Ctx {
  Reporter* rep;
  int rank;  // in the world communicator
  bool ok(collieResult_t r, collieComm_t c, const std::string& what) {
    if (r == collieSuccess) return true;
    rep->fail(what + " on rank " + std::to_string(rank) + ": " + collieGetErrorString(r) + ": " +
              collieGetLastError(c));
    return false;
  }
};

// An AllReduce of count floats on comm, whose ranks are the world ranks in members (by rank),
// checked against the sum computed here.
bool allreduceChecked(Ctx& c, collieComm_t comm, const std::vector<int>& members, size_t count,
                      int round, const std::string& what) {
  int me = -1;
  collieCommUserRank(comm, &me);
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = valueOf(members[static_cast<size_t>(me)], i, round);
  if (!c.ok(collieAllReduce(buf.data(), buf.data(), count, collieFloat32, collieSum, comm, nullptr),
            comm, what))
    return false;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int p : members) want += valueOf(p, i, round);
    wrong += buf[i] != want;
  }
  if (wrong != 0) c.rep->fail(what + ": " + std::to_string(wrong) + " wrong elements");
  return wrong == 0;
}

// The world ranks of a split by color and key, in child rank order.
std::vector<int> membersOf(int n, int color, int (*colorOf)(int), int (*keyOf)(int)) {
  std::vector<std::pair<int, int>> byKey;
  for (int r = 0; r < n; ++r)
    if (colorOf(r) == color) byKey.emplace_back(keyOf(r), r);
  std::sort(byKey.begin(), byKey.end());
  std::vector<int> m;
  for (auto& k : byKey) m.push_back(k.second);
  return m;
}

int parity(int r) { return r % 2; }
int half(int r) { return r / 2; }
int reversed(int r) { return -r; }
int same(int r) { return r; }

// Splits world by colorOf/keyOf and checks the child's rank, size and an AllReduce.
collieComm_t splitChecked(Ctx& c, collieComm_t world, int n, int (*colorOf)(int), int (*keyOf)(int),
                          const std::string& what) {
  collieComm_t child = nullptr;
  if (!c.ok(collieCommSplit(world, colorOf(c.rank), keyOf(c.rank), &child, nullptr), world, what))
    return nullptr;
  const std::vector<int> m = membersOf(n, colorOf(c.rank), colorOf, keyOf);
  int size = 0, me = -1;
  collieCommCount(child, &size);
  collieCommUserRank(child, &me);
  const int want = static_cast<int>(std::find(m.begin(), m.end(), c.rank) - m.begin());
  if (size != static_cast<int>(m.size()) || me != want)
    c.rep->fail(what + ": rank " + std::to_string(me) + " of " + std::to_string(size) +
                ", expected " + std::to_string(want) + " of " + std::to_string(m.size()));
  allreduceChecked(c, child, m, 1001, 0, what + " allreduce");
  return child;
}

std::vector<int> worldOf(int n) {
  std::vector<int> w;
  for (int r = 0; r < n; ++r) w.push_back(r);
  return w;
}

// Rounds of AllReduce on comm, small and striped, while another thread uses another
// communicator of the family.
void rounds(Ctx c, collieComm_t comm, std::vector<int> members, const std::string& what,
            std::atomic<int>* failures) {
  for (int r = 0; r < 40; ++r)
    for (size_t count : {size_t{7}, size_t{3000}, size_t{300001}})
      if (!allreduceChecked(c, comm, members, count, r, what)) {
        failures->fetch_add(1);
        return;
      }
}

void concurrently(Ctx& c, collieComm_t a, const std::vector<int>& ma, collieComm_t b,
                  const std::vector<int>& mb, const std::string& what) {
  std::atomic<int> failures{0};
  std::thread t(rounds, c, a, ma, what + " (first thread)", &failures);
  rounds(c, b, mb, what + " (second thread)", &failures);
  t.join();
}

void splitCases(int rank, int n, Reporter& rep) {
  Ctx c{&rep, rank};
  collieComm_t world = nullptr;
  if (!c.ok(collieCommInitFromEnv(&world), nullptr, "init")) return;
  const std::vector<int> all = worldOf(n);
  // Colors by parity, keys that reverse the order; then by halves in rank order.
  collieComm_t odd = splitChecked(c, world, n, parity, reversed, "split by parity, reversed");
  collieComm_t halves = splitChecked(c, world, n, half, same, "split by halves");
  // NOCOLOR: rank 0 gets none.
  collieComm_t noZero = nullptr;
  const int color = rank == 0 ? COLLIE_SPLIT_NOCOLOR : 7;
  if (c.ok(collieCommSplit(world, color, 0, &noZero, nullptr), world, "split NOCOLOR")) {
    if ((rank == 0) != (noZero == nullptr)) rep.fail("NOCOLOR: a communicator where none is due");
    std::vector<int> m(all.begin() + 1, all.end());
    if (noZero != nullptr) allreduceChecked(c, noZero, m, 513, 1, "NOCOLOR child");
  }
  // Nested: the parity child split by its own parity (keys reversed again).
  const std::vector<int> mOdd = membersOf(n, parity(rank), parity, reversed);
  int oddRank = -1;
  collieCommUserRank(odd, &oddRank);
  std::vector<std::pair<int, int>> byKey;
  for (size_t r = 0; r < mOdd.size(); ++r)
    if (static_cast<int>(r) % 2 == oddRank % 2) byKey.emplace_back(-static_cast<int>(r), mOdd[r]);
  std::sort(byKey.begin(), byKey.end());
  std::vector<int> mNested;
  for (auto& k : byKey) mNested.push_back(k.second);
  collieComm_t nested = nullptr;
  if (c.ok(collieCommSplit(odd, oddRank % 2, -oddRank, &nested, nullptr), odd, "nested split"))
    allreduceChecked(c, nested, mNested, 4097, 2, "nested child");
  // Two threads: the parent with a child, then two siblings.
  concurrently(c, world, all, odd, mOdd, "parent and child");
  concurrently(c, odd, mOdd, halves, membersOf(n, half(rank), half, same), "two siblings");
  // Destroy in any order: the parent first, its children go on; then they go too.
  collieCommDestroy(world);
  allreduceChecked(c, odd, mOdd, 300001, 3, "child after its parent's destroy");
  allreduceChecked(c, nested, mNested, 1000, 5, "grandchild after the world's destroy");
  collieCommDestroy(nested);
  collieCommDestroy(odd);
  if (noZero != nullptr) collieCommDestroy(noZero);
  allreduceChecked(c, halves, membersOf(n, half(rank), half, same), 1000, 4, "last child");
  collieCommDestroy(halves);
}

TEST(Split, ColorsKeysNestedThreadsAndDestroyOrder) {
  std::vector<const char*> transports = {"tcp", "shm"};
#ifdef COLLIE_HAVE_UCX
  transports.push_back("ucx");
#endif
  for (const char* transport : transports) {
    WorldOptions opt;
    opt.timeoutSec = 120;
    opt.env = {{"COLLIE_TRANSPORT", transport}};
    auto out = runWorld(4, opt, [](int rank, Reporter& rep) { splitCases(rank, 4, rep); });
    SCOPED_TRACE(transport);
    expectAllPassed(out);
  }
}

// What a process holds: open fds, mappings of /dev/shm files, resident memory.
struct Holdings {
  int fds = 0;
  int shmMaps = 0;
  long rssKb = 0;
};

Holdings holdings() {
  Holdings h;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++h.fds;
    closedir(d);
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    h.shmMaps += line.find("/dev/shm/") != std::string::npos;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) h.rssKb = std::stol(line.substr(6));
  return h;
}

void leakCases(int rank, int n, Reporter& rep) {
  Ctx c{&rep, rank};
  collieComm_t world = nullptr;
  if (!c.ok(collieCommInitFromEnv(&world), nullptr, "init")) return;
  auto splitOnce = [&](int round) {
    collieComm_t child = nullptr;
    if (!c.ok(collieCommSplit(world, parity(rank), rank, &child, nullptr), world, "split")) return;
    allreduceChecked(c, child, membersOf(n, parity(rank), parity, same), 1001, round, "child");
    collieCommDestroy(child);
  };
  splitOnce(0);  // the first split puts the parent's connections behind their locks
  const Holdings before = holdings();
  const uint64_t requests = TcpStore::requestsSent();
  collieComm_t child = nullptr;
  c.ok(collieCommSplit(world, parity(rank), rank, &child, nullptr), world, "split");
  const Holdings during = holdings();
  if (TcpStore::requestsSent() != requests)
    rep.fail("a split made " + std::to_string(TcpStore::requestsSent() - requests) +
             " store requests");
  // No more than before: the store's server (rank 0) may close sockets of clients meanwhile.
  if (during.fds > before.fds || during.shmMaps > before.shmMaps)
    rep.fail("a split opened " + std::to_string(during.fds - before.fds) + " fds and mapped " +
             std::to_string(during.shmMaps - before.shmMaps) + " shared-memory files");
  collieCommDestroy(child);
  const long rssStart = holdings().rssKb;
  for (int i = 1; i <= 50; ++i) splitOnce(i);
  const Holdings after = holdings();
  if (after.fds > before.fds || after.shmMaps > before.shmMaps)
    rep.fail("50 splits left " + std::to_string(after.fds - before.fds) + " fds and " +
             std::to_string(after.shmMaps - before.shmMaps) + " shared-memory mappings behind");
  rep.note("rss growth over 50 splits: " + std::to_string(after.rssKb - rssStart) + " KiB");
  if (after.rssKb - rssStart > 16 * 1024)
    rep.fail("50 splits grew the resident memory by " + std::to_string(after.rssKb - rssStart) +
             " KiB");
  collieCommDestroy(world);
}

TEST(Split, NoStoreNoSocketNoSegmentAndNothingLeft) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  auto out = runWorld(4, opt, [](int rank, Reporter& rep) { leakCases(rank, 4, rep); });
  expectAllPassed(out);
  for (const RankOutcome& o : out)
    for (const std::string& note : o.notes) printf("rank %d: %s\n", o.rank, note.c_str());
}

// A communicator that fails takes the connections it shares down with it: the other
// communicators of the family fail at their next call, naming the failure, not at a deadline.
void failureCases(int rank, int n, Reporter& rep) {
  Ctx c{&rep, rank};
  collieComm_t world = nullptr;
  if (!c.ok(collieCommInitFromEnv(&world), nullptr, "init")) return;
  collieComm_t child = nullptr;
  if (!c.ok(collieCommSplit(world, 0, rank, &child, nullptr), world, "split")) return;
  allreduceChecked(c, child, worldOf(n), 100, 0, "child before the failure");
  // Ranks disagree on the count: the child fails on every rank.
  std::vector<float> buf(rank == 0 ? 10 : 20, 1.0f);
  const collieResult_t r =
      collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieSum, child, nullptr);
  if (r == collieSuccess) rep.fail("a child's mismatched AllReduce succeeded");
  const auto t0 = std::chrono::steady_clock::now();
  float x = 1;
  const collieResult_t w = collieAllReduce(&x, &x, 1, collieFloat32, collieSum, world, nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string why = collieGetLastError(world);
  if (w == collieSuccess || s > 10 || why.find("sharing") == std::string::npos)
    rep.fail("the parent after its child failed: " + std::string(collieGetErrorString(w)) +
             " after " + std::to_string(s) + " s: " + why);
  collieCommDestroy(child);
  collieCommDestroy(world);
}

TEST(Split, AFailedChildFailsItsFamily) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) { failureCases(rank, 3, rep); });
  expectAllPassed(out);
}

// Waits for a non-blocking communicator's set-up or ops: whether they ended well within 30 s.
bool settled(const collie::Communicator& c, Reporter& rep, const std::string& what) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    collie::Result r = c.asyncError();
    if (r.code() != collieInProgress) {
      if (!r) rep.fail(what + ": " + r.message());
      return static_cast<bool>(r);
    }
    if (std::chrono::steady_clock::now() > until) {
      rep.fail(what + ": still in progress after 30 s");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string lastAlgorithm(const collie::Communicator& c) {
  const char* name = nullptr;
  collieCommLastAlgorithm(c.handle(), &name);
  return name != nullptr ? name : "";
}

// A split's config holds for the child alone, a child without one takes its parent's settings,
// and a non-blocking child finishes its split and its calls through polling.
void configCases(int rank, int n, Reporter& rep) {
  collie::Communicator world;
  if (!collie::Communicator::initFromEnv(&world)) return rep.fail("init");
  Ctx c{&rep, rank};
  const std::vector<int> all = worldOf(n);
  collie::Communicator ringed, inherits, async;
  collie::Result r =
      world.split(0, rank, &ringed, collie::Config().algorithm("ring").name("ringed"));
  if (!r) return rep.fail("split with a config: " + r.message());
  r = ringed.split(0, rank, &inherits);
  if (!r) return rep.fail("split of the child: " + r.message());
  allreduceChecked(c, world.handle(), all, 4096, 0, "world");
  allreduceChecked(c, ringed.handle(), all, 4096, 1, "child with a config");
  allreduceChecked(c, inherits.handle(), all, 4096, 2, "grandchild");
  if (lastAlgorithm(world) != "tree" || lastAlgorithm(ringed) != "ring" ||
      lastAlgorithm(inherits) != "ring")
    rep.fail("algorithms " + lastAlgorithm(world) + ", " + lastAlgorithm(ringed) + ", " +
             lastAlgorithm(inherits) +
             "; expected tree (COLLIE_ALGO), ring (the config), ring "
             "(inherited)");
  r = world.split(rank % 2, rank, &async, collie::Config().blocking(false));
  if (r.code() != collieInProgress || !async.valid())
    return rep.fail("a non-blocking split gave " + r.message());
  if (!settled(async, rep, "non-blocking split")) return;
  const std::vector<int> m = membersOf(n, parity(rank), parity, same);
  std::vector<float> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = valueOf(rank, i, 3);
  r = async.allreduce(collie::View<float>(buf));
  if (r.code() != collieInProgress)
    rep.fail("a non-blocking child's allreduce gave " + r.message());
  if (!settled(async, rep, "non-blocking child's allreduce")) return;
  size_t wrong = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    float want = 0;
    for (int p : m) want += valueOf(p, i, 3);
    wrong += buf[i] != want;
  }
  if (wrong != 0) rep.fail("non-blocking child: " + std::to_string(wrong) + " wrong elements");
}

TEST(Split, ConfigsHoldForTheirChildAndNonBlockingSplitsFinish) {
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_ALGO", "tree"}};
  auto out = runWorld(4, opt, [](int rank, Reporter& rep) { configCases(rank, 4, rep); });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
