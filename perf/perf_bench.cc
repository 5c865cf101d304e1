// The measuring loop of collie-perf (see perf_bench.h).
#include "perf/perf_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf/perf_data.h"

namespace collie::perf {

const char* const kKnownAlgorithms[] = {"ring",         "tree",
                                        "rhd",          "recursive_doubling",
                                        "shm_direct",   "shm_single_copy",
                                        "hierarchical", "pairwise",
                                        "bruck",        "linear",
                                        "binomial"};
const int kNumKnownAlgorithms = sizeof(kKnownAlgorithms) / sizeof(kKnownAlgorithms[0]);

void FreeDeleter::operator()(void* p) const { free(p); }

namespace {

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

// Half of the numbers, in no pattern a tuner's schedule could follow (splitmix64's mixer).
bool settleInPlace(int it) {
  uint64_t x = static_cast<uint64_t>(it) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return ((x ^ (x >> 31)) & 1) != 0;
}

}  // namespace

Bench::Bench(const Options& options, const CollDesc& coll, collieComm_t comm, int rank, int nranks,
             DeviceMemory* dev)
    : o_(options), coll_(coll), comm_(comm), rank_(rank), nranks_(nranks), dev_(dev) {}

void Bench::deviceOrDie(bool ok, const std::string& why) {
  if (ok) return;
  fprintf(stderr, "collie-perf: rank %d: %s\n", rank_, why.c_str());
  if (comm_) collieCommAbort(comm_);
  exit(1);
}

void Bench::syncDevice() {
  std::string why;
  if (dev_) deviceOrDie(dev_->sync(&why), why);
}

CollCall Bench::hostCall(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
  return CollCall{comm_, rank_, nranks_,     o_.root,     dtype,
                  op,    count, send_.get(), recv_.get(), inPlace};
}

void Bench::fillInputs(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                       int rep) {
  coll_.fill(hostCall(count, dtype, op, inPlace), rep);
  if (!dev_) return;
  const size_t esz = typeInfo(dtype).size;
  const size_t sendBytes = coll_.sendCount(count, nranks_) * esz;
  std::string why;
  deviceOrDie(dev_->toDevice(dev_->recv(), recv_.get(), windowBytes(count, dtype), &why), why);
  if (!inPlace) deviceOrDie(dev_->toDevice(dev_->send(), send_.get(), sendBytes, &why), why);
}

// The recv buffer's bytes a call of count uses: in place it holds the input too.
size_t Bench::windowBytes(size_t count, collieDataType_t dtype) const {
  return std::max(coll_.sendCount(count, nranks_), coll_.recvCount(count, nranks_)) *
         typeInfo(dtype).size;
}

int64_t Bench::checkOutputs(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                            int rep) {
  if (dev_) {
    std::string why;
    deviceOrDie(dev_->toHost(recv_.get(), dev_->recv(), windowBytes(count, dtype), &why), why);
  }
  return coll_.check(hostCall(count, dtype, op, inPlace), rep);
}

bool Bench::setUp() {
  std::string why;
  send_ = allocate(o_.maxBytes);
  recv_ = allocate(o_.maxBytes);
  if (!send_ || !recv_) why = "cannot allocate 2 x " + std::to_string(o_.maxBytes) + " bytes";
  if (coll_.hasRoot && o_.root >= nranks_) {
    why = "root " + std::to_string(o_.root) + " is not a rank of " + std::to_string(nranks_);
  }
  if (why.empty() && rank_ == 0 && !o_.csvPath.empty() && !csv_.open(o_.csvPath)) {
    why = "cannot write CSV file " + o_.csvPath + ": " + strerror(errno);
  }
  if (why.empty() && rank_ == 0 && !o_.jsonPath.empty()) {
    // Opened now (and rewritten at the end) so that a bad path fails before any timing.
    FILE* f = fopen(o_.jsonPath.c_str(), "w");
    if (!f) why = "cannot write JSON file " + o_.jsonPath + ": " + strerror(errno);
    if (f) fclose(f);
  }
  if (!why.empty()) fprintf(stderr, "collie-perf: rank %d: %s\n", rank_, why.c_str());
  return reduceInt(why.empty() ? 0 : 1, collieMax) == 0;
}

std::vector<RankInfo> Bench::gatherRanks() {
  // A gather made of one sum: each rank fills only its own slot, the others are zero.
  constexpr size_t kHostBytes = 64;
  std::vector<uint8_t> hosts(kHostBytes * nranks_, 0);
  std::string host = shortHostName().substr(0, kHostBytes - 1);
  memcpy(&hosts[kHostBytes * rank_], host.data(), host.size());
  std::vector<int64_t> pids(nranks_, 0);
  pids[rank_] = getpid();
  useAlgo(false);
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

bool Bench::openTable(const std::string& algo, collieDataType_t dtype, collieRedOp_t op,
                      int sweep) {
  const TypeInfo& type = typeInfo(dtype);
  sweep_ = sweep;
  table_ = "";
  barrier();
  if (!coll_.usesAlgorithm && !algo.empty() && algo != "auto") {
    if (rank_ == 0 && sweep == 0)
      printf("# algorithm %s does not run %s here: skipped (point-to-point calls take none)\n",
             algo.c_str(), coll_.name);
    return false;
  }
  // A name this build lacks: an error when asked for by name, a skipped table under --algo all.
  if (!algo.empty()) {
    collieResult_t set = collieCommSetAlgorithm(comm_, algo.c_str());
    if (set == collieInvalidArgument && o_.algo == "all") {
      if (rank_ == 0 && sweep == 0)
        printf("# algorithm %s is not in this build: skipped\n", algo.c_str());
      check(collieCommSetAlgorithm(comm_, nullptr));
      return false;
    }
    check(set);
    current_ = algo;
  }
  table_ = algo;
  // The first warm-up call tells whether the algorithm runs this collective at all: a forced
  // algorithm that cannot is refused before any data moves, the same way on every rank.
  size_t first = countFor(o_.minBytes, type);
  collieResult_t probe = runColl(first, dtype, op, false, 0);
  if (probe == collieInvalidArgument && !algo.empty()) {
    if (rank_ == 0 && std::find(skipped_.begin(), skipped_.end(), algo) == skipped_.end()) {
      printf("# algorithm %s does not run %s here: skipped (%s)\n", algo.c_str(), coll_.name,
             collieGetLastError(comm_));
    }
    skipped_.push_back(algo);
    return false;
  }
  check(probe);
  // Warm every size the run will touch (doubling, as nccl-tests does) before timing any.
  for (size_t size = o_.minBytes;;) {
    for (int it = 0; it < o_.warmupIters; ++it)
      check(runColl(countFor(size, type), dtype, op, false, it));
    size_t next = size ? size * 2 : 1;
    if (next <= size || next > o_.maxBytes) break;
    size = next;
  }
  return true;
}

void Bench::measureRow(const std::string& algo, size_t size, collieDataType_t dtype,
                       collieRedOp_t op) {
  const TypeInfo& type = typeInfo(dtype);
  table_ = algo;
  bool print = rank_ == 0 && !printsAtEnd();
  if (print && !algo.empty() && algo != header_) {
    printAlgorithmHeader(stdout, algo.c_str(), showAlgo(), o_.reportCputime == 1);
    header_ = algo;
  }
  size_t count = countFor(size, type);
  int root = coll_.hasRoot ? o_.root : -1;
  if (print) printRowPreamble(stdout, count * type.size, count, type.name, opLabel(op), root);
  rowAlgos_.clear();
  // Interleaved, the algorithm measured before this one left its own state behind (caches, a
  // progress thread still spinning): the warm-up calls run again at this size first.
  if (o_.algo == "all") {
    for (int it = 0; it < o_.warmupIters; ++it) check(runColl(count, dtype, op, false, it));
  }
  settleTuner(count, dtype, op);
  benchOne(count, dtype, op, false);
  benchOne(count, dtype, op, true);
  if (print && showAlgo()) printRowAlgo(stdout, rowAlgos_.c_str());
  if (print) printRowEnd(stdout);
}

bool Bench::runTable(const std::string& algo, collieDataType_t dtype, collieRedOp_t op, int sweep) {
  if (!openTable(algo, dtype, op, sweep)) return false;
  for (size_t size = o_.minBytes;;) {
    measureRow(algo, size, dtype, op);
    size_t next = nextSize(size);
    if (next <= size || next > o_.maxBytes) break;
    size = next;
  }
  return true;
}

void Bench::runInterleaved(const std::vector<std::string>& algos, std::vector<bool>* runs,
                           collieDataType_t dtype, collieRedOp_t op, int sweep) {
  for (size_t a = 0; a < algos.size(); ++a) {
    if ((*runs)[a]) (*runs)[a] = openTable(algos[a], dtype, op, sweep);
  }
  for (size_t size = o_.minBytes;;) {
    for (size_t a = 0; a < algos.size(); ++a) {
      if ((*runs)[a]) measureRow(algos[a], size, dtype, op);
    }
    size_t next = nextSize(size);
    if (next <= size || next > o_.maxBytes) break;
    size = next;
  }
}

void Bench::finish() {
  if (rank_ != 0) return;
  double factor = coll_.busFactor(nranks_);
  if (printsAtEnd()) {
    // Rows were measured size by size under --algo all; they print as one table per algorithm,
    // in the order the tables were first measured.
    std::vector<std::string> tables;
    for (const Result& r : results_) {
      if (std::find(tables.begin(), tables.end(), r.table) == tables.end())
        tables.push_back(r.table);
    }
    for (const std::string& table : tables) {
      if (!table.empty()) printAlgorithmHeader(stdout, table.c_str(), table == "auto");
      for (size_t i = 0; i + 1 < results_.size(); i += 2) {
        if (results_[i].table == table) printResultRow(results_[i], results_[i + 1], factor);
      }
    }
    if (o_.repeat > 1) printRepeatSummary(stdout, o_.repeat, factor, results_);
  }
  if (!o_.jsonPath.empty()) {
    RunInfo info{coll_.name, nranks_, o_.algo, o_.transport, o_.repeat, factor};
    if (!writeJson(o_.jsonPath, info, results_)) {
      fprintf(stderr, "collie-perf: cannot write JSON file %s: %s\n", o_.jsonPath.c_str(),
              strerror(errno));
      jsonFailed_ = true;
    }
  }
}

// One row of the end-of-run tables: the median of each placement's sweeps.
void Bench::printResultRow(const Result& outOfPlace, const Result& inPlace, double factor) {
  printRowPreamble(stdout, outOfPlace.bytes, outOfPlace.count, outOfPlace.type.c_str(),
                   outOfPlace.op.c_str(), outOfPlace.root);
  std::string picks;
  for (const Result* p : {&outOfPlace, &inPlace}) {
    double us = p->medianUs();
    double alg = bandwidthGBs(p->bytes, us, 1.0), bus = bandwidthGBs(p->bytes, us, factor);
    printRowBody(stdout, us, alg, bus, p->checked, p->wrong);
    csv_.writeRow(p->bytes, p->count, p->type.c_str(), p->op.c_str(), p->inPlace, us, alg, bus,
                  p->checked, p->wrong);
    std::string pick = p->algos.empty() ? "" : p->algos.back();
    if (picks.empty())
      picks = pick;
    else if (pick != picks)
      picks += "/" + pick;
  }
  if (outOfPlace.table == "auto") printRowAlgo(stdout, picks.c_str());
  printRowEnd(stdout);
}

int Bench::totalErrors() { return static_cast<int>(reduceInt(localErrors_, collieSum)); }

void Bench::check(collieResult_t result) {
  if (result == collieSuccess) return;
  const char* detail = collieGetLastError(comm_);
  fprintf(stderr, "collie-perf: rank %d: %s: %s\n", rank_, collieGetErrorString(result),
          detail ? detail : "");
  // Abort rather than destroy: it unblocks the peers, which would otherwise wait for this rank.
  collieCommAbort(comm_);
  exit(1);
}

size_t Bench::nextSize(size_t size) const {
  // An overflow returns a size <= the current one, which ends the caller's loop.
  if (o_.stepFactor <= 1) return size + o_.stepBytes;
  if (size == 0) return 1;  // 0 * factor would never grow (nccl-tests loops forever)
  size_t factor = static_cast<size_t>(o_.stepFactor);
  return size > SIZE_MAX / factor ? size : size * factor;
}

// Collectives that split the data into n blocks round the count down to a multiple of n.
size_t Bench::countFor(size_t size, const TypeInfo& type) const {
  size_t count = size / type.size;
  return coll_.sendCount(count, nranks_) == count && coll_.recvCount(count, nranks_) == count
             ? count
             : count / nranks_ * nranks_;
}

void Bench::useAlgo(bool measured) {
  std::string want = measured ? table_ : std::string();
  if (want == current_) return;
  check(collieCommSetAlgorithm(comm_, want.empty() ? nullptr : want.c_str()));
  current_ = want;
}

void Bench::barrier() {
  useAlgo(false);
  check(collieBarrier(comm_));
}

int64_t Bench::reduceInt(int64_t value, collieRedOp_t op) {
  useAlgo(false);
  check(collieAllReduce(&value, &value, 1, collieInt64, op, comm_, nullptr));
  return value;
}

double Bench::reduceDouble(double value, collieRedOp_t op) {
  useAlgo(false);
  check(collieAllReduce(&value, &value, 1, collieFloat64, op, comm_, nullptr));
  return value;
}

// Successive iterations walk through the buffers so that a small size is not always served
// from the same cache lines (the nccl-tests offset scheme).
CollCall Bench::call(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                     int iter) {
  size_t bytes = count * typeInfo(dtype).size;
  size_t steps = bytes ? std::max<size_t>(1, o_.maxBytes / bytes) : 1;
  size_t shift = bytes * (static_cast<size_t>(iter) % steps);
  char* send = (dev_ ? dev_->send() : send_.get()) + shift;
  char* recv = (dev_ ? dev_->recv() : recv_.get()) + shift;
  return CollCall{comm_,
                  rank_,
                  nranks_,
                  o_.root,
                  dtype,
                  op,
                  count,
                  send,
                  recv,
                  inPlace,
                  dev_ ? dev_->stream() : nullptr};
}

void Bench::settleTuner(size_t count, collieDataType_t dtype, collieRedOp_t op) {
  // Every rank sees the same names after the same calls, so all make the same number of calls.
  // The tuner should pick for the calls the table times, so its trials are calls like them:
  //  - on the offsets the timed iterations walk, so that the trials find the buffers in cache
  //    where the timed calls do;
  //  - out of place and in place alike, as the table times both and a shape is tuned once for
  //    both. Which call goes in place is a hash of its number, the same on every rank, so that
  //    it falls on every candidate alike whatever order the tuner tries them in.
  static const std::string kTrial = " (trial)";
  for (int it = 0; it < 4096; ++it) {
    check(runColl(count, dtype, op, settleInPlace(it), it % o_.iters));
    const char* name = "";
    check(collieCommLastAlgorithm(comm_, &name));
    const std::string n = name ? name : "";
    if (n.size() < kTrial.size() || n.compare(n.size() - kTrial.size(), kTrial.size(), kTrial) != 0)
      return;
  }
}

collieResult_t Bench::runColl(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                              int iter) {
  useAlgo(true);
  return coll_.run(call(count, dtype, op, inPlace, iter));
}

// The calls of one timed iteration: -m of them, in one group when more than one (nccl-tests).
void Bench::runIteration(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                         int it) {
  if (o_.aggIters > 1) check(collieGroupStart());
  for (int a = 0; a < o_.aggIters; ++a) {
    check(runColl(count, dtype, op, inPlace, it * o_.aggIters + a));
  }
  if (o_.aggIters > 1) check(collieGroupEnd());
}

double Bench::combineRanks(double sec) {
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

double Bench::timeIterations(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                             double* cpuSec) {
  using Clock = std::chrono::steady_clock;
  barrier();
  Clock::duration collOnly{};
  Clock::time_point start = Clock::now();
  for (int it = 0; it < o_.iters; ++it) {
    // The clock only where each call is timed alone: the two reads cost ~60 ns on a VM, an
    // eighth of an 8-byte call over shared memory.
    Clock::time_point t0 = o_.blocking == 3 ? Clock::now() : start;
    runIteration(count, dtype, op, inPlace, it);
    if (o_.blocking != 0) syncDevice();
    if (o_.blocking == 3) collOnly += Clock::now() - t0;
    if (o_.blocking == 1 || o_.blocking == 3) barrier();
  }
  // nccl-tests' CPU time: until the calls have returned, before the wait for the device.
  Clock::duration issued = o_.blocking == 3 ? collOnly : Clock::now() - start;
  syncDevice();
  Clock::duration total = o_.blocking == 3 ? collOnly : Clock::now() - start;
  // Read before the time reductions below, which are collectives of their own.
  useAlgo(true);
  const char* name = "";
  check(collieCommLastAlgorithm(comm_, &name));
  picked_ = !coll_.usesAlgorithm ? "p2p" : name ? name : "";
  const double calls = static_cast<double>(o_.iters) * o_.aggIters;
  if (cpuSec != nullptr)
    *cpuSec = combineRanks(std::chrono::duration<double>(issued).count() / calls);
  return combineRanks(std::chrono::duration<double>(total).count() / calls);
}

int64_t Bench::checkResults(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
  int64_t wrong = 0;
  for (int c = 0; c < o_.check; ++c) {
    int rep = ++rep_;
    fillInputs(count, dtype, op, inPlace, rep);
    check(runColl(count, dtype, op, inPlace, 0));
    int64_t local = checkOutputs(count, dtype, op, inPlace, rep);
    if (local) ++localErrors_;
    wrong = reduceInt(local, collieSum);
    if (wrong) break;
  }
  return wrong;
}

void Bench::benchOne(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace) {
  const TypeInfo& type = typeInfo(dtype);
  // Timed on checkable data, also with -c 0: the inputs are realistic numbers, and written
  // pages, where a buffer never written reads the kernel's one shared page of zeros from cache.
  fillInputs(count, dtype, op, inPlace, 0);
  check(runColl(count, dtype, op, inPlace, 0));
  syncDevice();
  double cpuSec = 0;
  double sec = timeIterations(count, dtype, op, inPlace, o_.reportCputime ? &cpuSec : nullptr);
  // -C: the time column shows CPU time; the bandwidths stay those of the wall time (nccl-tests).
  const double shownUs = (o_.reportCputime ? cpuSec : sec) * 1.0e6;
  double bytes = static_cast<double>(count * type.size);
  double algBw = sec > 0 ? bytes / 1.0e9 / sec : 0.0;
  double busBw = algBw * coll_.busFactor(nranks_);
  barrier();
  const bool checked = o_.check > 0 && (!inPlace || coll_.checksInPlace);
  int64_t wrong = checked ? checkResults(count, dtype, op, inPlace) : 0;
  Result& r = record(count, type, op, inPlace);
  r.checked = checked;
  r.timesUs.push_back(sec * 1.0e6);
  r.algos.push_back(picked_);
  r.wrong = std::max(r.wrong, wrong);
  if (rowAlgos_.empty())
    rowAlgos_ = picked_;
  else if (rowAlgos_ != picked_)
    rowAlgos_ += "/" + picked_;
  if (rank_ == 0 && !printsAtEnd()) {
    printRowBody(stdout, shownUs, algBw, busBw, checked, wrong);
    csv_.writeRow(count * type.size, count, type.name, opLabel(op), inPlace, shownUs, algBw, busBw,
                  checked, wrong);
  }
  if (rank_ == 0 && progress_) {
    fprintf(stderr, "collie-perf: sweep %d/%d %s%s%s %zu B %s %s %s: %.2f us, busbw %.3f GB/s%s\n",
            sweep_ + 1, o_.repeat, coll_.name, table_.empty() ? "" : " ", table_.c_str(),
            count * type.size, type.name, opLabel(op), inPlace ? "in-place" : "out-of-place",
            sec * 1.0e6, busBw, wrong ? ", WRONG" : "");
  }
  bwSum_ += busBw;
  ++bwCount_;
}

Result& Bench::record(size_t count, const TypeInfo& type, collieRedOp_t op, bool inPlace) {
  // The first sweep appends the results in the order it measures them; later sweeps find them.
  const size_t bytes = count * type.size;
  const char* opName = opLabel(op);
  if (sweep_ > 0) {
    for (Result& r : results_) {
      if (r.table == table_ && r.bytes == bytes && r.count == count && r.inPlace == inPlace &&
          r.type == type.name && r.op == opName)
        return r;
    }
  }
  Result r;
  r.bytes = bytes;
  r.count = count;
  r.type = type.name;
  r.op = opName;
  r.inPlace = inPlace;
  r.checked = o_.check > 0;
  r.root = coll_.hasRoot ? o_.root : -1;
  r.table = table_;
  results_.push_back(r);
  return results_.back();
}

const char* Bench::opLabel(collieRedOp_t op) const { return coll_.hasOp ? opName(op) : "none"; }

}  // namespace collie::perf
