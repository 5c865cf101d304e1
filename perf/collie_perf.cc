// collie-perf: measures collie's collectives (and sendrecv) the way nccl-tests' *_perf programs
// measure NCCL's, on host memory (or device memory with --device), one rank per process, and
// prints the same table.
//
// It uses only the public C API, so it measures what an application would get. Every rank runs
// the same sequence of collectives; only rank 0 prints. Rank times are combined with an
// all-reduce (-a: by default the mean, as nccl-tests) and all-reduces also stand in for
// barriers.
#include <unistd.h>

#include <algorithm>
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
#include "perf/perf_bench.h"
#include "perf/perf_collectives.h"
#include "perf/perf_data.h"
#include "perf/perf_options.h"
#include "perf/perf_report.h"
#include "perf/perf_results.h"

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

// Progress goes to stderr when nobody watches stdout scroll: a pipe, a file, or a run that
// writes its results to files.
bool wantProgress(const Options& o) {
  if (o.progress >= 0) return o.progress == 1;
  return !isatty(STDOUT_FILENO) || !o.csvPath.empty() || !o.jsonPath.empty();
}

// --transport acts through the environment the library reads at init (--algo is set on the
// communicator, per table).
void applyEnvironment(const Options& o) {
  if (!o.transport.empty()) setenv("COLLIE_TRANSPORT", o.transport.c_str(), 1);
  // -T is nccl-tests' per-operation timeout; init's deadline follows it unless
  // COLLIE_CONNECT_TIMEOUT_MS sets one of its own.
  if (o.timeoutS > 0) setenv("COLLIE_TIMEOUT_MS", std::to_string(o.timeoutS * 1000).c_str(), 1);
}

// The tables --algo asks for: "" (the library's choice, no column), one name, or every known
// algorithm then auto.
std::vector<std::string> algorithmTables(const Options& o) {
  if (o.algo.empty()) return {""};
  if (o.algo != "all") return {o.algo};
  std::vector<std::string> all(kKnownAlgorithms, kKnownAlgorithms + kNumKnownAlgorithms);
  all.push_back("auto");
  return all;
}

int localRankFromEnv() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = getenv(name);
    if (value && *value) return atoi(value);
  }
  return 0;
}

// One cycle: every sweep (--repeat) of every (datatype, op) table asked for.
void runSweeps(const Options& o, const CollDesc& coll, const std::vector<std::string>& tables,
               std::vector<bool>* runs, Bench* bench) {
  for (int sweep = 0; sweep < o.repeat; ++sweep) {
    for (int t = 0; t < kNumTypes; ++t) {
      if (o.datatype != kAll && o.datatype != t) continue;
      // Collectives without a reduction run once per datatype.
      for (int op = 0; op < (coll.hasOp ? kNumOps : 1); ++op) {
        if (coll.hasOp && o.op != kAll && o.op != op) continue;
        auto dtype = static_cast<collieDataType_t>(t);
        auto rop = static_cast<collieRedOp_t>(coll.hasOp ? op : collieSum);
        if (o.algo == "all") {
          bench->runInterleaved(tables, runs, dtype, rop, sweep);
          continue;
        }
        if ((*runs)[0]) (*runs)[0] = bench->runTable(tables[0], dtype, rop, sweep);
      }
    }
  }
}

int run(const Options& o) {
  applyEnvironment(o);
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

  const CollDesc& coll = *findCollective(o.collective);
  Bench bench(o, coll, comm, rank, nranks, o.device ? &dev : nullptr);
  bench.setProgress(wantProgress(o));
  if (!bench.setUp()) {
    collieCommDestroy(comm);
    return 1;
  }
  std::vector<RankInfo> ranks = bench.gatherRanks();
  if (rank == 0) {
    printRunHeader(stdout, o, version, ranks);
    if (o.algo.empty()) printTableHeader(stdout, false, o.reportCputime == 1);
  }
  std::vector<std::string> tables = algorithmTables(o);
  std::vector<bool> runs(tables.size(), true);
  // -N: the run again, each cycle's rows printed as measured (0: until stopped, nccl-tests).
  for (long cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle)
    runSweeps(o, coll, tables, &runs, &bench);
  bench.finish();
  // One algorithm asked for by name that cannot run the collective here: its table was skipped
  // with a line, and nothing was measured, which is no success (--algo all skips and goes on).
  const bool refused = !o.algo.empty() && o.algo != "all" && !runs[0];
  if (refused && rank == 0)
    fprintf(stderr, "collie-perf: --algo %s does not run %s here\n", o.algo.c_str(), coll.name);
  int errors = bench.totalErrors();
  if (rank == 0) printFooter(stdout, o, errors, bench.avgBusBw());
  if ((result = collieCommDestroy(comm)) != collieSuccess) {
    failLibrary(result, nullptr, std::to_string(rank));
  }
  return errors || refused || bench.jsonFailed() ? 1 : 0;
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
