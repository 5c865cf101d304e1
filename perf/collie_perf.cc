// collie-perf: measures collie's all-reduce the way nccl-tests' all_reduce_perf measures NCCL's,
// on host memory (or device memory with --device), one rank per process, and prints the same
// table.
//
// It uses only the public C API, so it measures what an application would get. Every rank runs
// the same sequence of collectives; only rank 0 prints. Rank times are combined with an
// all-reduce (by default the max, so the slowest rank sets the number) and all-reduces also
// stand in for barriers.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "perf/device_memory.h"
#include "perf/perf_data.h"
#include "perf/perf_options.h"
#include "perf/perf_report.h"

namespace collie::perf {
namespace {

// The rank the launcher assigned, known before the communicator exists; "?" if none.
std::string rankFromEnv() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* value = getenv(name);
    if (value && *value) return value;
  }
  return "?";
}

// Every rank parses the same arguments and fails the same way; one copy of the message is enough.
bool speaksForAll() {
  std::string rank = rankFromEnv();
  return rank == "?" || rank == "0";
}

[[noreturn]] void failLibrary(collieResult_t result, collieComm_t comm, const std::string& rank) {
  const char* detail = collieGetLastError(comm);
  fprintf(stderr, "collie-perf: rank %s: %s: %s\n", rank.c_str(), collieGetErrorString(result),
          detail ? detail : "");
  // Abort rather than destroy: it unblocks the peers, which would otherwise wait for this rank.
  if (comm) collieCommAbort(comm);
  exit(1);
}

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

Buffer allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded < bytes) return nullptr;
  char* p = static_cast<char*>(aligned_alloc(kAlign, rounded ? rounded : kAlign));
  // Touching every page now keeps first-touch page faults out of the timed loops.
  if (p) memset(p, 0, rounded);
  return Buffer(p);
}

std::string shortHostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  char* dot = strchr(host, '.');
  if (dot) *dot = '\0';
  return host;
}

class Bench {
 public:
  Bench(const Options& options, collieComm_t comm, int rank, int nranks, DeviceMemory* dev)
      : o_(options), comm_(comm), rank_(rank), nranks_(nranks), dev_(dev) {}

  // Buffers and the CSV file; every rank learns whether any rank failed, so all stop together.
  bool setUp() {
    std::string why;
    send_ = allocate(o_.maxBytes);
    recv_ = allocate(o_.maxBytes);
    if (!send_ || !recv_) why = "cannot allocate 2 x " + std::to_string(o_.maxBytes) + " bytes";
    if (why.empty() && rank_ == 0 && !o_.csvPath.empty() && !csv_.open(o_.csvPath)) {
      why = "cannot write CSV file " + o_.csvPath + ": " + strerror(errno);
    }
    if (!why.empty()) fprintf(stderr, "collie-perf: rank %d: %s\n", rank_, why.c_str());
    return reduceInt(why.empty() ? 0 : 1, collieMax) == 0;
  }

  std::vector<RankInfo> gatherRanks() {
    // A gather made of one sum: each rank fills only its own slot, the others are zero.
    constexpr size_t kHostBytes = 64;
    std::vector<uint8_t> hosts(kHostBytes * nranks_, 0);
    std::string host = shortHostName().substr(0, kHostBytes - 1);
    memcpy(&hosts[kHostBytes * rank_], host.data(), host.size());
    std::vector<int64_t> pids(nranks_, 0);
    pids[rank_] = getpid();
    check(collieAllReduce(hosts.data(), hosts.data(), hosts.size(), collieUint8, collieSum, comm_,
                          nullptr));
    check(collieAllReduce(pids.data(), pids.data(), pids.size(), collieInt64, collieSum, comm_,
                          nullptr));
    std::vector<RankInfo> ranks;
    for (int r = 0; r < nranks_; ++r) {
      const char* name = reinterpret_cast<const char*>(&hosts[kHostBytes * r]);
      ranks.push_back({r, static_cast<int>(pids[r]), std::string(name, strnlen(name, kHostBytes))});
    }
    return ranks;
  }

  // All sizes for one datatype and op: warm-up first, then one row per size.
  void runTest(collieDataType_t dtype, collieRedOp_t op) {
    const TypeInfo& type = typeInfo(dtype);
    barrier();
    // Warm every size the run will touch (doubling, as nccl-tests does) before timing any.
    for (size_t size = o_.minBytes;;) {
      for (int it = 0; it < o_.warmupIters; ++it) runColl(size / type.size, dtype, op, false, it);
      size_t next = size ? size * 2 : 1;
      if (next <= size || next > o_.maxBytes) break;
      size = next;
    }
    for (size_t size = o_.minBytes;;) {
      size_t count = size / type.size;
      // -1 in the root column: all_reduce has no root (nccl-tests prints the same).
      if (rank_ == 0) printRowPreamble(stdout, count * type.size, count, type.name, opName(op), -1);
      benchOne(count, dtype, op, false);
      benchOne(count, dtype, op, true);
      if (rank_ == 0) printRowEnd(stdout);
      size_t next = nextSize(size);
      if (next <= size || next > o_.maxBytes) break;
      size = next;
    }
  }

