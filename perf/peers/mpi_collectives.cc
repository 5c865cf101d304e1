// OpenMPI peer driver: float32 sum MPI_Allreduce, out of place, timed as peer_bench.h says.
// Started by mpirun; which OpenMPI components it uses is mpirun's choice (--mca flags).
// Rank 0 also prints the library's version line.
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "perf/peers/peer_bench.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  collie::peers::PeerOptions o;
  o.label = "mpi";
  if (!collie::peers::parsePeerOptions(argc, argv, &o)) MPI_Abort(MPI_COMM_WORLD, 2);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    // The first line of the version text, which names the implementation and release.
    std::string first(version, len);
    printf("version %s\n", first.substr(0, first.find_first_of("\n,")).c_str());
  }
  size_t maxCount = o.maxBytes / 4;
  std::vector<float> in(maxCount ? maxCount : 1), out(maxCount ? maxCount : 1);
  collie::peers::PeerHooks h;
  h.allreduce = [&](size_t count) {
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  };
  h.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  h.maxOverRanks = [](double v) {
    double r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return r;
  };
  h.fillInput = [&](size_t count, float value) {
    std::fill(in.begin(), in.begin() + count, value);
    std::fill(out.begin(), out.begin() + count, 0.0f);
  };
  h.output = [&] { return out.data(); };
  int failed = collie::peers::runSweep(o, rank, nranks, h);
  MPI_Finalize();
  return failed ? 1 : 0;
}
