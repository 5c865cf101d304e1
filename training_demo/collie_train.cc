// collie-train: the training demo's executable. Under a launcher (collie-run, torchrun-style
// environment, mpirun, srun) it joins the job through Collie; started alone it trains as one
// rank with no communicator. Prints the run's summary line and exits non-zero on any error.
#include <cstdio>
#include <cstdlib>

#include "collie/collie.hpp"
#include "training_demo/options.h"
#include "training_demo/trainer.h"

namespace {

// Whether a launcher gave this process a rank (the variables collieCommInitFromEnv reads).
bool launched() {
  for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (getenv(v)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace collie::train;
  Options options;
  if (Status st = parseOptions(argc, argv, &options); !st.ok()) {
    fprintf(stderr, "collie-train: %s\n", st.message().c_str());
    return 2;
  }
  if (options.help) {
    fputs(usage().c_str(), stdout);
    return 0;
  }
  collie::Communicator comm;
  if (launched()) {
    if (collie::Result r = collie::Communicator::initFromEnv(&comm); !r) {
      fprintf(stderr, "collie-train: cannot join the job: %s\n", r.toString().c_str());
      return 1;
    }
  }
  const int rank = comm.valid() ? comm.rank() : 0;
  RunSummary s;
  if (Status st = runTraining(options, comm.valid() ? &comm : nullptr, &s); !st.ok()) {
    fprintf(stderr, "collie-train: rank %d: error: %s\n", rank, st.message().c_str());
    // Tell the peers at once rather than letting them find out by a deadline.
    if (comm.valid()) comm.abort();
    return 1;
  }
  if (rank == 0) {
    char acc[32] = "n/a";
    if (s.testAccuracy >= 0) snprintf(acc, sizeof(acc), "%.2f%%", 100 * s.testAccuracy);
    printf(
        "final: test accuracy %s after %d epochs (%lld steps), %.2f s training, %.0f "
        "samples/s, comm wait %.1f%% of step time (overlap %s)\n",
        acc, s.epochsDone, static_cast<long long>(s.steps), s.trainSeconds, s.samplesPerSec,
        100 * s.commShare, s.overlap ? "on" : "off");
  }
  return 0;
}
