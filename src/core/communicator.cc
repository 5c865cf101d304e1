// CommImpl: init (store rendezvous, full mesh), ordered execution, errors and abort.
#include "src/core/communicator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/base/hex.h"
#include "src/base/log.h"
#include "src/base/params.h"
#include "src/base/time.h"
#include "src/core/link_probe.h"
#include "src/core/tuner.h"
#ifdef COLLIE_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#ifdef COLLIE_HAVE_CUDA
#include "src/core/device_ipc.h"
#include "src/core/device_staging.h"
#endif
#ifdef COLLIE_HAVE_NCCL
#include "src/backends/nccl/nccl_backend.h"
#endif

namespace collie {

// Why a rank's store or its claim is taken where a program makes a second communicator from what
// made one still alive.
constexpr const char* kSecondFromOneEnvironment =
    "a communicator made from the same environment or unique id is still alive in this job: "
    "another one at the same time needs a MASTER_PORT of its own, or a new collieGetUniqueId";

// ---- WorkState ----------------------------------------------------------------------------

void WorkState::finish(Status s) {
  std::lock_guard<std::mutex> l(mu_);
  status_ = std::move(s);
  done_ = true;
  cv_.notify_all();
}

bool WorkState::wait(int64_t timeoutMs) {
  std::unique_lock<std::mutex> l(mu_);
  if (timeoutMs < 0) {
    cv_.wait(l, [&] { return done_; });
    return true;
  }
  return cv_.wait_for(l, std::chrono::milliseconds(timeoutMs), [&] { return done_; });
}

bool WorkState::test() {
  std::lock_guard<std::mutex> l(mu_);
  return done_;
}

Status WorkState::status() {
  std::lock_guard<std::mutex> l(mu_);
  if (!done_) return Status(collieInProgress, "the operation is still running");
  return status_;
}

// ---- Device state ---------------------------------------------------------------------

struct DeviceState {
#ifdef COLLIE_HAVE_CUDA
  std::mutex mu;
  std::unique_ptr<DeviceIpc> ipc;          // guarded by mu; outlives staging's stream
  std::unique_ptr<DeviceStaging> staging;  // guarded by mu: made by the first device call
#endif
#ifdef COLLIE_HAVE_NCCL
  std::unique_ptr<NcclBackend> nccl;  // COLLIE_BACKEND=nccl
#endif
};

void DeviceStateDeleter::operator()(DeviceState* d) const { delete d; }

#ifdef COLLIE_HAVE_NCCL
constexpr bool kHaveNccl = true;
constexpr const char* kBuildBackends = "collie, nccl";
#else
constexpr bool kHaveNccl = false;
constexpr const char* kBuildBackends = "collie";
#endif

// ---- CommImpl -------------------------------------------------------------------------

StatusOr<std::unique_ptr<CommImpl>> CommImpl::create(BootstrapInfo info) {
  std::unique_ptr<CommImpl> c(new CommImpl());
  Status s = c->init(std::move(info));
  if (!s.isOk()) return s;
  return c;
}

static std::string noSpaces(std::string id) {
  for (char& c : id)
    if (c == ' ') c = '_';
  return id;
}

// Which machine (kernel) this process runs on: its boot id, else its host name. Hosts that are
// network namespaces or containers of one machine share its cores.
static std::string machineId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof(boot), f)) id = std::string(boot, strcspn(boot, "\n"));
    fclose(f);
  }
  return id.empty() ? "unknown" : noSpaces(id);
}

// Which host this process is on: hostname + machine + network namespace, or COLLIE_HOSTID.
static std::string hostId(const std::string& machine) {
  std::string forced = params().getString("COLLIE_HOSTID");
  if (!forced.empty()) return forced;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string id = std::string(host) + "/" + machine;
  char ns[128] = {0};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  if (n > 0) id += "/" + std::string(ns, static_cast<size_t>(n));
  return noSpaces(id);
}

#ifdef COLLIE_HAVE_UCX
constexpr bool kHaveUcx = true;
constexpr const char* kBuildTransports = "tcp, shm, ucx";
#else
constexpr bool kHaveUcx = false;
constexpr const char* kBuildTransports = "tcp, shm";
#endif

static std::string joinRanks(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 32; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 32) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

