// The collective table of collie-perf (see perf_collectives.h).
#include "perf/perf_collectives.h"

#include <algorithm>
#include <cstring>

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

void fillOwnBlock(const CollCall& c, int rep) {
  size_t b = block(c.count, c.nranks);
  memset(c.recv, 0, blocks(c.count, c.nranks) * elemSize(c.dtype));
  fillInput(inputOf("all_gather", c), b, c.dtype, collieSum, c.nranks, c.rank, rep,
            static_cast<size_t>(c.rank) * b);
}

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
const CollDesc kColls[] = {
    {"all_reduce", true, false, factorAllReduce, whole, whole, runAllReduce, fillWhole,
     checkAllReduce},
    {"reduce_scatter", true, false, factorSplit, blocks, block, runReduceScatter, fillBlocks,
     checkReduceScatter},
    {"all_gather", false, false, factorSplit, block, blocks, runAllGather, fillOwnBlock,
     checkAllGather},
    {"broadcast", false, true, factorOne, whole, whole, runBroadcast, fillRoot, checkBroadcast},
    {"reduce", true, true, factorOne, whole, whole, runReduce, fillWhole, checkReduce},
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

const char* sendPointer(const CollDesc& d, const CollCall& c) {
  if (!c.inPlace) return c.send;
  return std::strcmp(d.name, "all_gather") == 0 ? c.recv + ownBlockBytes(c) : c.recv;
}

char* recvPointer(const CollDesc& d, const CollCall& c) {
  if (c.inPlace && std::strcmp(d.name, "reduce_scatter") == 0) return c.recv + ownBlockBytes(c);
  return c.recv;
}

}  // namespace collie::perf