  int totalErrors() { return static_cast<int>(reduceInt(localErrors_, collieSum)); }
  double avgBusBw() const { return bwCount_ ? bwSum_ / bwCount_ : 0.0; }

 private:
  void check(collieResult_t result) {
    if (result != collieSuccess) failLibrary(result, comm_, std::to_string(rank_));
  }

  void checkDevice(bool ok, const std::string& why) {
    if (ok) return;
    fprintf(stderr, "collie-perf: rank %d: %s\n", rank_, why.c_str());
    if (comm_) collieCommAbort(comm_);
    exit(1);
  }

  // After the device's queued collectives (no-op for host buffers).
  void syncDevice() {
    std::string why;
    if (dev_) checkDevice(dev_->sync(&why), why);
  }

  size_t nextSize(size_t size) const {
    // An overflow returns a size <= the current one, which ends the caller's loop.
    if (o_.stepFactor <= 1) return size + o_.stepBytes;
    if (size == 0) return 1;  // 0 * factor would never grow (nccl-tests loops forever)
    size_t factor = static_cast<size_t>(o_.stepFactor);
    return size > SIZE_MAX / factor ? size : size * factor;
  }

  void barrier() {
    check(collieAllReduce(&barrierWord_, &barrierWord_, 1, collieInt32, collieSum, comm_, nullptr));
  }

  int64_t reduceInt(int64_t value, collieRedOp_t op) {
    check(collieAllReduce(&value, &value, 1, collieInt64, op, comm_, nullptr));
    return value;
  }

  double reduceDouble(double value, collieRedOp_t op) {
    check(collieAllReduce(&value, &value, 1, collieFloat64, op, comm_, nullptr));
    return value;
  }

  // One collective. Successive iterations walk through the buffer so that a small size is not
  // always served from the same cache lines (the nccl-tests offset scheme).
  void runColl(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace, int iter) {
    size_t bytes = count * typeInfo(dtype).size;
    size_t steps = bytes ? o_.maxBytes / bytes : 1;
    size_t shift = bytes * (static_cast<size_t>(iter) % steps);
    char* recv = (dev_ ? dev_->recv() : recv_.get()) + shift;
    const char* send = inPlace ? recv : (dev_ ? dev_->send() : send_.get()) + shift;
    check(collieAllReduce(send, recv, count, dtype, op, comm_, dev_ ? dev_->stream() : nullptr));
  }

  // Fresh inputs in the buffer the collective reads (recv when in place), and a zeroed result.
  void prepare(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace, int rep) {
    const size_t bytes = count * typeInfo(dtype).size;
    memset(recv_.get(), 0, bytes);
    fillInput(inPlace ? recv_.get() : send_.get(), count, dtype, op, nranks_, rank_, rep);
    if (dev_) {
      std::string why;
      checkDevice(dev_->toDevice(dev_->recv(), recv_.get(), bytes, &why), why);
      if (!inPlace) checkDevice(dev_->toDevice(dev_->send(), send_.get(), bytes, &why), why);
    }
  }

  // Seconds per iteration, as every rank agrees on it (-a picks how ranks combine).
  double timeIterations(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
    using Clock = std::chrono::steady_clock;
    barrier();
    Clock::duration collOnly{};
    Clock::time_point start = Clock::now();
    for (int it = 0; it < o_.iters; ++it) {
      Clock::time_point t0 = Clock::now();
      runColl(count, dtype, op, inPlace, it);
      if (o_.blocking != 0) syncDevice();
      if (o_.blocking == 3) collOnly += Clock::now() - t0;
      if (o_.blocking == 1 || o_.blocking == 3) barrier();
    }
    syncDevice();
    Clock::duration total = o_.blocking == 3 ? collOnly : Clock::now() - start;
    double sec = std::chrono::duration<double>(total).count() / o_.iters;
    switch (o_.average) {
      case 0:
        return reduceDouble(rank_ == 0 ? sec : 0.0, collieSum);
      case 1:
        return reduceDouble(sec, collieSum) / nranks_;
      case 2:
        return reduceDouble(sec, collieMin);
      default:
        return reduceDouble(sec, collieMax);
    }
  }

  // Wrong elements over all ranks after -c checked runs (stops at the first that has any).
  int64_t checkResults(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
    int64_t wrong = 0;
    for (int c = 0; c < o_.check; ++c) {
      int rep = ++rep_;
      prepare(count, dtype, op, inPlace, rep);
      runColl(count, dtype, op, inPlace, 0);
      if (dev_) {
        std::string why;
        checkDevice(dev_->toHost(recv_.get(), dev_->recv(), count * typeInfo(dtype).size, &why),
                    why);
      }
      int64_t local = countWrong(recv_.get(), count, dtype, op, nranks_, rep);
      if (local) ++localErrors_;
      wrong = reduceInt(local, collieSum);
      if (wrong) break;
    }
    return wrong;
  }