Status CommImpl::init(BootstrapInfo info) {
  rank_ = info.rank;
  nranks_ = info.nranks;
  logSetRank(rank_);
  timeoutMs_ = params().getInt("COLLIE_TIMEOUT_MS");
  // Unset, or refused (params warns): the deadline of every wait.
  int64_t connectMs = getenv("COLLIE_CONNECT_TIMEOUT_MS")
                          ? params().getInt("COLLIE_CONNECT_TIMEOUT_MS")
                          : timeoutMs_;
  if (connectMs < 1) connectMs = timeoutMs_;
  chunkBytes_ = static_cast<size_t>(std::max<int64_t>(4096, params().getInt("COLLIE_CHUNK_BYTES")));
  // Which init failed, and where its store is: set again once the store is found.
  auto describe = [&] {
    return "init of rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + " (" +
           info.how + ", store " + info.storeAddr.toString() + ")";
  };
  std::string where = describe();
  Deadline deadline = Deadline::afterMs(connectMs);
  algos_ = buildAlgorithms();
  online_ = OnlineTuner(static_cast<int>(params().getInt("COLLIE_TUNER_TRIALS")), 4096,
                        static_cast<int>(params().getInt("COLLIE_TUNER_RUN")));
  tunerSpan_ = static_cast<double>(std::max<int64_t>(1, params().getInt("COLLIE_TUNER_SPAN")));
  {
    Status forced = findAlgorithm(params().getString("COLLIE_ALGO"), &forced_);
    if (!forced.isOk()) return forced.withContext(where);
  }
  // Unset: shm inside the host, ucx across hosts where RDMA is present, tcp elsewhere. A list
  // restricts the choice and prefers shm, then ucx, then tcp: ucx listed means ucx is forced.
  bool allowTcp = true, allowShm = true, allowUcx = kHaveUcx, ucxForced = false;
  const std::string transports = params().getString("COLLIE_TRANSPORT");
  if (!transports.empty()) {
    allowTcp = allowShm = allowUcx = false;
    size_t pos = 0;
    while (pos <= transports.size()) {
      size_t e = transports.find(',', pos);
      if (e == std::string::npos) e = transports.size();
      std::string t = transports.substr(pos, e - pos);
      if (t == "tcp")
        allowTcp = true;
      else if (t == "shm")
        allowShm = true;
      else if (t == "ucx" && kHaveUcx)
        allowUcx = ucxForced = true;
      else
        return invalidArgument(where + ": COLLIE_TRANSPORT=" + transports + ": '" + t +
                               "' is not a transport of this build (" + kBuildTransports + ")");
      pos = e + 1;
    }
  }

  const std::string backend = params().getString("COLLIE_BACKEND");
  if (backend != "collie" && !(backend == "nccl" && kHaveNccl))
    return invalidArgument(where + ": COLLIE_BACKEND=" + backend +
                           " is not a backend of this build (" + kBuildBackends + ")");
  // Read by shm_direct at its first large AllReduce: refused here, before any call.
  const std::string cma = params().getString("COLLIE_SHM_CMA");
  if (cma != "auto" && cma != "on" && cma != "off")
    return invalidArgument(where + ": COLLIE_SHM_CMA=" + cma + " is not auto, on or off");
  device_.reset(new DeviceState());

  // A communicator of this job made from the same environment is alive here: its store has the
  // port, and this one's would move to another derived port (or fail to bind) while the other
  // ranks find the first one's. Said at once, on rank 0; the others find their claim taken.
  for (const SockAddr& a :
       info.storeChoices.empty() ? std::vector<SockAddr>{info.storeAddr} : info.storeChoices) {
    if (info.serveStore && !info.server &&
        StoreServer::servesInThisProcess(a.port(), info.auth.commId))
      return invalidUsage(where + ": " + kSecondFromOneEnvironment + " (its store serves on port " +
                          std::to_string(a.port()) + ")");
  }
  if (info.server) {
    server_ = std::move(info.server);
  } else if (info.serveStore && !info.storeChoices.empty()) {
    // Ports derived from the job id: the first free one (the others look on each in turn).
    Status busy = Status::ok();
    for (const SockAddr& a : info.storeChoices) {
      auto srv = StoreServer::start(a, info.auth);
      if (!srv.isOk()) {
        busy = srv.status();
        continue;
      }
      server_ = srv.take();
      info.storeAddr = a;
      where = describe();
      break;
    }
    if (!server_)
      return busy.withContext(where + ": rank 0 cannot serve the store on any of the " +
                              std::to_string(info.storeChoices.size()) +
                              " ports derived from the job id (set MASTER_ADDR and MASTER_PORT)");
  } else if (info.serveStore) {
    auto srv = StoreServer::start(info.storeAddr, info.auth);
    if (!srv.isOk()) {
      // MASTER_ADDR may name this host by an address it cannot bind (NAT, a name): any address.
      SockAddr any;
      auto* a = reinterpret_cast<sockaddr_in*>(&any.ss);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      any.len = sizeof(sockaddr_in);
      any.setPort(info.storeAddr.port());
      srv = StoreServer::start(any, info.auth);
    }
    if (!srv.isOk()) return srv.status().withContext(where + ": rank 0 cannot serve the store");
    server_ = srv.take();
  }
  auto store = server_ || info.storeChoices.empty()
                   ? TcpStore::connect(info.storeAddr, info.auth, deadline)
                   : TcpStore::connectAny(info.storeChoices, info.auth, deadline);
  if (!store.isOk()) return store.status().withContext(where);
  store_ = store.take();
  store_->setRequestTimeoutMs(timeoutMs_);
  if (!info.storeChoices.empty()) {
    info.storeAddr = store_->server();  // the derived port it answered on
    where = describe();
  }

  auto claim = store_->add("claim/" + std::to_string(rank_), 1);
  if (!claim.isOk()) return claim.status().withContext(where);
  if (claim.value() > 1)
    return invalidUsage(where + ": two processes claim rank " + std::to_string(rank_) +
                        "; every rank must be unique (check RANK / the rank argument), or " +
                        kSecondFromOneEnvironment);

  Identity id;
  memcpy(id.secret, info.auth.secret, 16);
  id.commId = info.auth.commId;
  commId_ = id.commId;
  id.rank = rank_;
  id.nranks = nranks_;
  TcpOptions opt;
  opt.nsocks = static_cast<int>(params().getInt("COLLIE_NSOCKS"));
  opt.stripeBytes = static_cast<size_t>(params().getInt("COLLIE_STRIPE_BYTES"));
  // Socket buffers under a loopback segment (64 KiB) stall large transfers: the receiver holds
  // its window back until a segment's worth is free (silly-window avoidance), and the sender
  // waits for its persist timer (4 KiB: 1 MB did not arrive in 4 s; 16 KiB: 4 MB in 0.6 s,
  // against 0.1 from 32 KiB up).
  constexpr int64_t kLeastSocketBuffer = 64 << 10;
  // Unset (or not a number, which WARNs): sized per peer at connectAll below.
  const std::string bufEnv = params().getString("COLLIE_SOCKET_BUFFER");
  int64_t sockBuf = bufEnv.empty() ? 0 : params().getInt("COLLIE_SOCKET_BUFFER");
  const bool bufForced = !bufEnv.empty() && (sockBuf != 0 || bufEnv == "0");
  if (sockBuf > 0 && sockBuf < kLeastSocketBuffer) {
    COLLIE_WARN(kLogInit, "COLLIE_SOCKET_BUFFER=%lld is under the least of %lld; using that",
                static_cast<long long>(sockBuf), static_cast<long long>(kLeastSocketBuffer));
    sockBuf = kLeastSocketBuffer;
  }
  opt.bufBytes = static_cast<int>(std::min<int64_t>(sockBuf, INT32_MAX));
  opt.congestion = params().getString("COLLIE_SOCKET_CC");
  opt.userTimeoutMs = timeoutMs_;
  auto local = pickLocalAddress(&info.storeAddr);
  if (!local.isOk()) return local.status().withContext(where);
  auto tcp = TcpTransport::create(id, opt, local.value());
  if (!tcp.isOk()) return tcp.status().withContext(where);
  tcp_ = tcp.take();

  const std::string machine = machineId();
  COLLIE_RETURN_IF_ERROR(
      store_
          ->set("rank/" + std::to_string(rank_), std::to_string(nranks_) + " " + hostId(machine) +
                                                     " " + machine + " " + tcp_->address())
          .withContext(where));
  std::vector<std::string> keys, missing;
  for (int r = 0; r < nranks_; ++r) keys.push_back("rank/" + std::to_string(r));
  Status w = store_->wait(keys, deadline, &missing);
  if (!w.isOk()) {
    std::vector<int> ranks;
    for (const auto& k : missing) ranks.push_back(atoi(k.c_str() + 5));
    if (w.code() != collieTimeout) {
      // Typically the store's rank gave up first; say who was missing all the same.
      if (ranks.empty()) return w.withContext(where);
      return Status(w.code(), where + ": rendezvous failed (" + w.message() +
                                  "); ranks never arrived: " + joinRanks(ranks));
    }
    return timeoutError(where + ": rendezvous timed out after " + std::to_string(connectMs) +
                        " ms; ranks never arrived: " + joinRanks(ranks) +
                        " (see COLLIE_CONNECT_TIMEOUT_MS / COLLIE_TIMEOUT_MS)");
  }
  std::vector<std::string> addrs(nranks_), hosts(nranks_), machines(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    auto v = store_->get(keys[r], deadline);
    if (!v.isOk()) return v.status().withContext(where);
    const std::string& s = v.value();
    size_t sp1 = s.find(' '), sp2 = s.find(' ', sp1 + 1);
    size_t sp3 = sp2 == std::string::npos ? sp2 : s.find(' ', sp2 + 1);
    int theirN = atoi(s.substr(0, sp1).c_str());
    if (sp3 == std::string::npos || theirN != nranks_)
      return invalidUsage(where + ": rank " + std::to_string(r) + " was started with " +
                          std::to_string(theirN) + " ranks but this rank with " +
                          std::to_string(nranks_) + "; all ranks must agree on the size");
    hosts[r] = s.substr(sp1 + 1, sp2 - sp1 - 1);
    machines[r] = s.substr(sp2 + 1, sp3 - sp2 - 1);
    addrs[r] = s.substr(sp3 + 1);
  }
  localRanks_ = static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[rank_]));
  machineRanks_ = std::max(
      localRanks_, static_cast<int>(std::count(machines.begin(), machines.end(), machines[rank_])));
  hostOf_.resize(nranks_);
  for (int r = 0; r < nranks_; ++r)
    hostOf_[r] = static_cast<int>(std::find(hosts.begin(), hosts.end(), hosts[r]) - hosts.begin());
  // Which transport reaches each peer: shm on this host, tcp elsewhere (or where shm is off).
  std::vector<int> localRanks;
  for (int r = 0; r < nranks_; ++r)
    if (hosts[r] == hosts[rank_]) localRanks.push_back(r);
  std::vector<bool> useShm(nranks_, false), useTcp(nranks_, false), useUcx(nranks_, false);
  bool wantUcx = false;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    bool local = hosts[p] == hosts[rank_];
    useShm[p] = allowShm && local;
    // Unforced, ucx is only a candidate until the exchange shows RDMA on both sides.
    useUcx[p] = !useShm[p] && allowUcx && (ucxForced || !local);
    wantUcx |= useUcx[p];
    if (!useShm[p] && !useUcx[p] && !allowTcp)
      return invalidArgument(where + ": COLLIE_TRANSPORT=" + transports +
                             " cannot reach peer rank " + std::to_string(p) + " on host " +
                             hosts[p] + " (shm reaches only this host)");
  }
  conns_.resize(nranks_);
  if (allowShm && localRanks.size() > 1) {
    Status ss = setUpShm(localRanks, ucxForced ? "ucx" : allowTcp ? "tcp" : nullptr, deadline);
    if (!ss.isOk()) return ss.withContext(where);
    if (!shm_) {  // no room for it on this host: the local peers take the next transport
      for (int p = 0; p < nranks_; ++p) {
        if (!useShm[p]) continue;
        useShm[p] = false;
        useUcx[p] = ucxForced;
        wantUcx |= useUcx[p];
      }
    }
  }
  if (wantUcx) {
    Status us = setUpUcx(&useUcx, ucxForced, deadline);
    if (!us.isOk()) return us.withContext(where);
  }
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    useTcp[p] = !useShm[p] && !useUcx[p];
    const char* via = useShm[p] ? "shm" : useUcx[p] ? "ucx" : "tcp";
    COLLIE_INFO(kLogInit, "rank %d -> peer rank %d via %s", rank_, p, via);
  }
  // COLLIE_NSOCKS=0: three sockets to a peer on this host, where loopback moves a message's
  // stripes with several kernel copies at once, one to a peer on another host, where a single
  // flow keeps its congestion window in use (see README, COLLIE_NSOCKS).
  std::vector<int> socks(nranks_, 0);
  for (int p = 0; p < nranks_; ++p)
    if (useTcp[p]) socks[p] = opt.nsocks > 0 ? opt.nsocks : hosts[p] == hosts[rank_] ? 3 : 1;
  // COLLIE_SOCKET_BUFFER unset: 4 MiB to a peer on this host, where loopback moves a large
  // message with fewer wakeups (a 2-rank AllReduce of 64 MiB over tcp ran 25% slower with
  // 512 KiB); 512 KiB to a peer on another host. There a rank that begins a step early could
  // queue megabytes (in its send buffer and its new partner's receive buffer) ahead of a
  // partner still busy with the previous step: rhd at 64 MiB on 8 hosts with 1 Gbit/s links
  // ran at 93% of the link with 512 KiB, 87% with 4 MiB, and no better with only one of the
  // two buffers smaller, under bbr; under cubic 95.5% against 95% (see README).
  std::vector<int> bufs(nranks_, opt.bufBytes);
  for (int p = 0; p < nranks_; ++p)
    if (!bufForced) bufs[p] = hosts[p] == hosts[rank_] ? 4 << 20 : 512 << 10;
  Status cs = tcp_->connectAll(addrs, socks, deadline, &conns_, bufs);
  if (!cs.isOk()) return cs.withContext(where);
  COLLIE_RETURN_IF_ERROR(store_->set("ready/" + std::to_string(rank_), "1").withContext(where));
  if (server_) {
    // The store lives in this process: keep it until every rank is past the rendezvous.
    std::vector<std::string> ready;
    for (int r = 0; r < nranks_; ++r) ready.push_back("ready/" + std::to_string(r));
    COLLIE_RETURN_IF_ERROR(store_->wait(ready, deadline, nullptr).withContext(where));
  }

  connPtrs_.resize(nranks_, nullptr);
  std::vector<Connection*> all;
  for (int r = 0; r < nranks_; ++r) {
    connPtrs_[r] = conns_[r].get();
    if (conns_[r]) all.push_back(conns_[r].get());
  }
  // Busy-polling only pays when every rank has a core of its own; oversubscribed, a spinning
  // rank steals the core its peer needs to make the data it waits for. The ranks counted are
  // those of this machine: hosts that are network namespaces or containers of one machine share
  // its cores (8 such hosts on 2 cores: a 4 KiB AllReduce took 3x as long spinning).
  int64_t spinUs = params().getInt("COLLIE_SPIN_US");
  unsigned cores = std::thread::hardware_concurrency();
  oversubscribed_ = cores > 0 && machineRanks_ > static_cast<int>(cores);
  COLLIE_INFO(kLogInit, "rank %d: %d ranks on this machine, %d on this host, %u cores: %s", rank_,
              machineRanks_, localRanks_, cores,
              oversubscribed_ ? "waits yield the core" : "waits spin");
  poller_.reset(
      new Poller(all, spinUs, &aborting_, shm_ ? shm_->doorbell() : nullptr, oversubscribed_));
  // The tuner's model: the slowest transport in use (see tuner.h).
  bool anyTcp = false, anyUcx = false;
  for (int p = 0; p < nranks_; ++p) anyTcp |= useTcp[p], anyUcx |= useUcx[p];
  {
    auto links = parseTransportLinks(params().getString("COLLIE_TUNER_LINKS"));
    if (!links.isOk()) return links.status().withContext(where);
    link_ = linkModelFor(links.value(), anyTcp, anyUcx);
    localLink_ = shm_ ? links.value().shm : link_;
  }
  const int maxSocks = *std::max_element(socks.begin(), socks.end());
  COLLIE_INFO(kLogInit, "rank %d of %d connected (%s, tcp on %s, up to %d sockets per peer%s)",
              rank_, nranks_, info.how.c_str(), tcp_->address().c_str(), maxSocks,
              anyUcx ? ", ucx to some peers" : "");
  // The algorithms' set-up that the ranks agree on (shm_single_copy's probe and vote): one
  // phase, here, on every rank, before any call.
  AlgoContext setUp = context(CollArgs());
  for (auto& algo : algos_) {
    const std::string phase = std::string("the set-up of ") + algo->name();
    setUp.opName = phase.c_str();
    COLLIE_RETURN_IF_ERROR(algo->prepare(setUp).withContext(where));
  }
  COLLIE_RETURN_IF_ERROR(probeNetwork(anyTcp || anyUcx).withContext(where));
  COLLIE_RETURN_IF_ERROR(setUpBackend(backend, hosts, deadline).withContext(where));
  progress_ = std::thread([this] { progressLoop(); });
  return Status::ok();
}

