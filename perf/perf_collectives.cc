// The collective table of collie-perf (see perf_collectives.h).
#include "perf/perf_collectives.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "perf/perf_data.h"

namespace collie::perf {
namespace {

size_t elemSize(collieDataType_t t) { return typeInfo(t).size; }

double factorAllReduce(int n) { return 2.0 * (n - 1) / n; }
double factorSplit(int n) { return static_cast<double>(n - 1) / n; }
double factorOne(int) { return 1.0; }

size_t whole(size_t count, int) { return count; }
size_t block(size_t count, int n) { return count / static_cast<size_t>(n); }
size_t blocks(size_t count, int n) { return count / static_cast<size_t>(n) * n; }

// This rank's block of the whole buffer: where an in-place all-gather's input and an in-place
// reduce-scatter's output sit. Everything else in place uses the one buffer from its start.
size_t ownBlockBytes(const CollCall& c) {
  return static_cast<size_t>(c.rank) * block(c.count, c.nranks) * elemSize(c.dtype);
}

// The entry called name in kColls (below).
const CollDesc& desc(const char* name);

collieResult_t runAllReduce(const CollCall& c) {
  const CollDesc& d = desc("all_reduce");
  return collieAllReduce(sendPointer(d, c), recvPointer(d, c), c.count, c.dtype, c.op, c.comm,
                         c.stream);
}

collieResult_t runReduceScatter(const CollCall& c) {
  const CollDesc& d = desc("reduce_scatter");
  return collieReduceScatter(sendPointer(d, c), recvPointer(d, c), block(c.count, c.nranks),
                             c.dtype, c.op, c.comm, c.stream);
}

collieResult_t runAllGather(const CollCall& c) {
  const CollDesc& d = desc("all_gather");
  return collieAllGather(sendPointer(d, c), recvPointer(d, c), block(c.count, c.nranks), c.dtype,
                         c.comm, c.stream);
}

collieResult_t runBroadcast(const CollCall& c) {
  const CollDesc& d = desc("broadcast");
  return collieBroadcast(sendPointer(d, c), recvPointer(d, c), c.count, c.dtype, c.root, c.comm,
                         c.stream);
}

collieResult_t runReduce(const CollCall& c) {
  const CollDesc& d = desc("reduce");
  return collieReduce(sendPointer(d, c), recvPointer(d, c), c.count, c.dtype, c.op, c.root, c.comm,
                      c.stream);
}

// Collective calls of two or more library calls fail with the first error; a group opened is
// always closed, so that a failed call does not leave the next one inside it.
collieResult_t firstError(std::initializer_list<collieResult_t> results) {
  for (collieResult_t r : results)
    if (r != collieSuccess) return r;
  return collieSuccess;
}

// nccl-tests' sendrecv: a ring, each rank sending to the next and receiving from the previous,
// both posted in one group so that neither waits for the other.
collieResult_t runSendRecv(const CollCall& c) {
  const CollDesc& d = desc("sendrecv");
  collieResult_t start = collieGroupStart();
  if (start != collieSuccess) return start;
  collieResult_t send =
      collieSend(sendPointer(d, c), c.count, c.dtype, (c.rank + 1) % c.nranks, c.comm, c.stream);
  collieResult_t recv = send != collieSuccess
                            ? send
                            : collieRecv(recvPointer(d, c), c.count, c.dtype,
                                         (c.rank - 1 + c.nranks) % c.nranks, c.comm, c.stream);
  collieResult_t end = collieGroupEnd();
  return firstError({send, recv, end});
}

collieResult_t runAlltoAll(const CollCall& c) {
  const CollDesc& d = desc("alltoall");
  return collieAlltoAll(sendPointer(d, c), recvPointer(d, c), block(c.count, c.nranks), c.dtype,
                        c.comm, c.stream);
}

collieResult_t runGather(const CollCall& c) {
  const CollDesc& d = desc("gather");
  return collieGather(sendPointer(d, c), recvPointer(d, c), block(c.count, c.nranks), c.dtype,
                      c.root, c.comm, c.stream);
}

collieResult_t runScatter(const CollCall& c) {
  const CollDesc& d = desc("scatter");
  return collieScatter(sendPointer(d, c), recvPointer(d, c), block(c.count, c.nranks), c.dtype,
                       c.root, c.comm, c.stream);
}

// Inputs go where run() reads them; the output region is zeroed first so that a collective
// that writes nothing is caught.
void* inputOf(const char* name, const CollCall& c) {
  return const_cast<char*>(sendPointer(desc(name), c));
}

void zeroRecv(const char* name, const CollCall& c) {
  const CollDesc& d = desc(name);
  if (!c.inPlace) memset(c.recv, 0, d.recvCount(c.count, c.nranks) * elemSize(c.dtype));
}

void fillWhole(const CollCall& c, int rep) {
  zeroRecv("all_reduce", c);
  fillInput(inputOf("all_reduce", c), c.count, c.dtype, c.op, c.nranks, c.rank, rep);
}

int64_t checkAllReduce(const CollCall& c, int rep) {
  return countWrong(recvPointer(desc("all_reduce"), c), c.count, c.dtype, c.op, c.nranks, rep);
}

void fillBlocks(const CollCall& c, int rep) {
  zeroRecv("reduce_scatter", c);
  fillInput(inputOf("reduce_scatter", c), blocks(c.count, c.nranks), c.dtype, c.op, c.nranks,
            c.rank, rep);
}

int64_t checkReduceScatter(const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  return countWrong(recvPointer(desc("reduce_scatter"), c), b, c.dtype, c.op, c.nranks, rep,
                    static_cast<size_t>(c.rank) * b);
}

// All-gather and gather: rank r's input is block r of the result (indices r * b onwards).
void fillOwnBlockOf(const char* name, const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  memset(c.recv, 0, blocks(c.count, c.nranks) * elemSize(c.dtype));
  fillInput(inputOf(name, c), b, c.dtype, collieSum, c.nranks, c.rank, rep,
            static_cast<size_t>(c.rank) * b);
}

void fillOwnBlock(const CollCall& c, int rep) { fillOwnBlockOf("all_gather", c, rep); }
void fillGather(const CollCall& c, int rep) { fillOwnBlockOf("gather", c, rep); }

int64_t checkAllGather(const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  int64_t wrong = 0;
  for (int r = 0; r < c.nranks; ++r) {
    size_t first = static_cast<size_t>(r) * b;
    wrong += countWrongCopy(c.recv + first * elemSize(c.dtype), b, c.dtype, collieSum, c.nranks, r,
                            rep, first);
  }
  return wrong;
}

int64_t checkGather(const CollCall& c, int rep) {
  return c.rank == c.root ? checkAllGather(c, rep) : 0;  // only root's buffer holds a result
}

void fillSendRecv(const CollCall& c, int rep) {
  zeroRecv("sendrecv", c);
  fillInput(inputOf("sendrecv", c), c.count, c.dtype, collieSum, c.nranks, c.rank, rep);
}

int64_t checkSendRecv(const CollCall& c, int rep) {
  return countWrongCopy(c.recv, c.count, c.dtype, collieSum, c.nranks,
                        (c.rank - 1 + c.nranks) % c.nranks, rep, 0);
}

// Rank r sends block j (indices j * b onwards of its vector) to rank j.
void fillAlltoAll(const CollCall& c, int rep) {
  zeroRecv("alltoall", c);
  fillInput(inputOf("alltoall", c), blocks(c.count, c.nranks), c.dtype, collieSum, c.nranks, c.rank,
            rep);
}

// Block r of the result is block `rank` of rank r's vector.
int64_t checkAlltoAll(const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  int64_t wrong = 0;
  for (int r = 0; r < c.nranks; ++r) {
    wrong += countWrongCopy(c.recv + static_cast<size_t>(r) * b * elemSize(c.dtype), b, c.dtype,
                            collieSum, c.nranks, r, rep, static_cast<size_t>(c.rank) * b);
  }
  return wrong;
}

// The whole window is zeroed, in place the rank's own block within it too.
void fillScatter(const CollCall& c, int rep) {
  memset(c.recv, 0, blocks(c.count, c.nranks) * elemSize(c.dtype));
  if (c.rank == c.root) {
    fillInput(inputOf("scatter", c), blocks(c.count, c.nranks), c.dtype, collieSum, c.nranks,
              c.root, rep);
  }
}

int64_t checkScatter(const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  return countWrongCopy(recvPointer(desc("scatter"), c), b, c.dtype, collieSum, c.nranks, c.root,
                        rep, static_cast<size_t>(c.rank) * b);
}

void fillRoot(const CollCall& c, int rep) {
  memset(c.recv, 0, c.count * elemSize(c.dtype));
  if (c.rank == c.root) {
    fillInput(inputOf("broadcast", c), c.count, c.dtype, collieSum, c.nranks, c.root, rep);
  }
}

int64_t checkBroadcast(const CollCall& c, int rep) {
  return countWrongCopy(c.recv, c.count, c.dtype, collieSum, c.nranks, c.root, rep, 0);
}

int64_t checkReduce(const CollCall& c, int rep) {
  if (c.rank != c.root) return 0;  // only root's buffer holds a result
  return countWrong(c.recv, c.count, c.dtype, c.op, c.nranks, rep);
}

// What each collective does, nccl-tests' way:
// all_reduce: every rank gets the reduction of the whole vector.
// reduce_scatter: rank r gets block r of the reduction.
// all_gather: block b of the result is rank b's input, which holds the block-b indices.
// broadcast: root's vector everywhere.
// reduce: the reduction on root only.
// sendrecv: rank r gets rank r-1's vector (in place it is timed only: nccl-tests' N/A).
// alltoall: block j of rank i's result is block i of rank j's vector.
// gather: root gets block r from rank r, as all_gather does everywhere.
// scatter: rank r gets block r of root's vector.
const CollDesc kColls[] = {
    {"all_reduce", true, false, factorAllReduce, whole, whole, runAllReduce, fillWhole,
     checkAllReduce},
    {"reduce_scatter", true, false, factorSplit, blocks, block, runReduceScatter, fillBlocks,
     checkReduceScatter},
    {"all_gather", false, false, factorSplit, block, blocks, runAllGather, fillOwnBlock,
     checkAllGather},
    {"broadcast", false, true, factorOne, whole, whole, runBroadcast, fillRoot, checkBroadcast},
    {"reduce", true, true, factorOne, whole, whole, runReduce, fillWhole, checkReduce},
    {"sendrecv", false, false, factorOne, whole, whole, runSendRecv, fillSendRecv, checkSendRecv,
     false, false},
    {"alltoall", false, false, factorSplit, blocks, blocks, runAlltoAll, fillAlltoAll,
     checkAlltoAll},
    {"gather", false, true, factorSplit, block, blocks, runGather, fillGather, checkGather},
    {"scatter", false, true, factorSplit, blocks, block, runScatter, fillScatter, checkScatter},
};

const CollDesc& desc(const char* name) {
  for (const CollDesc& d : kColls)
    if (std::strcmp(d.name, name) == 0) return d;
  return kColls[0];
}

}  // namespace

const CollDesc* findCollective(const std::string& name) {
  for (const CollDesc& d : kColls) {
    std::string plain = d.name;
    plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
    if (name == d.name || name == plain) return &d;
  }
  return nullptr;
}

std::string collectiveNames() {
  std::string out;
  for (const CollDesc& d : kColls) out += std::string(out.empty() ? "" : ", ") + d.name;
  return out;
}

// In place, the collectives whose input is one block of the window read it from this rank's
// block, and those whose output is one block write it there.
const char* sendPointer(const CollDesc& d, const CollCall& c) {
  if (!c.inPlace) return c.send;
  bool ownBlock = std::strcmp(d.name, "all_gather") == 0 || std::strcmp(d.name, "gather") == 0;
  return ownBlock ? c.recv + ownBlockBytes(c) : c.recv;
}

char* recvPointer(const CollDesc& d, const CollCall& c) {
  if (!c.inPlace) return c.recv;
  bool ownBlock = std::strcmp(d.name, "reduce_scatter") == 0 || std::strcmp(d.name, "scatter") == 0;
  return ownBlock ? c.recv + ownBlockBytes(c) : c.recv;
}

}  // namespace collie::perf
