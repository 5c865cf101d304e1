// collie-ucx-bench: the UCX ceiling beside Collie's UCX connection, between two processes of
// this host. "raw" drives ucp directly the way UCX's own tag_bw does (contiguous tagged sends,
// a window of them in flight, the worker busy-polled), configured as Collie configures UCX; "iov"
// is raw with each message sent as Collie used to frame it (a 48-byte header and the payload as a
// two-piece iov); "collie" moves the same traffic through UcxTransport/UcxConnection and a Poller,
// as a communicator does. Each mode reports one-way streaming bandwidth and the half round trip of
// a ping-pong.
//
//   UCX_TLS=tcp collie-ucx-bench [--modes raw,iov,collie] [--size 1M] [--window 8]
//                                [--iters 200] [--pingpong 2000] [--repeat 3]
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "src/base/params.h"
#include "transports/ucx/ucx_config.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {
namespace {

struct Options {
  std::vector<std::string> modes{"raw", "iov", "collie"};
  size_t size = 1 << 20;
  int window = 8;
  int iters = 200;
  int pingpong = 2000;
  int repeat = 3;
};

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "collie-ucx-bench: %s\n", what.c_str());
  exit(1);
}

// The two processes swap worker addresses and sync points over a socketpair.
struct Pipe {
  int fd;
  void put(const std::string& s) {
    uint64_t n = s.size();
    if (write(fd, &n, 8) != 8 || write(fd, s.data(), n) != static_cast<ssize_t>(n)) die("pipe");
  }
  std::string get() {
    uint64_t n = 0;
    if (read(fd, &n, 8) != 8) die("pipe");
    std::string s(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, &s[got], n - got);
      if (r <= 0) die("pipe");
      got += static_cast<size_t>(r);
    }
    return s;
  }
  std::string swap(const std::string& mine) {
    put(mine);
    return get();
  }
};

// Raw ucp: one context, worker and endpoint, as ucx_perftest sets them up.
class Raw {
 public:
  Raw(Pipe* pipe, bool iov) : iov_(iov) {
    auto api = ucxApi();
    if (!api.isOk()) die(api.status().toString());
    a_ = api.value();
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG;
    std::vector<std::string> resources;
    if (ucxInit(a_, p, &ctx_, &resources) != UCS_OK) die("ucp_init");
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (a_->workerCreate(ctx_, &wp, &worker_) != UCS_OK) die("ucp_worker_create");
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    if (a_->workerGetAddress(worker_, &addr, &len) != UCS_OK) die("ucp_worker_get_address");
    std::string peer = pipe->swap(std::string(reinterpret_cast<char*>(addr), len));
    a_->workerReleaseAddress(worker_, addr);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    if (a_->epCreate(worker_, &ep, &ep_) != UCS_OK) {
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      if (a_->epCreate(worker_, &ep, &ep_) != UCS_OK) die("ucp_ep_create");
    }
  }
  ~Raw() {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    wait(a_->epCloseNbx(ep_, &p));
    a_->workerDestroy(worker_);
    a_->cleanup(ctx_);
  }
  // Starts a send (or receive) of n bytes of buf; the request, or null when done at once.
  void* start(bool send, char* buf, size_t n, ucp_tag_t tag) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    void* b = buf;
    size_t count = n;
    iovs_.emplace_back();
    ucp_dt_iov_t* iov = iovs_.back().v;
    if (iov_ && n > 4096) {
      iov[0] = {hdr_, sizeof(hdr_)};
      iov[1] = {buf, n};
      p.datatype = ucp_dt_make_iov();
      b = iov;
      count = 2;
    } else {
      p.datatype = ucp_dt_make_contig(1);
    }
    ucs_status_ptr_t sp = send ? a_->tagSendNbx(ep_, b, count, tag, &p)
                               : a_->tagRecvNbx(worker_, b, count, tag, ~ucp_tag_t{0}, &p);
    if (UCS_PTR_IS_ERR(sp)) die(std::string("post: ") + a_->statusString(UCS_PTR_STATUS(sp)));
    return sp;
  }
  void wait(void* r) {
    if (r == nullptr || UCS_PTR_IS_ERR(r)) return;
    while (a_->requestCheckStatus(r) == UCS_INPROGRESS) a_->workerProgress(worker_);
    a_->requestFree(r);
  }
  void send(char* buf, size_t n, ucp_tag_t tag) { wait(start(true, buf, n, tag)); }
  void recv(char* buf, size_t n, ucp_tag_t tag) { wait(start(false, buf, n, tag)); }
  void done() { iovs_.clear(); }

 private:
  struct Iov {
    ucp_dt_iov_t v[2];
  };
  const UcxApi* a_ = nullptr;
  bool iov_;
  char hdr_[48] = {};
  std::deque<Iov> iovs_;  // kept until the window drains: UCX reads them while in flight
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