Status CommImpl::setUpBackend(const std::string& backend, const std::vector<std::string>& hosts,
                              const Deadline& deadline) {
  if (backend != "nccl") return Status::ok();
#ifdef COLLIE_HAVE_NCCL
  COLLIE_ASSIGN_OR_RETURN(device_->nccl, NcclBackend::create(store_.get(), rank_, nranks_, hosts,
                                                             timeoutMs_, deadline));
  return Status::ok();
#else
  return invalidArgument("COLLIE_BACKEND=nccl: this build has no NCCL");
#endif
}

Status CommImpl::probeNetwork(bool network) {
  if (nranks_ < 2 || !network) return Status::ok();  // one host: the same links on every rank
  const bool probe = params().getInt("COLLIE_TUNER_PROBE") != 0 &&
                     params().getString("COLLIE_TUNER_LINKS").empty();
  if (probe) {
    // Large enough that the rate, not the latency, sets its time on a fast link; a few ms at
    // 1 Gbit/s.
    constexpr size_t kBigBytes = 512 << 10;
    CollArgs args;
    AlgoContext ctx = context(args);
    ctx.opName = "the link probe";
    COLLIE_ASSIGN_OR_RETURN(LinkProbe p, probeRingLinks(ctx, kBigBytes));
    link_.alphaUs = std::min(std::max(p.alphaUs, 0.5), 1e5);
    link_.betaGBps = std::min(std::max(p.betaGBps, 0.01), 1e3);
    if (!shm_) localLink_ = link_;
  }
  // Every rank must pick the same algorithm for a call: all take the slowest figures any rank
  // has, measured or not. The ranks' own differ where hosts differ: a rank alone on its host
  // had the network's figures for its local link (5 ranks on hosts of 2, 2 and 1: the rank
  // alone took tree for a 1-byte AllReduce, the others hierarchical). It has no local link, so
  // it offers none (zeros); where no rank has one, the network's figures stand for it.
  const bool alone = localRanks_ < 2;
  double v[6] = {link_.alphaUs,
                 1.0 / link_.betaGBps,
                 1.0 / link_.reduceGBps,
                 alone ? 0.0 : localLink_.alphaUs,
                 alone ? 0.0 : 1.0 / localLink_.betaGBps,
                 alone ? 0.0 : 1.0 / localLink_.reduceGBps};
  COLLIE_RETURN_IF_ERROR(agreeOnMax(v, 6, probe ? "the link probe" : "the tuner's link figures"));
  auto agreed = [](const double* f, LinkModel* m) {
    m->alphaUs = f[0];
    m->betaGBps = 1.0 / f[1];
    m->reduceGBps = 1.0 / f[2];
  };
  agreed(v, &link_);
  if (v[4] > 0)
    agreed(v + 3, &localLink_);
  else
    localLink_ = link_;
  if (probe)
    COLLIE_INFO(kLogInit, "rank %d: network measured at init: %.1f us per step, %.3f GB/s per link",
                rank_, link_.alphaUs, link_.betaGBps);
  return Status::ok();
}

