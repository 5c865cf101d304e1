// OpenMPI peer driver: one float32 collective (--coll, default allreduce; reductions sum), out
// of place, timed as peer_bench.h says. Started by mpirun; which OpenMPI components it uses is
// mpirun's choice (--mca flags). Rank 0 also prints the library's version line.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "perf/peers/peer_bench.h"

namespace {

using collie::peers::Coll;
using collie::peers::kRoot;
using collie::peers::Layout;

// One call of c on the layout's counts: the MPI routine that does what collie-perf's does.
void runColl(Coll c, const Layout& l, float* in, float* out, int rank, int nranks) {
  const int count = static_cast<int>(l.count), block = static_cast<int>(l.block);
  switch (c) {
    case Coll::kAllReduce:
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return;
    case Coll::kReduceScatter:
      MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return;
    case Coll::kAllGather:
      MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
      return;
    case Coll::kBroadcast:
      // One buffer: root's input goes out, the others' output comes in.
      MPI_Bcast(rank == kRoot ? in : out, count, MPI_FLOAT, kRoot, MPI_COMM_WORLD);
      return;
    case Coll::kReduce:
      MPI_Reduce(in, out, count, MPI_FLOAT, MPI_SUM, kRoot, MPI_COMM_WORLD);
      return;
    case Coll::kAlltoAll:
      MPI_Alltoall(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
      return;
    case Coll::kSendRecv:
      MPI_Sendrecv(in, count, MPI_FLOAT, (rank + 1) % nranks, 0, out, count, MPI_FLOAT,
                   (rank - 1 + nranks) % nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return;
    case Coll::kGather:
      MPI_Gather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, kRoot, MPI_COMM_WORLD);
      return;
    case Coll::kScatter:
      MPI_Scatter(in, block, MPI_FLOAT, out, block, MPI_FLOAT, kRoot, MPI_COMM_WORLD);
      return;
  }
}

void printVersion() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  // The first line of the version text, which names the implementation and release.
  std::string first(version, len);
  printf("version %s\n", first.substr(0, first.find_first_of("\n,")).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  collie::peers::PeerOptions o;
  o.label = "mpi";
  if (!collie::peers::parsePeerOptions(argc, argv, &o)) MPI_Abort(MPI_COMM_WORLD, 2);
  if (rank == 0) printVersion();
  size_t maxCount = o.maxBytes / 4;
  std::vector<float> in(maxCount ? maxCount : 1), out(maxCount ? maxCount : 1);
  const Coll coll = o.coll->coll;
  collie::peers::PeerHooks h;
  h.run = [&](const Layout& l) { runColl(coll, l, in.data(), out.data(), rank, nranks); };
  h.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  h.maxOverRanks = [](double v) {
    double r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return r;
  };
  h.input = [&] { return in.data(); };
  // Root's broadcast leaves its result where its input was.
  h.output = [&] { return coll == Coll::kBroadcast && rank == kRoot ? in.data() : out.data(); };
  int failed = collie::peers::runSweep(o, rank, nranks, h);
  MPI_Finalize();
  return failed ? 1 : 0;
}
