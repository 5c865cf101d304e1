// Unique ids and environment bootstrap.
#include "src/core/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/base/log.h"
#include "src/base/params.h"
#include "src/core/bootstrap/launch_env.h"

namespace collie {

namespace {

constexpr uint32_t kIdMagic = 0x434c4944;  // "CLID"
constexpr uint16_t kIdVersion = 1;

struct IdLayout {
  uint32_t magic;
  uint16_t version;
  uint16_t family;
  uint16_t port;
  uint8_t ip[16];
  uint8_t secret[16];
  uint64_t commId;
};
static_assert(sizeof(IdLayout) <= COLLIE_UNIQUE_ID_BYTES, "id fits");

// Servers made by collieGetUniqueId in this process, until a rank of this process adopts one.
std::mutex gServersMu;
std::vector<std::unique_ptr<StoreServer>> gServers;  // guarded by gServersMu

Status randomBytes(void* buf, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errnoStatus("open /dev/urandom", errno);
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, static_cast<char*>(buf) + got, n - got);
    if (r <= 0) {
      close(fd);
      return errnoStatus("read /dev/urandom", errno);
    }
    got += static_cast<size_t>(r);
  }
  close(fd);
  return Status::ok();
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

const char* firstEnv(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (v != nullptr && *v != '\0') {
      if (which) *which = n;
      return v;
    }
  }
  return nullptr;
}

StatusOr<int> parseEnvInt(const char* name, const char* v) {
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0 || x > (1 << 24))
    return invalidArgument(std::string(name) + "=" + v + " is not a valid number");
  return static_cast<int>(x);
}

}  // namespace

Status makeUniqueId(collieUniqueId* out) {
  IdLayout id{};
  id.magic = kIdMagic;
  id.version = kIdVersion;
  COLLIE_RETURN_IF_ERROR(randomBytes(id.secret, sizeof(id.secret)));
  COLLIE_RETURN_IF_ERROR(randomBytes(&id.commId, sizeof(id.commId)));
  COLLIE_ASSIGN_OR_RETURN(SockAddr local,
                          pickLocalAddress(nullptr, params().getString("COLLIE_SOCKET_IFNAME")));
  StoreAuth auth;
  memcpy(auth.secret, id.secret, 16);
  auth.commId = id.commId;
  COLLIE_ASSIGN_OR_RETURN(std::unique_ptr<StoreServer> server, StoreServer::start(local, auth));
  const SockAddr& a = server->address();
  id.family = static_cast<uint16_t>(a.family());
  id.port = static_cast<uint16_t>(a.port());
  if (a.family() == AF_INET)
    memcpy(id.ip, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, 4);
  else
    memcpy(id.ip, &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, 16);
  {
    std::lock_guard<std::mutex> l(gServersMu);
    gServers.push_back(std::move(server));
  }
  memset(out, 0, sizeof(*out));
  memcpy(out->internal, &id, sizeof(id));
  return Status::ok();
}

StatusOr<BootstrapInfo> bootstrapFromId(const collieUniqueId& raw, int nranks, int rank) {
  IdLayout id;
  memcpy(&id, raw.internal, sizeof(id));
  if (id.magic != kIdMagic || id.version != kIdVersion ||
      (id.family != AF_INET && id.family != AF_INET6))
    return invalidArgument(
        "the unique id is not one made by collieGetUniqueId (bad magic or version); broadcast "
        "all COLLIE_UNIQUE_ID_BYTES bytes of it unchanged");
  BootstrapInfo b;
  b.rank = rank;
  b.nranks = nranks;
  b.how = "unique id";
  memcpy(b.auth.secret, id.secret, 16);
  b.auth.commId = id.commId;
  if (id.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&b.storeAddr.ss);
    s->sin_family = AF_INET;
    memcpy(&s->sin_addr, id.ip, 4);
    b.storeAddr.len = sizeof(sockaddr_in);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&b.storeAddr.ss);
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, id.ip, 16);
    b.storeAddr.len = sizeof(sockaddr_in6);
  }
  b.storeAddr.setPort(id.port);
  // The rank living in the process that made the id takes over its server, so the server
  // lives exactly as long as that communicator.
  std::lock_guard<std::mutex> l(gServersMu);
  for (size_t i = 0; i < gServers.size(); ++i) {
    if (gServers[i]->address().port() == id.port && rank == 0 &&
        gServers[i]->ownedByThisProcess()) {
      b.server = std::move(gServers[i]);
      gServers.erase(gServers.begin() + i);
      break;
    }
  }
  return b;
}

std::vector<int> jobStorePorts(const std::string& job) {
  std::vector<int> ports;
  for (int i = 0; ports.size() < kJobStorePorts; ++i) {
    const int p = static_cast<int>(20000 + fnv1a("port/" + std::to_string(i) + "/" + job) % 30000);
    if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
  }
  return ports;
}

