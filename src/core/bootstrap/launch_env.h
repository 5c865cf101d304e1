// What the launcher that started this process tells about the job: which launcher it is, how
// many of the job's ranks run on this host, an id that tells this job (and step) from any other
// running at the same time, and what to set when that is not enough to find rank 0.
#pragma once

#include <string>

namespace collie {

struct LaunchEnv {
  std::string launcher;  // for messages: "srun", "mpiexec (MPICH Hydra)", ...; empty if none
  int localSize = -1;    // ranks of the job on this host; -1 where the launcher does not say
  std::string job;       // unique per running job and step; empty where the launcher gives none
  std::string hint;      // how to set MASTER_ADDR and MASTER_PORT under this launcher
  // The job id differs between hosts (Hydra's proxy), so it only names the job on one host.
  bool jobPerHost = false;
  // torchrun (static rendezvous) serves its own TCPStore on MASTER_PORT.
  bool agentStore = false;
};

LaunchEnv detectLaunchEnv();

}  // namespace collie