Status CommImpl::agreeOnMax(double* v, size_t n, const char* opName) {
  CollArgs agree;
  agree.send = v;
  agree.recv = v;
  agree.count = n;
  agree.dtype = collieFloat64;
  agree.op = collieMax;
  Algorithm* ring = nullptr;
  COLLIE_RETURN_IF_ERROR(findAlgorithm("ring", &ring));
  AlgoContext ctx = context(agree);
  ctx.opName = opName;
  return ring->run(agree, ctx);
}

Status CommImpl::settleTrial(OnlineTuner::Trial* t, const CollArgs& args) {
  std::vector<double>& us = online_.times(t);
  const bool runs = online_.inRuns(t);
  COLLIE_RETURN_IF_ERROR(agreeOnMax(us.data(), us.size(), "the tuner's trials"));
  const std::vector<double> agreed = us;  // settle() may start the runs, which clear us
  Algorithm* chosen = online_.settle(t);
  if (logEnabled(LogLevel::kInfo, kLogColl)) {
    std::string line;
    if (runs) {
      line = "in a row (mean) ";
      for (size_t i = 0; i < t->runs.size(); ++i) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s%s %.1f us", i ? ", " : "", t->runs[i]->name(), agreed[i]);
        line += buf;
      }
      line += std::string("; takes ") + chosen->name();
    } else {
      line = "tried (median/fastest) ";
      const size_t n = online_.candidates(t).size();
      for (size_t i = 0; i < n; ++i) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s%s %.1f/%.1f us", i ? ", " : "",
                 online_.candidates(t)[i]->name(), agreed[i], agreed[n + i]);
        line += buf;
      }
      if (chosen != nullptr) {
        line += std::string("; takes ") + chosen->name();
      } else {
        line += "; runs in a row";
        for (size_t i = 0; i < t->runs.size(); ++i)
          line += std::string(i ? ", " : " ") + t->runs[i]->name();
        line += " (" + std::to_string(t->blocks) + " blocks of " + std::to_string(t->blockCalls) +
                " calls each)";
      }
    }
    COLLIE_INFO(kLogColl, "tuner: %s count %zu %s: %s", collectiveName(args.coll), args.count,
                dtypeName(args.dtype), line.c_str());
  }
  return Status::ok();
}

