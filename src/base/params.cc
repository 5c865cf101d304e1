// Declarations and parsing of the COLLIE_* environment parameters.
#include "src/base/params.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace collie {

static const std::vector<ParamInfo>& table() {
  static const std::vector<ParamInfo> kParams = {
      {"COLLIE_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
      {"COLLIE_DEBUG_SUBSYS", "ALL", "comma list of log subsystems: INIT,NET,COLL,STORE,ALL"},
      {"COLLIE_DEBUG_FILE", "", "log to this file instead of stderr (%h host, %p pid)"},
      {"COLLIE_TIMEOUT_MS", "300000",
       "deadline of every blocking wait (rendezvous, connect, each collective), ms", 1},
      {"COLLIE_CONNECT_TIMEOUT_MS", "", "deadline of init rendezvous; COLLIE_TIMEOUT_MS if unset",
       1},
      {"COLLIE_SOCKET_IFNAME", "",
       "interface (or prefix, ^ to exclude) whose address ranks listen on and advertise"},
      {"COLLIE_NSOCKS", "0",
       "TCP sockets per peer, 1..64; 0: 3 to a peer on this host, 1 to a peer on another host. "
       "Messages >= COLLIE_STRIPE_BYTES are striped over a peer's sockets"},
      {"COLLIE_STRIPE_BYTES", "256K", "smallest message striped over all of a peer's sockets"},
      {"COLLIE_CHUNK_BYTES", "512K",
       "pipeline chunk of the ring, pairwise, bruck, linear and binomial algorithms, bytes"},
      {"COLLIE_SOCKET_BUFFER", "",
       "SO_SNDBUF/SO_RCVBUF per socket (unset: 4M to a peer on this host, 512K to a peer on "
       "another host; 0 = kernel default; at least 64K)"},
      {"COLLIE_SOCKET_CC", "",
       "TCP congestion control of the data sockets, e.g. reno (default: the system's)"},
      {"COLLIE_SPIN_US", "50",
       "busy-poll this long before sleeping, us (yielding the core when this machine's ranks "
       "outnumber its cores)"},
      {"COLLIE_HOSTID", "", "host identity override (default: hostname + boot id + netns)"},
      {"COLLIE_ALGO", "",
       "force an algorithm (ring, tree, rhd, recursive_doubling, shm_direct, shm_single_copy, "
       "hierarchical; auto = the tuner)"},
      {"COLLIE_TUNER_LINKS", "",
       "tuner link figures per transport: tcp=alpha_us:beta_GBps[:reduce_GBps],shm=...,ucx=..."},
      {"COLLIE_TUNER_PROBE", "1",
       "1: measure the network's step latency and link rate at init when a peer is reached over "
       "tcp or ucx and COLLIE_TUNER_LINKS is unset; 0: the calibrated table"},
      {"COLLIE_TUNER_TRIALS", "3",
       "rounds of trials when a call shape is new (two calls of each candidate algorithm per "
       "round, the second timed): the ranks then agree on the times and settle that shape's "
       "algorithm; 0: the cost model alone decides"},
      {"COLLIE_TUNER_RUN", "100",
       "after the trials, the pick and the next two by median each make up to this many calls "
       "in a row, in blocks of up to 25 taken in turn (as many as fit in 400 ms; at least two "
       "blocks of 6), and the shape settles on the fastest mean; 0: the trials alone decide"},
      {"COLLIE_TUNER_SPAN", "4",
       "the tuner tries the algorithms the cost model predicts within this factor of its best"},
      {"COLLIE_TRANSPORT", "",
       "restrict transports: comma list of tcp, shm, ucx (listing ucx forces it where shm is not "
       "listed or cannot reach)"},
      {"COLLIE_SHM_RING_BYTES", "1M",
       "shared-memory ring per peer and direction, bytes (unset: shrinks to fit /dev/shm)", 4096},
      {"COLLIE_SHM_STAGING_BYTES", "4M",
       "shared-memory staging buffer per rank (three slots), bytes (unset: shrinks with the "
       "rings)"},
      {"COLLIE_SHM_CHUNK_BYTES", "512K", "pipeline chunk of the shm_direct AllReduce, bytes", 4096},
      {"COLLIE_SHM_STREAM_BYTES", "8M",
       "out-of-place shm_direct outputs this large are written with streaming stores"},
      {"COLLIE_SHM_ONESHOT_BYTES", "32K", "largest AllReduce shm_direct does in one shot, bytes"},
      {"COLLIE_SHM_LINE_BYTES", "48",
       "largest AllReduce shm_direct sends in one cache line with the sign that it is there, "
       "bytes (48 at most; 0: none)"},
      {"COLLIE_SHM_CMA", "auto",
       "where shm_single_copy (AllReduce and the block moves reading and writing the peers' "
       "buffers in place by cross-memory attach) may run, voted at init: auto (every rank may; "
       "AllReduce not with more ranks than cores nor where the kernel's copy runs under half as "
       "fast as memcpy, the block moves not under a quarter; the tuner chooses), on (every rank "
       "may; taken from COLLIE_SHM_CMA_BYTES) or off (also for point-to-point messages, which "
       "from 64 KiB are otherwise read from the sender)"},
      {"COLLIE_SHM_CMA_BYTES", "64K",
       "smallest call (bytes per rank's block) the tuner gives shm_single_copy (0: never)"},
      {"COLLIE_BACKEND", "collie",
       "collie, or nccl: device-buffer collectives go to an NCCL communicator (builds with NCCL)"},
      {"COLLIE_CUDA_STAGING_BYTES", "8M",
       "device buffers over host transports: pinned staging chunk, bytes (two are pipelined)"},
      {"COLLIE_CUDA_PATH", "auto",
       "device-buffer AllReduce: auto (the cuda_ipc device ring on one host, else staged), ipc, "
       "or staged (through pinned host buffers)"},
      {"COLLIE_CUDA_SLOT_BYTES", "8M",
       "device ring: bytes of each slot of the cuda_ipc staging buffer"},
      {"COLLIE_CUDA_SLOTS", "4", "device ring: slots in each rank's cuda_ipc staging buffer"},
      {"COLLIE_CPU_ISA", "auto",
       "instruction set of the CPU reduction and copy kernels: auto (the widest this CPU runs), "
       "avx512, avx2 or sse; one the CPU lacks is refused with a WARN"},
  };
  return kParams;
}

const std::vector<ParamInfo>& Params::all() const { return table(); }

static const ParamInfo* find(const char* name) {
  for (const auto& p : table())
    if (strcmp(p.name, name) == 0) return &p;
  return nullptr;
}

std::string Params::getString(const char* name) const {
  const char* v = getenv(name);
  if (v != nullptr) return v;
  const ParamInfo* p = find(name);
  return p ? p->defaultValue : "";
}

static bool parseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || errno == ERANGE) return false;
  int64_t mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024, ++end;
  else if (*end == 'M' || *end == 'm')
    mult = 1024 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    mult = 1024LL * 1024 * 1024, ++end;
  if (*end != '\0' || v > INT64_MAX / mult || v < INT64_MIN / mult) return false;
  *out = v * mult;
  return true;
}

int64_t Params::getInt(const char* name) const {
  int64_t v = 0;
  const char* env = getenv(name);
  const ParamInfo* p = find(name);
  const int64_t least = p ? p->least : INT64_MIN;
  const bool parsed = env != nullptr && parseInt(env, &v);
  if (parsed && v >= least) return v;
  const char* fallback = p == nullptr ? "0" : *p->defaultValue ? p->defaultValue : "(unset)";
  if (parsed)
    fprintf(stderr, "COLLIE WARN: %s=%s is below its least value %lld; using the default %s\n",
            name, env, static_cast<long long>(least), fallback);
  else if (env != nullptr && *env != '\0')
    fprintf(stderr, "COLLIE WARN: %s=%s is not a number; using the default %s\n", name, env,
            fallback);
  if (p && parseInt(p->defaultValue, &v)) return v;
  return 0;
}

const Params& params() {
  static Params p;
  return p;
}

}  // namespace collie
