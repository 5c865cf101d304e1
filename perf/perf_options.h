// Command line of collie-perf: the flags of nccl-tests' *_perf programs, parsed strictly.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "collie/collie.h"

namespace collie::perf {

// Datatype and op indices are collieDataType_t / collieRedOp_t values; kAll runs every one.
constexpr int kAll = -1;

struct Options {
  std::string collective = "all_reduce";
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  long stepFactor = 1;  // > 1: multiply the size; otherwise add stepBytes
  int iters = 20;
  int aggIters = 1;  // -m: calls per timed iteration, in one group when above 1
  int warmupIters = 5;
  int runCycles = 1;  // -N: the whole run this many times, each printed; 0 without end
  int check = 1;      // correctness iterations per size and placement; 0 disables the check
  int datatype = collieFloat;
  int op = collieSum;
  int root = 0;           // accepted for nccl-tests compatibility; all_reduce has no root
  int blocking = 0;       // 0 none, 1 barrier after each iteration, 2 wait only, 3 barrier untimed
  int average = 1;        // how ranks' times combine: 0 rank 0, 1 mean, 2 min, 3 max
  int timeoutS = 0;       // -T: the deadline of every operation (COLLIE_TIMEOUT_MS); 0 unchanged
  int reportCputime = 0;  // -C: the time column shows the host time spent issuing the calls
  // nccl-tests flags that mean nothing to a host-driven run: accepted, named in the header.
  int nthreads = 1, ngpus = 1, parallelInit = 0, streamNull = 0, cudaGraph = 0;
  int reportTimestamps = 0, localRegister = 0, ctaPolicy = -1, deviceImpl = 0;
  int deviceCtaCount = 16, memoryReport = 0, unalign = 0, perIterTiming = 0, perIterSkip = 0;
  std::string outputFile;  // -J: written as --json
  std::string csvPath;
  std::string jsonPath;
  // Long options only: -a and -t keep their nccl-tests meanings (average, nthreads).
  std::string algo;       // --algo: COLLIE_ALGO for the communicator ("" = the library's choice)
  std::string transport;  // --transport: COLLIE_TRANSPORT before init ("" = unchanged)
  int repeat = 1;         // --repeat: sweeps; above 1 the table shows medians and a summary
  int progress = -1;      // --progress: 1 on, 0 off, -1 when stdout is no terminal or a file is set
  bool device = false;    // --device: CUDA device buffers (GPU LOCAL_RANK % visible)
  std::string backend = "collie";  // --backend: collie, or nccl (sets COLLIE_BACKEND)
};

enum class ParseOutcome {
  kRun,                    // options are valid
  kHelp,                   // -h: print usage, exit 0
  kBadUsage,               // unknown flag or bad value: message in *error, usage, exit 2
  kUnavailableCollective,  // a collective this build does not have: message, exit 2
};

// Parses argv (optionally led by a collective name). On anything but kRun, *error says why.
ParseOutcome parseOptions(int argc, char** argv, Options* options, std::string* error);

void printUsage(FILE* out);

// "# -G 10: ...; ignored" for each nccl-tests flag given that this run cannot honour, one line
// each, for the header.
std::vector<std::string> ignoredFlagNotes(const Options& options);

}  // namespace collie::perf