namespace {

// What a local rank publishes in a round of setUpShm when it cannot go on: '!' and why, for a
// failure of the system (the others fall back with it), '?' and why, for a misuse (they fail).
std::string shmRefusal(const Status& s) {
  return (s.code() == collieInvalidUsage ? "?" : "!") + s.message();
}

}  // namespace

Status CommImpl::exchangeLocal(const std::string& prefix, const std::string& mine,
                               const std::vector<int>& local, const Deadline& deadline,
                               std::vector<std::string>* values) {
  COLLIE_RETURN_IF_ERROR(store_->set(prefix + std::to_string(rank_), mine));
  std::vector<std::string> keys;
  for (int r : local) keys.push_back(prefix + std::to_string(r));
  COLLIE_RETURN_IF_ERROR(store_->wait(keys, deadline, nullptr));
  values->clear();
  for (const auto& k : keys) {
    COLLIE_ASSIGN_OR_RETURN(std::string v, store_->get(k, deadline));
    values->push_back(std::move(v));
  }
  return Status::ok();
}

bool CommImpl::shmRefused(const std::vector<std::string>& values, const std::vector<int>& local,
                          const char* fallback, const Deadline& deadline, Status* result) {
  // A misuse first: then every rank fails alike, whatever failed elsewhere.
  size_t i = 0;
  for (char kind : {'?', '!'}) {
    for (i = 0; i < values.size() && (values[i].empty() || values[i][0] != kind);) ++i;
    if (i < values.size()) break;
  }
  if (i == values.size()) return false;
  shm_.reset();  // unmaps the peers' segments and unlinks this rank's: nobody uses them now
  const bool misuse = values[i][0] == '?';
  const std::string why = "shm: rank " + std::to_string(local[i]) + ": " + values[i].substr(1);
  if (fallback != nullptr && !misuse) {
    COLLIE_WARN(kLogInit, "%s; the peers on this host use %s instead", why.c_str(), fallback);
    *result = Status::ok();
    return true;
  }
  // Briefly, until the other local ranks have read this far: the store may live in this
  // process, and a rank that loses it first would report that instead of the reason.
  std::vector<std::string> seen;
  exchangeLocal("shmseen/", "1", local, Deadline::afterMs(deadline.remainingMs(2000)), &seen);
  *result = Status(
      misuse ? collieInvalidUsage : collieSystemError,
      misuse ? why : "COLLIE_TRANSPORT=" + params().getString("COLLIE_TRANSPORT") + ": " + why);
  return true;
}

Status CommImpl::setUpShm(const std::vector<int>& local, const char* fallback,
                          const Deadline& deadline) {
  ShmOptions want;
  want.ringBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_RING_BYTES"));
  want.stagingBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_STAGING_BYTES"));
  // Sizes the user did not choose shrink to what /dev/shm has room for (a container's 64 MiB
  // holds 8 ranks' segments at half the default sizes): halved up to kShmShrinks times.
  const bool shrinkable =
      getenv("COLLIE_SHM_RING_BYTES") == nullptr && getenv("COLLIE_SHM_STAGING_BYTES") == nullptr;
  constexpr int kShmShrinks = 3;
  auto noRoom = [](const std::string& v) {
    return v.size() > 1 && v[0] == '!' && v.compare(1, strlen(kShmNoRoom), kShmNoRoom) == 0;
  };
  // Rounds in which every local rank publishes what it got, so that all of them go on with shm
  // or give it up alike: "shm/<try>/<rank>", the name of the segment it made (names start with
  // '/'), "shmshrink/<try>/<rank>", after a try without room, whether its sizes may shrink, and
  // "shmmapped/<rank>", whether it mapped its peers' segments.
  std::vector<std::string> names, mapped, freed, votes;
  Status refused;
  ShmOptions so = want;
  for (int shrink = 0;; ++shrink) {
    so.ringBytes = want.ringBytes >> shrink;
    so.stagingBytes = want.stagingBytes >> shrink;
    auto made = ShmTransport::create(commId_, rank_, local, so);
    if (made.isOk()) shm_ = made.take();
    const std::string round = std::to_string(shrink) + "/";
    COLLIE_RETURN_IF_ERROR(exchangeLocal("shm/" + round,
                                         shm_ ? shm_->segmentName() : shmRefusal(made.status()),
                                         local, deadline, &names));
    if (shrink >= kShmShrinks || std::none_of(names.begin(), names.end(), noRoom)) break;
    // Smaller sizes only where no local rank chose its own: each decides from what all say,
    // so that all try again or none does.
    COLLIE_RETURN_IF_ERROR(
        exchangeLocal("shmshrink/" + round, shrinkable ? "1" : "0", local, deadline, &votes));
    if (!std::all_of(votes.begin(), votes.end(), [](const std::string& v) { return v == "1"; }))
      break;
    shm_.reset();
    // Every segment of this try is gone before any rank makes one of the next.
    COLLIE_RETURN_IF_ERROR(exchangeLocal("shmfreed/" + round, "1", local, deadline, &freed));
  }
  if (shmRefused(names, local, fallback, deadline, &refused)) return refused;
  // Every local rank holds its whole segment now: the host has room for the whole layout. No
  // peer writes into this rank's rings before it has published "shmmapped" below.
  shm_->releaseRingPages();
  if (so.ringBytes != want.ringBytes)
    COLLIE_WARN(kLogInit,
                "shm: /dev/shm has no room for the %d local ranks' segments at the default "
                "sizes: rings of %zu KiB and staging of %zu KiB instead (enlarge /dev/shm, as "
                "docker run --shm-size does, for the defaults)",
                static_cast<int>(local.size()), so.ringBytes >> 10, so.stagingBytes >> 10);
  const Status m = shm_->mapPeers(names);
  COLLIE_RETURN_IF_ERROR(
      exchangeLocal("shmmapped/", m.isOk() ? "1" : shmRefusal(m), local, deadline, &mapped));
  if (shmRefused(mapped, local, fallback, deadline, &refused)) return refused;
  // Every local rank has mapped every segment: the names go, so nothing outlives a crash.
  shm_->unlinkOwn();
  shm_->makeConnections(&conns_);
  return Status::ok();
}

