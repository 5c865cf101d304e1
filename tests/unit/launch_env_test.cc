// Launcher environments (what each launcher sets decides where the store is and what an error
// says), and the client of torchrun's agent store against a real torch TCPStore.
#include "src/core/bootstrap/launch_env.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>

#include "src/core/bootstrap/bootstrap.h"
#include "src/core/bootstrap/torch_store_client.h"

namespace collie {
namespace {

// Exactly the given variables of every launcher's; the others unset.
class LauncherVars {
 public:
  explicit LauncherVars(const std::map<std::string, std::string>& vars) {
    for (const char* n : kAll) unsetenv(n);
    for (const auto& kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
  ~LauncherVars() {
    for (const char* n : kAll) unsetenv(n);
  }

 private:
  static constexpr const char* kAll[] = {"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "COLLIE_SECRET",
                                         "TORCHELASTIC_RUN_ID",
                                         "TORCHELASTIC_RESTART_COUNT",
                                         "TORCHELASTIC_USE_AGENT_STORE",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_SIZE",
                                         "OMPI_MCA_ess_base_jobid",
                                         "PMIX_NAMESPACE",
                                         "PMIX_RANK",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "PMI_FD",
                                         "MPI_LOCALNRANKS",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_NNODES",
                                         "SLURM_STEP_NUM_NODES",
                                         "SLURM_STEP_NUM_TASKS",
                                         "SLURM_JOB_ID",
                                         "SLURM_STEP_ID"};
};

std::map<std::string, std::string> srunVars(const std::string& nodes, const std::string& step) {
  return {{"SLURM_PROCID", "1"},         {"SLURM_NTASKS", "3"},  {"SLURM_STEP_NUM_NODES", nodes},
          {"SLURM_STEP_NUM_TASKS", "3"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", step}};
}

TEST(LaunchEnv, SrunOnOneNodeDerivesTheStoreFromJobAndStep) {
  std::vector<SockAddr> step0;
  uint64_t comm0 = 0;
  {
    LauncherVars v(srunVars("1", "0"));
    auto b = bootstrapFromEnv();
    ASSERT_TRUE(b.isOk()) << b.status().message();
    EXPECT_EQ(b.value().rank, 1);
    EXPECT_EQ(b.value().nranks, 3);
    EXPECT_NE(b.value().how.find("srun"), std::string::npos) << b.value().how;
    ASSERT_EQ(b.value().storeChoices.size(), kJobStorePorts);
    EXPECT_EQ(b.value().storeChoices[0].port(), jobStorePorts("slurm/77.0")[0]);
    step0 = b.value().storeChoices;
    comm0 = b.value().auth.commId;
  }
  // A second step of the job at the same time: other ports first, and another secret.
  LauncherVars v(srunVars("1", "1"));
  auto b = bootstrapFromEnv();
  ASSERT_TRUE(b.isOk()) << b.status().message();
  EXPECT_NE(b.value().storeChoices[0].port(), step0[0].port());
  EXPECT_NE(b.value().auth.commId, comm0);
}

TEST(LaunchEnv, SrunAcrossNodesWithoutMasterSaysWhatToSet) {
  LauncherVars v(srunVars("2", "0"));
  auto b = bootstrapFromEnv();
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), collieInvalidArgument);
  EXPECT_NE(b.status().message().find(
                "under srun across nodes set MASTER_ADDR and MASTER_PORT (export them before srun"),
            std::string::npos)
      << b.status().message();
}

TEST(LaunchEnv, HydraOnOneHostNeedsItsProxyAndSaysGenvOtherwise) {
  // Hydra's variables; PMI_FD names no socket here, so there is no job id to derive from.
  LauncherVars v(
      {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}, {"PMI_FD", "1000"}});
  EXPECT_EQ(detectLaunchEnv().launcher, "mpiexec (MPICH Hydra)");
  EXPECT_EQ(detectLaunchEnv().localSize, 2);
  auto b = bootstrapFromEnv();
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.status().message().find("-genv MASTER_ADDR"), std::string::npos)
      << b.status().message();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29999", 1);
  auto withMaster = bootstrapFromEnv();
  ASSERT_TRUE(withMaster.isOk()) << withMaster.status().message();
  EXPECT_EQ(withMaster.value().storeAddr.port(), 29999);
}

TEST(LaunchEnv, HydraAcrossHostsLeavesTheProxyOutOfTheSecret) {
  // Each host's ranks talk to their own proxy: with MASTER_ADDR set, a rank whose PMI_FD names a
  // proxy (here this process) must derive the secret of a rank that names none.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::map<std::string, std::string> vars = {{"PMI_RANK", "0"},
                                             {"PMI_SIZE", "4"},
                                             {"MPI_LOCALNRANKS", "2"},
                                             {"MASTER_ADDR", "127.0.0.1"},
                                             {"MASTER_PORT", "29999"}};
  uint64_t withoutProxy = 0;
  {
    LauncherVars v(vars);
    auto b = bootstrapFromEnv();
    ASSERT_TRUE(b.isOk()) << b.status().message();
    withoutProxy = b.value().auth.commId;
  }
  vars["PMI_FD"] = std::to_string(sv[0]);
  LauncherVars v(vars);
  EXPECT_EQ(detectLaunchEnv().job, "hydra/" + std::to_string(getpid()));
  auto b = bootstrapFromEnv();
  ASSERT_TRUE(b.isOk()) << b.status().message();
  EXPECT_EQ(b.value().auth.commId, withoutProxy);
  close(sv[0]);
  close(sv[1]);
}

TEST(LaunchEnv, TorchrunAgentStoreGivesAFreshKeyPerRunRestartAndInit) {
  LauncherVars v({{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29501"},
                  {"TORCHELASTIC_RUN_ID", "run7"},
                  {"TORCHELASTIC_RESTART_COUNT", "2"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  auto a = bootstrapFromEnv();
  auto b = bootstrapFromEnv();
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ(a.value().agentStore.port(), 29501);
  EXPECT_EQ(a.value().storeAddr.port(), 0);  // rank 0 lets the OS pick
  EXPECT_NE(a.value().agentKey.find("torch/run7/2/"), std::string::npos) << a.value().agentKey;
  EXPECT_NE(a.value().agentKey, b.value().agentKey);
  EXPECT_NE(a.value().auth.commId, b.value().auth.commId);
  // c10d rendezvous: the agent keeps no store on MASTER_PORT, so rank 0 serves there.
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  auto c = bootstrapFromEnv();
  ASSERT_TRUE(c.isOk());
  EXPECT_TRUE(c.value().agentKey.empty());
  EXPECT_EQ(c.value().storeAddr.port(), 29501);
}

// A torch TCPStore served by /usr/bin/python3: it sets "from-python", prints its port, then
// prints what Collie set under "from-collie".
constexpr const char* kTorchServer =
    "/usr/bin/python3 -c '\n"
    "import sys, datetime\n"
    "try:\n"
    "    import torch.distributed as d\n"
    "except Exception:\n"
    "    print(\"none\", flush=True); sys.exit(0)\n"
    "s = d.TCPStore(\"127.0.0.1\", 0, None, True, datetime.timedelta(seconds=20), "
    "wait_for_workers=False)\n"
    "s.set(\"from-python\", \"hello from python\")\n"
    "print(s.port, flush=True)\n"
    "print(s.get(\"from-collie\").decode(), flush=True)\n"
    "' 2>&1";

TEST(TorchStoreClient, TalksToARealTorchTcpStore) {
  FILE* py = popen(kTorchServer, "r");
  ASSERT_NE(py, nullptr);
  char line[256] = {};
  if (fgets(line, sizeof(line), py) == nullptr || strncmp(line, "none", 4) == 0) {
    pclose(py);
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (make test installs python3-torch)";
  }
  const int port = atoi(line);
  ASSERT_GT(port, 0) << line;
  auto addr = resolveHost("127.0.0.1", port);
  ASSERT_TRUE(addr.isOk());
  auto c = TorchStoreClient::connect(addr.value(), Deadline::afterMs(10000));
  ASSERT_TRUE(c.isOk()) << c.status().message();
  // torch's Python API prefixes its keys with "/".
  auto got = c.value()->get("/from-python", Deadline::afterMs(10000));
  ASSERT_TRUE(got.isOk()) << got.status().message();
  EXPECT_EQ(got.value(), "hello from python");
  const auto start = std::chrono::steady_clock::now();
  auto missing = c.value()->get("/never-set", Deadline::afterMs(300));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  EXPECT_EQ(missing.status().code(), collieTimeout);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 5000);
  ASSERT_TRUE(
      publishStorePort(addr.value(), "/collie/t/port", 43210, Deadline::afterMs(5000)).isOk());
  auto p = readStorePort(addr.value(), "/collie/t/port", Deadline::afterMs(5000));
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p.value(), 43210);
  // The connection still serves after a wait that timed out.
  ASSERT_TRUE(c.value()->set("/from-collie", "set by collie", Deadline::afterMs(5000)).isOk());
  ASSERT_NE(fgets(line, sizeof(line), py), nullptr);
  EXPECT_STREQ(line, "set by collie\n");
  EXPECT_EQ(pclose(py), 0);
}

}  // namespace
}  // namespace collie