  void benchOne(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
    const TypeInfo& type = typeInfo(dtype);
    // Timed on checkable data too, so that the inputs are realistic numbers, not zeros.
    if (o_.check) prepare(count, dtype, op, inPlace, 0);
    runColl(count, dtype, op, inPlace, 0);
    double sec = timeIterations(count, dtype, op, inPlace);
    double bytes = static_cast<double>(count * type.size);
    double algBw = sec > 0 ? bytes / 1.0e9 / sec : 0.0;
    // Each rank sends and receives 2(n-1)/n of the data in a bandwidth-optimal all-reduce.
    double busBw = algBw * (2.0 * (nranks_ - 1) / nranks_);
    barrier();
    int64_t wrong = checkResults(count, dtype, op, inPlace);
    if (rank_ == 0) {
      printRowBody(stdout, sec * 1.0e6, algBw, busBw, o_.check > 0, wrong);
      csv_.writeRow(count * type.size, count, type.name, opName(op), inPlace, sec * 1.0e6, algBw,
                    busBw, o_.check > 0, wrong);
    }
    bwSum_ += busBw;
    ++bwCount_;
  }

  const Options& o_;
  collieComm_t comm_;
  int rank_;
  int nranks_;
  DeviceMemory* dev_;  // null for host buffers
  Buffer send_;
  Buffer recv_;
  int32_t barrierWord_ = 0;
  CsvWriter csv_;
  int rep_ = 0;
  int64_t localErrors_ = 0;  // checks in which this rank saw a wrong element
  double bwSum_ = 0;
  int bwCount_ = 0;
};

int localRankFromEnv() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = getenv(name);
    if (value && *value) return atoi(value);
  }
  return 0;
}

int run(const Options& o) {
  // The device first: the communicator (NCCL's in particular) works on the current one.
  DeviceMemory dev;
  if (o.device) {
    std::string why;
    if (!dev.setUp(localRankFromEnv(), o.maxBytes, &why)) {
      fprintf(stderr, "collie-perf: rank %s: %s\n", rankFromEnv().c_str(), why.c_str());
      return 1;
    }
  }
  if (o.backend == "nccl") setenv("COLLIE_BACKEND", "nccl", 1);
  collieComm_t comm = nullptr;
  collieResult_t result = collieCommInitFromEnv(&comm);
  if (result != collieSuccess) failLibrary(result, nullptr, rankFromEnv());
  int rank = 0, nranks = 1, version = 0;
  if ((result = collieCommUserRank(comm, &rank)) != collieSuccess ||
      (result = collieCommCount(comm, &nranks)) != collieSuccess ||
      (result = collieGetVersion(&version)) != collieSuccess) {
    failLibrary(result, comm, rankFromEnv());
  }

  Bench bench(o, comm, rank, nranks, o.device ? &dev : nullptr);
  if (!bench.setUp()) {
    collieCommDestroy(comm);
    return 1;
  }
  std::vector<RankInfo> ranks = bench.gatherRanks();
  if (rank == 0) {
    printRunHeader(stdout, o, version, ranks);
    printTableHeader(stdout);
  }
  for (int t = 0; t < kNumTypes; ++t) {
    if (o.datatype != kAll && o.datatype != t) continue;
    for (int op = 0; op < kNumOps; ++op) {
      if (o.op != kAll && o.op != op) continue;
      bench.runTest(static_cast<collieDataType_t>(t), static_cast<collieRedOp_t>(op));
    }
  }
  int errors = bench.totalErrors();
  if (rank == 0) printFooter(stdout, o, errors, bench.avgBusBw());
  if ((result = collieCommDestroy(comm)) != collieSuccess) {
    failLibrary(result, nullptr, std::to_string(rank));
  }
  return errors ? 1 : 0;
}

}  // namespace
}  // namespace collie::perf

int main(int argc, char** argv) {
  using namespace collie::perf;
  // Line buffered, so that a long run shows each row as it finishes, even through a pipe.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options options;
  std::string error;
  switch (parseOptions(argc, argv, &options, &error)) {
    case ParseOutcome::kRun:
      return run(options);
    case ParseOutcome::kHelp:
      if (speaksForAll()) printUsage(stdout);
      return 0;
    case ParseOutcome::kBadUsage:
      if (speaksForAll()) {
        fprintf(stderr, "collie-perf: %s\n", error.c_str());
        printUsage(stderr);
      }
      return 2;
    case ParseOutcome::kUnavailableCollective:
      if (speaksForAll()) fprintf(stderr, "collie-perf: %s\n", error.c_str());
      return 2;
  }
  return 2;
}