Status CommImpl::setUpUcx(std::vector<bool>* want, bool forced, const Deadline& deadline) {
#ifdef COLLIE_HAVE_UCX
  // What this rank publishes as "ucx/<rank>": its worker address in hex, "-" for a UCX without
  // RDMA when that is what unforced use needs, or "!" and the reason it cannot initialise, so
  // that the peers fail (forced) or fall back (unforced) at once instead of waiting.
  auto made = UcxTransport::create(rank_, nranks_, commId_, /*needRdma=*/!forced);
  std::unique_ptr<UcxTransport> ucx;
  std::string mine = "-";
  if (!made.isOk())
    mine = "!" + made.status().message();
  else if ((ucx = made.take()))
    mine = toHex(ucx->address());
  COLLIE_RETURN_IF_ERROR(store_->set("ucx/" + std::to_string(rank_), mine));
  const std::string list = params().getString("COLLIE_TRANSPORT");
  std::vector<std::string> keys;
  for (int p = 0; p < nranks_; ++p)
    if ((*want)[p]) keys.push_back("ucx/" + std::to_string(p));
  if (!made.isOk()) {
    if (forced) {
      // Briefly, until the peers have come this far: the store may live in this process, and
      // a peer that loses it first would report that instead of the reason.
      store_->wait(keys, Deadline::afterMs(deadline.remainingMs(2000)), nullptr);
      return Status(made.status().code(),
                    "COLLIE_TRANSPORT=" + list + ": " + made.status().message());
    }
    COLLIE_WARN(kLogInit, "%s; peers on other hosts use tcp instead",
                made.status().message().c_str());
  } else if (ucx == nullptr) {
    COLLIE_INFO(kLogInit, "UCX offers no RDMA resource here; peers on other hosts use tcp");
  }
  if (ucx == nullptr) {
    want->assign(want->size(), false);
    return Status::ok();
  }
  COLLIE_RETURN_IF_ERROR(store_->wait(keys, deadline, nullptr));
  bool any = false;
  for (int p = 0; p < nranks_; ++p) {
    if (!(*want)[p]) continue;
    auto got = store_->get("ucx/" + std::to_string(p), deadline);
    if (!got.isOk()) return got.status();
    const std::string& theirs = got.value();
    std::string addr;
    std::string why = !theirs.empty() && theirs[0] == '!' ? theirs.substr(1)
                      : theirs == "-"                     ? "its UCX offers no RDMA resource"
                      : fromHex(theirs, &addr)            ? ""
                                                          : "it published a garbled address";
    if (!why.empty()) {
      if (forced)
        return invalidUsage("COLLIE_TRANSPORT=" + list + ": peer rank " + std::to_string(p) +
                            " cannot use UCX: " + why);
      COLLIE_INFO(kLogInit, "peer rank %d uses tcp, not UCX: %s", p, why.c_str());
      (*want)[p] = false;
      continue;
    }
    COLLIE_ASSIGN_OR_RETURN(conns_[p], ucx->connect(p, addr));
    any = true;
  }
  if (any) ucx_ = std::move(ucx);
  return Status::ok();
#else
  want->assign(want->size(), false);
  return Status::ok();
#endif
}

CommImpl::~CommImpl() {
  if (progress_.joinable()) {
    {
      std::lock_guard<std::mutex> l(qMu_);
      stopping_ = true;
    }
    qCv_.notify_all();
    progress_.join();
  }
  device_.reset();  // queued device ops are done: the progress thread drained the queue
  Deadline linger = Deadline::afterMs(1000);
  for (auto& c : conns_)
    if (c) c->linger(linger);
  conns_.clear();
  ucx_.reset();  // after its connections: closing their endpoints needs the worker
  shm_.reset();
  tcp_.reset();
  store_.reset();
  if (server_) server_->stop();
}

Status CommImpl::findAlgorithm(const std::string& want, Algorithm** out) const {
  *out = nullptr;
  if (want.empty() || want == "auto") return Status::ok();
  for (auto& a : algos_)
    if (want == a->name()) *out = a.get();
  if (*out != nullptr) return Status::ok();
  std::string have;
  for (auto& a : algos_) have += std::string(have.empty() ? "" : ", ") + a->name();
  return invalidArgument("COLLIE_ALGO=" + want + " is not an algorithm of this build (" + have +
                         ", or auto)");
}

Status CommImpl::setAlgorithm(const std::string& name) {
  {
    std::unique_lock<std::mutex> l(qMu_);
    if (inFlight_ > 0) qCv_.wait(l, [&] { return inFlight_ == 0; });
  }
  std::lock_guard<std::mutex> e(execMu_);
  Algorithm* a = nullptr;
  COLLIE_RETURN_IF_ERROR(findAlgorithm(name, &a));
  forced_ = a;
  return Status::ok();
}

Status CommImpl::failedError() {
  std::lock_guard<std::mutex> l(errMu_);
  return Status(firstError_.code(),
                "the communicator failed earlier and must be destroyed (collieCommAbort): " +
                    firstError_.message());
}

Status CommImpl::execute(const CollArgs& args, DeviceOp* device) {
  if (args.memory == MemoryKind::kHost) {
    if (failed_.load()) return failedError();
    return executeHost(args);
  }
#ifdef COLLIE_HAVE_CUDA
  DeviceOp none;
  DeviceOp* op = device != nullptr ? device : &none;
  DeviceStaging* staging = nullptr;
  {
    std::lock_guard<std::mutex> l(device_->mu);
    staging = device_->staging.get();
  }
  if (failed_.load() || staging == nullptr) {
    Status s = failed_.load() ? failedError() : internalError("device op without staging");
    if (op->gate) op->gate->open(s);
    return s;
  }
  Status s = staging->run(args, rank_, nranks_, op, Deadline::afterMs(timeoutMs_), &aborting_,
                          [this](const CollArgs& h) { return executeHost(h); });
  if (!s.isOk() && !failed_.load())
    fail(s.withContext(std::string(collectiveName(args.coll)) + " on device memory, rank " +
                       std::to_string(rank_)));
  return s;
#else
  return invalidArgument("device memory given but this build has no CUDA support");
#endif
}

