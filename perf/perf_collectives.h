// The collectives collie-perf measures, one small table entry each (as nccl-tests has one
// testColl per collective): how a size maps to counts, where the in-place buffers sit, the
// bus-bandwidth factor, how to run it, how to fill its inputs and check its result.
//
// A size is the per-rank total in bytes, as in nccl-tests: the whole vector of an all-reduce,
// reduce, broadcast or sendrecv; the send vector of a reduce-scatter (each rank gets 1/n of it)
// and of a scatter (root's); the receive vector of an all-gather (each rank gives 1/n of it)
// and of a gather (root's); either vector of an all-to-all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collie/collie.h"

namespace collie::perf {

// One run's buffers and arguments; counts are elements.
struct CollCall {
  collieComm_t comm;
  int rank;
  int nranks;
  int root;
  collieDataType_t dtype;
  collieRedOp_t op;
  size_t count;  // size / element size: the total the table prints
  char* send;    // the base of this iteration's send window
  char* recv;    // and of its receive window
  bool inPlace;
  void* stream = nullptr;  // the CUDA stream for device buffers (--device), else null
};

struct CollDesc {
  const char* name;  // nccl-tests spelling: all_reduce, reduce_scatter, ...
  bool hasOp;        // reductions; the others print op "none" and run once per datatype
  bool hasRoot;
  // bus bandwidth = algorithm bandwidth * busFactor(nranks)
  double (*busFactor)(int nranks);
  // Elements per rank in the send and receive buffers for a total of count.
  size_t (*sendCount)(size_t count, int nranks);
  size_t (*recvCount)(size_t count, int nranks);
  collieResult_t (*run)(const CollCall& c);
  // Writes this rank's inputs for repetition rep (into the buffer run() reads).
  void (*fill)(const CollCall& c, int rep);
  // Wrong elements of this rank's result for repetition rep.
  int64_t (*check)(const CollCall& c, int rep);
  // False where the in-place call has no defined result to check (sendrecv sends and receives
  // the one buffer): it is timed, and its #wrong reads N/A.
  bool checksInPlace = true;
  // False for point-to-point calls, which no algorithm runs: --algo names none ("p2p" under
  // auto), so that no table claims an algorithm that did not run.
  bool usesAlgorithm = true;
};

// The entry called name (aliases without the underscore too), or null.
const CollDesc* findCollective(const std::string& name);
// "all_reduce, reduce_scatter, ...": every name, in table order.
std::string collectiveNames();

// Where run() reads and writes for this call: the send pointer (the recv window, offset as
// the collective's in-place layout says, when in place) and the recv pointer.
const char* sendPointer(const CollDesc& d, const CollCall& c);
char* recvPointer(const CollDesc& d, const CollCall& c);

}  // namespace collie::perf
