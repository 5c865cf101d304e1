// Each phase of init fails with its own message, which names the init (rank, size, how the
// ranks met, the store) and what went wrong, on every rank the phase reaches.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

struct PhaseCase {
  const char* phase;
  std::vector<std::pair<std::string, std::string>> env;
  bool hostPerRank;  // each rank on a host of its own (COLLIE_HOSTID)
  collieResult_t code;
  const char* says;
  int absent = -1;  // a rank that never calls init
};

void expectInitFails(const PhaseCase& c) {
  WorldOptions opt;
  opt.env = c.env;
  opt.env.push_back({"COLLIE_SOCKET_IFNAME", "lo"});
  if (c.absent < 0) opt.env.push_back({"COLLIE_CONNECT_TIMEOUT_MS", "5000"});
  auto out = runWorld(2, opt, [&c](int rank, Reporter& rep) {
    if (rank == c.absent) return;
    if (c.hostPerRank) setenv("COLLIE_HOSTID", ("host" + std::to_string(rank)).c_str(), 1);
    collieComm_t comm = nullptr;
    const collieResult_t r = collieCommInitFromEnv(&comm);
    const std::string msg = collieGetLastError(nullptr);
    const std::string init = "init of rank " + std::to_string(rank) + " of 2 (environment";
    if (r != c.code) rep.fail(std::string(c.phase) + ": code " + std::to_string(r) + ": " + msg);
    if (msg.find(init) != 0)
      rep.fail(std::string(c.phase) + ": does not begin '" + init + "': " + msg);
    if (msg.find(c.says) == std::string::npos)
      rep.fail(std::string(c.phase) + ": does not say '" + c.says + "': " + msg);
    if (comm != nullptr) collieCommDestroy(comm);
  });
  expectAllPassed(out);
}

TEST(InitPhases, ConfigureRefusesABadSettingBeforeAnythingConnects) {
  expectInitFails({"configure",
                   {{"COLLIE_TRANSPORT", "tcp,pigeon"}},
                   false,
                   collieInvalidArgument,
                   "COLLIE_TRANSPORT=tcp,pigeon: 'pigeon' is not"});
}

TEST(InitPhases, MeetNamesTheRankThatNeverArrived) {
  expectInitFails({"meet",
                   {{"COLLIE_CONNECT_TIMEOUT_MS", "1500"}},
                   false,
                   collieTimeout,
                   "rendezvous timed out after 1500 ms; ranks never arrived: 1",
                   /*absent=*/1});
}

TEST(InitPhases, ConnectSaysWhichPeerNoAllowedTransportReaches) {
  expectInitFails({"connect",
                   {{"COLLIE_TRANSPORT", "shm"}},
                   true,
                   collieInvalidArgument,
                   "COLLIE_TRANSPORT=shm cannot reach peer rank"});
}

TEST(InitPhases, TuningRefusesLinkFiguresItCannotRead) {
  expectInitFails({"tuning",
                   {{"COLLIE_TUNER_LINKS", "tcp=fast"}},
                   false,
                   collieInvalidArgument,
                   "COLLIE_TUNER_LINKS"});
}

}  // namespace
}  // namespace testing
}  // namespace collie