Status CommImpl::ensureStaging(int device) {
#ifdef COLLIE_HAVE_CUDA
  std::lock_guard<std::mutex> l(device_->mu);
  if (device_->staging) {
    if (device_->staging->device() == device) return Status::ok();
    return invalidArgument("device buffers on CUDA device " + std::to_string(device) +
                           " but this communicator works on device " +
                           std::to_string(device_->staging->device()) +
                           " (one device per communicator, as with NCCL)");
  }
  COLLIE_ASSIGN_OR_RETURN(CudaPath path, parseCudaPath(params().getString("COLLIE_CUDA_PATH")));
  const bool oneHost = std::all_of(hostOf_.begin(), hostOf_.end(), [](int h) { return h == 0; });
  COLLIE_ASSIGN_OR_RETURN(bool tryRing, tryDeviceRing(path, nranks_, oneHost));
  std::unique_ptr<DeviceStaging> staging;
  COLLIE_ASSIGN_OR_RETURN(
      staging, DeviceStaging::create(
                   device,
                   // Room for one 4 KiB piece per rank (AllGather, ReduceScatter cut by rank).
                   std::max(static_cast<size_t>(params().getInt("COLLIE_CUDA_STAGING_BYTES")),
                            size_t(4096) * static_cast<size_t>(nranks_))));
  if (tryRing) {
    DeviceIpcConfig dc;
    dc.device = device;
    dc.rank = rank_;
    dc.nranks = nranks_;
    dc.path = path;
    dc.slotBytes = static_cast<size_t>(
        std::max<int64_t>(4096, params().getInt("COLLIE_CUDA_SLOT_BYTES")) & ~int64_t(255));
    dc.nslots = static_cast<int>(std::max<int64_t>(1, params().getInt("COLLIE_CUDA_SLOTS")));
    COLLIE_ASSIGN_OR_RETURN(device_->ipc,
                            DeviceIpc::create(dc, store_.get(), Deadline::afterMs(timeoutMs_)));
    if (DeviceIpc* ipc = device_->ipc.get())
      staging->setAllReduce(
          // COLLIE_ALGO / collieCommSetAlgorithm: ring and tree run on the device, the other
          // algorithms over staging.
          [this](const CollArgs&) {
            return forced_ == nullptr || strcmp(forced_->name(), "ring") == 0 ||
                   strcmp(forced_->name(), "tree") == 0;
          },
          [this, ipc](const CollArgs& a, void* stream, const Deadline& d,
                      const std::atomic<bool>*) {
            AlgoContext ctx = context(a);
            ctx.deadline = d;
            const bool tree = forced_ != nullptr
                                  ? strcmp(forced_->name(), "tree") == 0
                                  : pickDeviceAlgo(nranks_, a.count * dtypeSize(a.dtype),
                                                   kDeviceHopUs, kDeviceGBps) == DeviceAlgo::kTree;
            lastAlgo_.store(tree ? "device_tree" : "device_ring");
            return tree ? ipc->runTree(a, stream, ctx) : ipc->runRing(a, stream, ctx);
          });
  }
  device_->staging = std::move(staging);
  return Status::ok();
#else
  return invalidArgument("device memory given but this build has no CUDA support");
#endif
}

Status CommImpl::runDevice(const CollArgs& args, void* stream) {
#ifdef COLLIE_HAVE_CUDA
  if (failed_.load()) return failedError();
#ifdef COLLIE_HAVE_NCCL
  if (device_->nccl) {
    // In call order with Collie's own queued ops, as every collective is.
    {
      std::unique_lock<std::mutex> l(qMu_);
      if (inFlight_ > 0) qCv_.wait(l, [&] { return inFlight_ == 0; });
    }
    std::lock_guard<std::mutex> e(execMu_);
    Status s = device_->nccl->run(args, stream);
    if (!s.isOk()) fail(s);
    return s;
  }
#endif
  COLLIE_RETURN_IF_ERROR(ensureStaging(args.device));
  auto op = std::make_shared<DeviceOp>();
  // The stream waits at the gate a little longer than the op may take, then goes on.
  COLLIE_RETURN_IF_ERROR(device_->staging->enqueue(stream, timeoutMs_ + 10000, op.get()));
  {
    std::lock_guard<std::mutex> l(qMu_);
    queue_.push_back(Pending{args, nullptr, op});
    ++inFlight_;
  }
  qCv_.notify_all();
  return Status::ok();
#else
  return invalidArgument("device memory given but this build has no CUDA support");
#endif
}

AlgoContext CommImpl::context(const CollArgs& args) {
  AlgoContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.conns = connPtrs_.data();
  ctx.poller = poller_.get();
  ctx.deadline = Deadline::afterMs(timeoutMs_);
  ctx.seq = ++seq_;
  ctx.chunkBytes = chunkBytes_;
  ctx.scratch = &scratch_;
  ctx.opName = collectiveName(args.coll);
  ctx.abortFlag = &aborting_;
  ctx.link = link_;
  ctx.localLink = localLink_;
  ctx.oversubscribed = oversubscribed_;
  ctx.hostOf = hostOf_.data();
  return ctx;
}

Status CommImpl::executeHost(const CollArgs& args) {
  AlgoContext ctx = context(args);
  Algorithm* algo = nullptr;
  OnlineTuner::Trial* trial = nullptr;
  LastPick& lp = lastPick_;
  if (lp.algo != nullptr && lp.forced == forced_ && lp.coll == args.coll &&
      lp.count == args.count && lp.dtype == args.dtype && lp.root == args.root &&
      lp.memory == args.memory) {
    algo = lp.algo;
  } else {
    // Trials only where the choice is the tuner's and the call moves data; a forced algorithm
    // or a barrier is pickAlgorithm's to check.
    if (forced_ == nullptr && args.coll != Collective::kBarrier && args.count > 0)
      algo = online_.next(
          CallShape::of(args), [&] { return modelCandidates(algos_, args, ctx, tunerSpan_); },
          &trial);
    if (algo == nullptr) {
      Status picked = pickAlgorithm(algos_, forced_, args, ctx, &algo);
      if (!picked.isOk()) {
        --seq_;
        return picked;
      }
    }
    // The op of this shape (with the model's pick, or the tuner's once it has settled).
    if (trial == nullptr)
      lp = LastPick{algo, forced_, args.coll, args.count, args.dtype, args.root, args.memory};
  }
  lastAlgo_.store(trial != nullptr ? trialName(algo) : algo->name());
  const uint64_t t0 = trial != nullptr ? nowNs() : 0;
  Status s = algo->run(args, ctx);
  if (s.isOk() && trial != nullptr) {
    online_.record(trial, static_cast<double>(nowNs() - t0) / 1e3);
    if (online_.readyToSettle(trial)) s = settleTrial(trial, args);
  }
  if (!s.isOk()) {
    FrameTag t = ctx.tagFor(args, 0, algo->id());
    s = fail(s.withContext(describeFrameTag(t) + " on rank " + std::to_string(rank_)));
  }
  return s;
}

Status CommImpl::fail(const Status& s) {
  {
    std::lock_guard<std::mutex> l(errMu_);
    if (firstError_.isOk()) firstError_ = s;
    lastError_ = s.message();
  }
  if (failed_.exchange(true)) return s;
  // Tell every peer why, so each survivor can name the rank that failed. First the peers that
  // take data: an abort to a peer that does not read waits up to 50 ms (500 in all), and the
  // others listen for theirs (silentPeers). In a ring of 4 with one rank stopped, the ranks that
  // told it first held their word to a live peer, which then named them too (1 run in 8, under
  // ASan).
  for (const bool queued : {false, true})
    for (auto& c : conns_)
      if (c && c->sendsQueued() == queued) c->sendAbort(s.message());
  Status out = s;
  // A wait that timed out names the peer it waited on, which may itself wait on a stuck one (a
  // ring of 4 with rank 2 stopped: rank 1 waits on rank 0, which waits on rank 3); a peer's
  // abort passes such a message on.
  const bool stuckPeer =
      s.code() == collieTimeout ||
      (s.code() == collieRemoteError && s.message().find(kTimedOutWaitingFor) != std::string::npos);
  if (stuckPeer) {
    const std::string silent = silentPeers();
    if (!silent.empty()) {
      out = Status(s.code(), s.message() + silent);
      std::lock_guard<std::mutex> l(errMu_);
      if (firstError_.message() == s.message()) firstError_ = out;
      lastError_ = out.message();
    }
  } else {
    listenAfterFailure(/*forWord=*/false);
  }
  COLLIE_WARN(kLogColl, "%s", out.message().c_str());
  return out;
}