namespace {

// The store's address under each launcher: MASTER_ADDR/MASTER_PORT where set, the ports derived
// from the job id where every rank runs on this host, or rank 0's address via torchrun's agent.
Status findStore(const LaunchEnv& le, const char* size, BootstrapInfo* b, std::string* basis) {
  const char* host = firstEnv({"MASTER_ADDR"}, nullptr);
  const char* port = firstEnv({"MASTER_PORT"}, nullptr);
  if (host == nullptr && port == nullptr && le.localSize >= 0 && !le.job.empty() &&
      std::to_string(le.localSize) == size) {
    // One host without MASTER_*: rank 0 serves the store on the first free one of the ports
    // every rank derives from the job id; the others look on each in turn (the secret tells it
    // from whatever else listens there).
    COLLIE_ASSIGN_OR_RETURN(b->storeAddr, resolveHost("127.0.0.1", 1));
    for (int dp : jobStorePorts(le.job)) {
      b->storeChoices.push_back(b->storeAddr);
      b->storeChoices.back().setPort(dp);
    }
    b->storeAddr = b->storeChoices.front();
    *basis = "127.0.0.1:job-derived";
    return Status::ok();
  }
  if (host == nullptr || port == nullptr) {
    const char* why = (host == nullptr) != (port == nullptr)
                          ? " (only one of MASTER_ADDR and MASTER_PORT is set)"
                      : le.localSize < 0 ? ""
                      : le.job.empty()   ? " (no job id to derive a port from)"
                                         : " (not every rank is on this host)";
    return invalidArgument(
        "collieCommInitFromEnv: " + (le.launcher.empty() ? "" : "under " + le.launcher + ", ") +
        "nothing says where rank 0 serves the store" + why + ": " + le.hint);
  }
  COLLIE_ASSIGN_OR_RETURN(int p, parseEnvInt("MASTER_PORT", port));
  if (p == 0 || p > 65535)
    return invalidArgument("MASTER_PORT=" + std::string(port) + " out of range");
  COLLIE_ASSIGN_OR_RETURN(b->storeAddr, resolveHost(host, p));
  *basis = std::string(host) + ":" + port;
  if (le.agentStore) {
    // torchrun's agent owns MASTER_PORT: rank 0 serves on a port the OS picks and publishes it
    // there under a key of this run, restart and init, so no address outlives its store.
    static std::atomic<int> inits{0};
    b->agentStore = b->storeAddr;
    b->agentKey = "/collie/" + le.job + "/init" + std::to_string(inits.fetch_add(1)) + "/port";
    b->storeAddr.setPort(0);
  }
  return Status::ok();
}

}  // namespace

StatusOr<BootstrapInfo> bootstrapFromEnv() {
  BootstrapInfo b;
  const char* rankVar = nullptr;
  const char* sizeVar = nullptr;
  const char* r =
      firstEnv({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, &rankVar);
  const char* n =
      firstEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &sizeVar);
  if (r == nullptr || n == nullptr)
    return invalidArgument(
        "collieCommInitFromEnv: no rank/size in the environment: set RANK and WORLD_SIZE (or "
        "start the ranks with collie-run, mpirun, mpiexec, srun or torchrun)");
  COLLIE_ASSIGN_OR_RETURN(b.rank, parseEnvInt(rankVar, r));
  COLLIE_ASSIGN_OR_RETURN(b.nranks, parseEnvInt(sizeVar, n));
  const LaunchEnv le = detectLaunchEnv();
  b.how = (le.launcher.empty() ? "environment" : "environment of " + le.launcher) + " (" + rankVar +
          "/" + sizeVar + ")";
  std::string basis;
  COLLIE_RETURN_IF_ERROR(findStore(le, n, &b, &basis));
  b.serveStore = b.rank == 0;
  // The secret: COLLIE_SECRET when the launcher made one (collie-run does), else derived from
  // what every rank of this job shares — enough to turn away strangers and other jobs.
  if (const char* s = firstEnv({"COLLIE_SECRET"}, nullptr)) basis += "/secret=" + std::string(s);
  // A per-host job id would give each host its own secret once the ranks span hosts.
  if (!le.job.empty() && !(le.jobPerHost && firstEnv({"MASTER_ADDR"}, nullptr) != nullptr))
    basis += "/job=" + le.job;
  uint64_t h1 = fnv1a(basis), h2 = fnv1a(basis, h1 ^ 0x9e3779b97f4a7c15ULL);
  memcpy(b.auth.secret, &h1, 8);
  memcpy(b.auth.secret + 8, &h2, 8);
  b.auth.commId = fnv1a("comm/" + basis + "/" + b.agentKey);
  return b;
}

}  // namespace collie
