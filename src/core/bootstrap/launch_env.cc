// Launcher detection from the variables each launcher sets for its ranks.
#include "src/core/bootstrap/launch_env.h"

#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace collie {

namespace {

const char* env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int envInt(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return -1;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  return end != v && *end == '\0' && x >= 0 && x <= (1 << 24) ? static_cast<int>(x) : -1;
}

int firstInt(const char* a, const char* b) { return envInt(a) >= 0 ? envInt(a) : envInt(b); }

bool isTrue(const char* v) {
  return v != nullptr && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

// Hydra passes no job id; the process that serves PMI_FD (the host's proxy, one per job and host)
// is the peer of that socket.
std::string hydraJob() {
  const int fd = envInt("PMI_FD");
  if (fd < 0) return "";
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) return "";
  return "hydra/" + std::to_string(cred.pid);
}

LaunchEnv slurm() {
  LaunchEnv e;
  e.launcher = "srun";
  e.hint =
      "under srun across nodes set MASTER_ADDR and MASTER_PORT (export them before srun, e.g. "
      "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
      "MASTER_PORT=29500)";
  // Only with one node do the step's tasks all share this host.
  if (firstInt("SLURM_STEP_NUM_NODES", "SLURM_NNODES") == 1)
    e.localSize = firstInt("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
  // Two steps of one job may run at once: the step tells them apart.
  if (const char* j = env("SLURM_JOB_ID"))
    e.job = std::string("slurm/") + j + "." + (env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "");
  return e;
}

}  // namespace

LaunchEnv detectLaunchEnv() {
  LaunchEnv e;
  if (env("TORCHELASTIC_RUN_ID") != nullptr) {
    e.launcher = "torchrun";
    e.hint = "torchrun sets them: pass --master_addr and --master_port across hosts";
    e.agentStore = isTrue(env("TORCHELASTIC_USE_AGENT_STORE"));
    // A restarted worker group must never read the address its predecessor published.
    e.job = std::string("torch/") + env("TORCHELASTIC_RUN_ID") + "/" +
            (env("TORCHELASTIC_RESTART_COUNT") ? env("TORCHELASTIC_RESTART_COUNT") : "0");
    return e;
  }
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {
    e.launcher = "mpirun (OpenMPI)";
    e.hint = "under mpirun across hosts pass -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=<port>";
    e.localSize = envInt("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char* j = env("OMPI_MCA_ess_base_jobid");
    if (j == nullptr) j = env("PMIX_NAMESPACE");
    if (j != nullptr) e.job = j;
    return e;
  }
  if (env("PMI_RANK") != nullptr && env("MPI_LOCALNRANKS") != nullptr) {
    e.launcher = "mpiexec (MPICH Hydra)";
    e.hint =
        "under mpiexec across hosts pass -genv MASTER_ADDR <host of rank 0> -genv MASTER_PORT "
        "<port>";
    e.localSize = envInt("MPI_LOCALNRANKS");
    e.job = hydraJob();
    e.jobPerHost = true;
    return e;
  }
  if (env("SLURM_PROCID") != nullptr) return slurm();
  e.hint = "set MASTER_ADDR and MASTER_PORT to the host of rank 0 and a free port";
  if (env("LOCAL_WORLD_SIZE") != nullptr) e.localSize = envInt("LOCAL_WORLD_SIZE");
  if (const char* ns = env("PMIX_NAMESPACE")) e.job = ns;
  return e;
}

}  // namespace collie