// Collie's transport and connection, progressed by a Poller as a communicator's schedule is.
class Ours {
 public:
  Ours(Pipe* pipe, int rank) {
    auto t = UcxTransport::create(rank, 2, 77, /*needRdma=*/false);
    if (!t.isOk()) die(t.status().toString());
    t_ = t.take();
    std::string peer = pipe->swap(t_->address());
    auto c = t_->connect(1 - rank, peer);
    if (!c.isOk()) die(c.status().toString());
    c_ = c.take();
    // It spins as a communicator's does (COLLIE_SPIN_US) before it sleeps on the worker.
    poller_.reset(new Poller({c_.get()}, params().getInt("COLLIE_SPIN_US"), nullptr));
  }
  ~Ours() {
    c_.reset();
    t_.reset();
  }
  Request* start(bool send, char* buf, size_t n, uint32_t tag) {
    reqs_.emplace_back(new Request());
    FrameTag ft;
    ft.tag = tag;
    Status s = send ? c_->isend(buf, n, ft, reqs_.back().get())
                    : c_->irecv(buf, n, ft, reqs_.back().get());
    if (!s.isOk()) die(s.toString());
    return reqs_.back().get();
  }
  void wait(Request* r) {
    Status s = poller_->wait(r, Deadline::afterMs(60000), "collie-ucx-bench");
    if (!s.isOk()) die(s.toString());
  }
  void send(char* buf, size_t n, uint32_t tag) { wait(start(true, buf, n, tag)); }
  void recv(char* buf, size_t n, uint32_t tag) { wait(start(false, buf, n, tag)); }
  void done() { reqs_.clear(); }

 private:
  std::unique_ptr<UcxTransport> t_;
  std::unique_ptr<Connection> c_;
  std::unique_ptr<Poller> poller_;
  std::vector<std::unique_ptr<Request>> reqs_;
};

struct Result {
  double gbps = 0;
  double halfRttUs = 0;
};

// Rank 0 streams iters messages, window of them in flight; rank 1 receives them and answers
// with 8 bytes once all are in. Then an 8-byte ping-pong. Times are rank 0's.
template <typename Link>
Result measure(Link& link, int rank, const Options& o) {
  std::vector<char> buf(o.size * static_cast<size_t>(o.window), 1);
  char small[8] = {};
  Result r;
  const bool sender = rank == 0;
  for (int round = 0; round < 2; ++round) {  // the first round warms up
    const int iters = round == 0 ? std::max(o.window, o.iters / 10) : o.iters;
    const double t0 = nowSec();
    std::vector<decltype(link.start(true, nullptr, 0, 0))> inflight(o.window);
    for (int i = 0; i < iters; ++i) {
      const int slot = i % o.window;
      if (i >= o.window) link.wait(inflight[slot]);
      inflight[slot] = link.start(sender, buf.data() + slot * o.size, o.size, i);
    }
    for (int i = std::max(0, iters - o.window); i < iters; ++i) link.wait(inflight[i % o.window]);
    link.done();
    if (sender)
      link.recv(small, 8, iters);
    else
      link.send(small, 8, iters);
    const double t = nowSec() - t0;
    if (round == 1) r.gbps = static_cast<double>(o.size) * iters / t / 1e9;
  }
  const double t0 = nowSec();
  for (int i = 0; i < o.pingpong; ++i) {
    if (sender) {
      link.send(small, 8, 1u << 30);
      link.recv(small, 8, 1u << 30);
    } else {
      link.recv(small, 8, 1u << 30);
      link.send(small, 8, 1u << 30);
    }
    if ((i & 63) == 63) link.done();
  }
  link.done();
  r.halfRttUs = (nowSec() - t0) / o.pingpong / 2 * 1e6;
  return r;
}

Result runMode(const std::string& mode, Pipe* pipe, int rank, const Options& o) {
  pipe->swap("sync");
  if (mode == "collie") {
    Ours link(pipe, rank);
    return measure(link, rank, o);
  }
  if (mode != "raw" && mode != "iov") die("unknown mode " + mode);
  Raw link(pipe, mode == "iov");
  return measure(link, rank, o);
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  const char u = end != nullptr ? *end : 0;
  const double m = u == 'K' || u == 'k' ? 1 << 10 : u == 'M' || u == 'm' ? 1 << 20 : 1;
  return static_cast<size_t>(v * m);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--modes") {
      o.modes.clear();
      std::string s = v;
      for (size_t p = 0; p <= s.size();) {
        size_t q = std::min(s.find(',', p), s.size());
        o.modes.push_back(s.substr(p, q - p));
        p = q + 1;
      }
    } else if (k == "--size") {
      o.size = parseSize(v);
    } else if (k == "--window") {
      o.window = std::max(1, atoi(v));
    } else if (k == "--iters") {
      o.iters = std::max(1, atoi(v));
    } else if (k == "--pingpong") {
      o.pingpong = std::max(1, atoi(v));
    } else if (k == "--repeat") {
      o.repeat = std::max(1, atoi(v));
    } else {
      die("unknown option " + k);
    }
  }
  return o;
}

}  // namespace
}  // namespace collie

int main(int argc, char** argv) {
  using namespace collie;
  const Options o = parse(argc, argv);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair");
  const pid_t child = fork();
  if (child < 0) die("fork");
  const int rank = child == 0 ? 1 : 0;
  Pipe pipe{sv[rank]};
  close(sv[1 - rank]);
  if (rank == 0) {
    const char* tls = getenv("UCX_TLS");
    printf("UCX_TLS=%s size %zu window %d iters %d; GB/s one way, us half round trip (8 B)\n",
           tls ? tls : "(default)", o.size, o.window, o.iters);
  }
  for (int rep = 0; rep < o.repeat; ++rep) {
    std::string line;
    for (const std::string& m : o.modes) {
      Result r = runMode(m, &pipe, rank, o);
      char cell[96];
      snprintf(cell, sizeof(cell), "  %s %6.2f GB/s %6.2f us", m.c_str(), r.gbps, r.halfRttUs);
      line += cell;
    }
    if (rank == 0) printf("%s\n", line.c_str()), fflush(stdout);
  }
  if (rank == 0) waitpid(child, nullptr, 0);
  return 0;
}
