// Reads a communicator's settings from the environment (params) and a collieConfig_t over it,
// refusing bad ones up front.
#include "src/core/comm_config.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "algorithms/algorithm.h"
#include "src/base/log.h"
#include "src/base/params.h"
#include "src/core/device/device_path.h"

namespace collie {

namespace {

// Socket buffers under a loopback segment (64 KiB) stall large transfers: the receiver holds
// its window back until a segment's worth is free, and the sender waits for its persist timer.
constexpr int64_t kLeastSocketBuffer = 64 << 10;

// COLLIE_SOCKET_BUFFER: unset (or not a number, which WARNs) sizes them per peer.
void readSocketBuffer(TcpOptions* opt) {
  const std::string env = params().getString("COLLIE_SOCKET_BUFFER");
  int64_t bytes = env.empty() ? 0 : params().getInt("COLLIE_SOCKET_BUFFER");
  opt->bufPerPeer = env.empty() || (bytes == 0 && env != "0");
  if (bytes > 0 && bytes < kLeastSocketBuffer) {
    COLLIE_WARN(kLogInit, "COLLIE_SOCKET_BUFFER=%lld is under the least of %lld; using that",
                static_cast<long long>(bytes), static_cast<long long>(kLeastSocketBuffer));
    bytes = kLeastSocketBuffer;
  }
  opt->bufBytes = static_cast<int>(std::min<int64_t>(bytes, INT32_MAX));
}

void readTransportOptions(CommConfig* c) {
  c->tcp.nsocks = static_cast<int>(params().getInt("COLLIE_NSOCKS"));
  c->tcp.stripeBytes = static_cast<size_t>(params().getInt("COLLIE_STRIPE_BYTES"));
  c->tcp.congestion = params().getString("COLLIE_SOCKET_CC");
  c->tcp.userTimeoutMs = c->timeoutMs;
  readSocketBuffer(&c->tcp);
  c->shm.ringBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_RING_BYTES"));
  c->shm.lend = params().getString("COLLIE_SHM_CMA") != "off";
  c->shm.stagingBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_STAGING_BYTES"));
  c->shmShrinkable =
      getenv("COLLIE_SHM_RING_BYTES") == nullptr && getenv("COLLIE_SHM_STAGING_BYTES") == nullptr;
}

// The first collieConfig_t: version 0.1.0, ending with its algorithm field. Later versions only
// append fields, so every config is at least this large.
constexpr unsigned kFirstConfigVersion = 100;
constexpr size_t kFirstConfigSize = offsetof(collieConfig_t, algorithm) + sizeof(const char*);

bool isSet(int field) { return field != COLLIE_CONFIG_UNDEF_INT; }

// The fields this library knows of config, checked to be a collieConfig_t of a known version.
Status copyKnownFields(const collieConfig_t& in, collieConfig_t* out) {
  if (in.magic != COLLIE_CONFIG_MAGIC)
    return invalidArgument("config: magic " + std::to_string(in.magic) +
                           " is not COLLIE_CONFIG_MAGIC; start every collieConfig_t from "
                           "COLLIE_CONFIG_INITIALIZER");
  if (in.version < kFirstConfigVersion)
    return invalidArgument("config: version " + std::to_string(in.version) +
                           " is unknown (the first collieConfig_t is version " +
                           std::to_string(kFirstConfigVersion) +
                           "); start it from COLLIE_CONFIG_INITIALIZER");
  if (in.size < kFirstConfigSize)
    return invalidArgument("config: size " + std::to_string(in.size) +
                           " is under the first collieConfig_t's " +
                           std::to_string(kFirstConfigSize) + " bytes");
  // A newer header's config is larger: its fields past ours are not read.
  memcpy(out, &in, std::min(in.size, sizeof(*out)));
  return Status::ok();
}

Status atLeast(const char* field, int v, int least, const char* unit) {
  if (!isSet(v) || v >= least) return Status::ok();
  return invalidArgument(std::string("config.") + field + "=" + std::to_string(v) +
                         " must be >= " + std::to_string(least) + unit);
}

Status checkAlgorithmName(const std::string& want) {
  if (want.empty() || want == "auto") return Status::ok();
  std::string have;
  for (auto& a : buildAlgorithms()) {
    if (want == a->name()) return Status::ok();
    have += std::string(have.empty() ? "" : ", ") + a->name();
  }
  return invalidArgument("config.algorithm=" + want + " is not an algorithm of this build (" +
                         have + ", or auto)");
}

// The checks a config's values need before they stand for their variables.
Status checkFields(const collieConfig_t& u) {
  if (isSet(u.blocking) && u.blocking != 0 && u.blocking != 1)
    return invalidArgument("config.blocking=" + std::to_string(u.blocking) + " must be 0 or 1");
  COLLIE_RETURN_IF_ERROR(atLeast("timeoutMs", u.timeoutMs, 1, " ms"));
  COLLIE_RETURN_IF_ERROR(atLeast("connectTimeoutMs", u.connectTimeoutMs, 1, " ms"));
  COLLIE_RETURN_IF_ERROR(atLeast("chunkBytes", u.chunkBytes, 4096, " bytes"));
  if (isSet(u.nsocks) && (u.nsocks < 0 || u.nsocks > 64))
    return invalidArgument("config.nsocks=" + std::to_string(u.nsocks) + " must be 0..64");
  if (u.algorithm != nullptr) COLLIE_RETURN_IF_ERROR(checkAlgorithmName(u.algorithm));
  return Status::ok();
}

int64_t intOf(int field, const char* var) { return isSet(field) ? field : params().getInt(var); }

std::string stringOf(const char* field, const char* var) {
  return field != nullptr ? std::string(field) : params().getString(var);
}

Status readTransports(const collieConfig_t& u, CommConfig* c) {
  if (u.transports == nullptr) {
    COLLIE_ASSIGN_OR_RETURN(c->transports,
                            parseAllowedTransports(params().getString("COLLIE_TRANSPORT")));
    return Status::ok();
  }
  const std::string list = u.transports;
  auto allowed = parseAllowedTransports(list);
  if (!allowed.isOk()) return allowed.status().withContext("config.transports");
  c->transports = allowed.take();
  // Connection errors name the restriction: here the config's, not the variable.
  if (!list.empty()) c->transports.restriction = "config.transports=" + list;
  return Status::ok();
}

// The deadlines: the config's, else the variables'; init's follows every wait's unless set.
void readTimeouts(const collieConfig_t& u, CommConfig* c) {
  c->timeoutMs = intOf(u.timeoutMs, "COLLIE_TIMEOUT_MS");
  if (isSet(u.connectTimeoutMs))
    c->connectMs = u.connectTimeoutMs;
  else  // Unset, or refused (params warns): the deadline of every wait.
    c->connectMs = getenv("COLLIE_CONNECT_TIMEOUT_MS")
                       ? params().getInt("COLLIE_CONNECT_TIMEOUT_MS")
                       : c->timeoutMs;
  if (c->connectMs < 1) c->connectMs = c->timeoutMs;
}

void readTuner(CommConfig* c) {
  c->tunerTrials = static_cast<int>(params().getInt("COLLIE_TUNER_TRIALS"));
  c->tunerRun = static_cast<int>(params().getInt("COLLIE_TUNER_RUN"));
  c->tunerSpan = static_cast<double>(std::max<int64_t>(1, params().getInt("COLLIE_TUNER_SPAN")));
  c->tunerLinks = params().getString("COLLIE_TUNER_LINKS");
  c->probeLinks = params().getInt("COLLIE_TUNER_PROBE") != 0 && c->tunerLinks.empty();
}

}  // namespace

StatusOr<CommConfig> readCommConfig(const collieConfig_t* config) {
  collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
  if (config != nullptr) {
    COLLIE_RETURN_IF_ERROR(copyKnownFields(*config, &u));
    COLLIE_RETURN_IF_ERROR(checkFields(u));
  }
  CommConfig c;
  readTimeouts(u, &c);
  c.chunkBytes =
      static_cast<size_t>(std::max<int64_t>(4096, intOf(u.chunkBytes, "COLLIE_CHUNK_BYTES")));
  readTuner(&c);
  c.spinUs = params().getInt("COLLIE_SPIN_US");
  c.algorithm = stringOf(u.algorithm, "COLLIE_ALGO");
  COLLIE_RETURN_IF_ERROR(readTransports(u, &c));
  c.backend = params().getString("COLLIE_BACKEND");
  COLLIE_RETURN_IF_ERROR(DevicePath::checkBackend(c.backend));
  // Read by shm_single_copy's set-up at init: refused here, before anything connects.
  const std::string cma = params().getString("COLLIE_SHM_CMA");
  if (cma != "auto" && cma != "on" && cma != "off")
    return invalidArgument("COLLIE_SHM_CMA=" + cma + " is not auto, on or off");
  readTransportOptions(&c);
  if (isSet(u.nsocks)) c.tcp.nsocks = u.nsocks;
  c.socketIfname = stringOf(u.socketIfname, "COLLIE_SOCKET_IFNAME");
  c.blocking = !isSet(u.blocking) || u.blocking != 0;
  if (u.commName != nullptr) c.name = u.commName;
  return c;
}

}  // namespace collie