int64_t CommImpl::graceMs() const { return std::clamp<int64_t>(timeoutMs_ / 10, 1000, 3000); }

CommImpl::Hearing CommImpl::listenAfterFailure(bool forWord) {
  // Without forWord (a failure that is no timeout): an abort that waits behind a frame begun
  // toward a peer busy elsewhere (reducing, or waiting on another peer) goes on while the op has
  // not returned: after it the frame's buffer may be gone, and the close alone would make that
  // peer blame this rank (4 ranks over shm, one killed: a survivor read "lost peer rank 1:
  // connection closed mid-frame", of a live rank). The peer reads it in its op, or as it fails
  // in turn; this rank reads past what its peers push to it meanwhile, for the same reason.
  //
  // With forWord (silentPeers): ranks that failed on their own deadline did so within the skew
  // of their calls' starts; the others fail as the first abort reaches them, within
  // milliseconds. But a rank tells its peers one after another, and a peer that takes nothing
  // holds it up to 50 ms (StreamConnection::sendAbort): 4 ranks over shm, one stopped, a 300 ms
  // grace missed a live peer's abort in 1 run of 3 (then with 500 ms). A rank that has heard
  // every peer still pushes what is left of its own abort to them before it stops: they listen
  // for it.
  const Deadline grace = Deadline::afterMs(graceMs());
  Hearing h;
  for (;;) {
    h.silent.clear();
    h.told = 0;
    bool owed = false;  // this rank's own abort, not all gone to a peer that waits for it
    for (auto& c : conns_) {
      if (!c) continue;
      const Connection::Word w = c->listenAfterFailure();
      if (w != Connection::Word::kUnknown) ++h.told;
      if (w == Connection::Word::kNothing) h.silent.push_back(c->peer());
      if (c->abortPending() && (!forWord || w == Connection::Word::kHeard)) owed = true;
    }
    if (((!forWord || h.silent.empty()) && !owed) || grace.expired()) return h;
    // collieCommAbort waits for this op (it takes the op's lock): the grace ends with it.
    if (aborting_.load()) {
      h.cutShort = true;
      return h;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string CommImpl::silentPeers() {
  const Hearing h = listenAfterFailure(/*forWord=*/true);
  if (h.cutShort)
    return "; the listening for the peers' word after this failure was cut short by "
           "collieCommAbort";
  const std::vector<int>& silent = h.silent;
  const size_t told = h.told;
  if (silent.empty()) return "";
  std::string names;
  constexpr size_t kListed = 8;
  for (size_t i = 0; i < silent.size() && i < kListed; ++i)
    names += (i ? ", " : "") + std::to_string(silent[i]);
  if (silent.size() > kListed) names += " and " + std::to_string(silent.size() - kListed) + " more";
  const bool one = silent.size() == 1;
  std::string out = std::string("; after this failure ") + (one ? "peer rank " : "peer ranks ") +
                    names + " sent no word in " + std::to_string(graceMs()) + " ms";
  if (silent.size() < told)
    out += std::string(", while every other peer reported its failure: ") +
           (one ? "that rank is the one" : "those ranks are the ones") + " stuck";
  return out + " (stopped, hung, or not calling this op)";
}

Status CommImpl::run(const CollArgs& args) {
  if (inFlight_.load() > 0) {
    std::unique_lock<std::mutex> l(qMu_);
    qCv_.wait(l, [&] { return inFlight_ == 0; });
  }
  std::lock_guard<std::mutex> e(execMu_);
  return execute(args);
}

Status CommImpl::runAsync(const CollArgs& args, std::shared_ptr<WorkState>* work) {
  *work = std::make_shared<WorkState>();
  std::shared_ptr<DeviceOp> op;
  if (args.memory == MemoryKind::kCuda) {
    // No stream: the op runs when the progress thread gets to it, ordered only with the
    // communicator's other ops.
    COLLIE_RETURN_IF_ERROR(ensureStaging(args.device));
#ifdef COLLIE_HAVE_CUDA
    op = std::make_shared<DeviceOp>();
#endif
  }
  {
    std::lock_guard<std::mutex> l(qMu_);
    queue_.push_back(Pending{args, *work, op});
    ++inFlight_;
  }
  qCv_.notify_all();
  return Status::ok();
}

void CommImpl::progressLoop() {
  // This thread lives as long as the communicator: it holds the mark of this rank's life that
  // local peers in another PID namespace watch (ShmTransport::holdAlive).
  // A local peer that looks at the mark holds it for an instant; where it was stopped in that
  // instant, the mark is taken later, on one of this thread's idle wake-ups.
  struct Alive {
    ShmTransport* shm;
    bool held = false;
    Alive(ShmTransport* s, int rank) : shm(s) {
      if (shm == nullptr) return;
      held = shm->holdAlive(1000);
      if (!held)
        COLLIE_WARN(kLogInit,
                    "rank %d: its shm alive mark is taken by a local peer; it is held once "
                    "that peer lets go",
                    rank);
    }
    void retry() {
      if (shm != nullptr && !held) held = shm->holdAlive(0);
    }
    ~Alive() {
      if (held) shm->releaseAlive();
    }
  } alive(shm_.get(), rank_);
  for (;;) {
    alive.retry();
    Pending p;
    {
      std::unique_lock<std::mutex> l(qMu_);
      qCv_.wait_for(l, std::chrono::milliseconds(100),
                    [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        if (stopping_) return;
        l.unlock();
        tcp_->dropStrangers();
        continue;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s;
    {
      std::lock_guard<std::mutex> e(execMu_);
      s = execute(p.args, p.device.get());
    }
    if (!s.isOk()) setLastError(s.message());
    if (p.work) p.work->finish(s);
    {
      std::lock_guard<std::mutex> l(qMu_);
      --inFlight_;
    }
    qCv_.notify_all();
  }
}

Status CommImpl::asyncError() {
  std::lock_guard<std::mutex> l(errMu_);
  return firstError_;
}

void CommImpl::abort() {
  aborting_.store(true);
  std::lock_guard<std::mutex> e(execMu_);  // the running op sees the flag and returns
#ifdef COLLIE_HAVE_NCCL
  if (device_ && device_->nccl) device_->nccl->abort();
#endif
  fail(Status(collieRemoteError, "rank " + std::to_string(rank_) + " called collieCommAbort"));
}

std::string CommImpl::lastError() {
  std::lock_guard<std::mutex> l(errMu_);
  return lastError_;
}

void CommImpl::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> l(errMu_);
  lastError_ = msg;
}

}  // namespace collie
