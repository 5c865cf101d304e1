// Reads a communicator's settings from the environment (params), refusing bad ones up front.
#include "src/core/comm_config.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

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

}  // namespace

StatusOr<CommConfig> readCommConfig() {
  CommConfig c;
  c.timeoutMs = params().getInt("COLLIE_TIMEOUT_MS");
  // Unset, or refused (params warns): the deadline of every wait.
  c.connectMs = getenv("COLLIE_CONNECT_TIMEOUT_MS") ? params().getInt("COLLIE_CONNECT_TIMEOUT_MS")
                                                    : c.timeoutMs;
  if (c.connectMs < 1) c.connectMs = c.timeoutMs;
  c.chunkBytes =
      static_cast<size_t>(std::max<int64_t>(4096, params().getInt("COLLIE_CHUNK_BYTES")));
  c.tunerTrials = static_cast<int>(params().getInt("COLLIE_TUNER_TRIALS"));
  c.tunerRun = static_cast<int>(params().getInt("COLLIE_TUNER_RUN"));
  c.tunerSpan = static_cast<double>(std::max<int64_t>(1, params().getInt("COLLIE_TUNER_SPAN")));
  c.tunerLinks = params().getString("COLLIE_TUNER_LINKS");
  c.probeLinks = params().getInt("COLLIE_TUNER_PROBE") != 0 && c.tunerLinks.empty();
  c.spinUs = params().getInt("COLLIE_SPIN_US");
  c.algorithm = params().getString("COLLIE_ALGO");
  COLLIE_ASSIGN_OR_RETURN(c.transports,
                          parseAllowedTransports(params().getString("COLLIE_TRANSPORT")));
  c.backend = params().getString("COLLIE_BACKEND");
  COLLIE_RETURN_IF_ERROR(DevicePath::checkBackend(c.backend));
  // Read by shm_single_copy's set-up at init: refused here, before anything connects.
  const std::string cma = params().getString("COLLIE_SHM_CMA");
  if (cma != "auto" && cma != "on" && cma != "off")
    return invalidArgument("COLLIE_SHM_CMA=" + cma + " is not auto, on or off");
  readTransportOptions(&c);
  return c;
}

}  // namespace collie
