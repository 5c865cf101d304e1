// Gloo peer driver: one float32 collective (--coll, default allreduce; reductions sum) over
// Gloo's TCP transport on 127.0.0.1, timed as peer_bench.h says. All-reduce runs one of Gloo's
// classic in-place algorithms (--algo ring, ring_chunked, halving_doubling), reduce-scatter
// its halving-doubling one (in place too); the others run Gloo's one algorithm for each
// (--algo default), and sendrecv is a pair of unbound-buffer messages. Started by collie-run
// (RANK, WORLD_SIZE); ranks meet through a Gloo FileStore in the directory given with --store.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/config.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/scatter.h"
#include "gloo/transport/tcp/device.h"
#include "perf/peers/peer_bench.h"

namespace {

using collie::peers::Coll;
using collie::peers::kRoot;
using collie::peers::Layout;
using Context = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

// The --algo names each collective has here.
bool knownAlgo(Coll c, const std::string& algo) {
  if (c == Coll::kAllReduce)
    return algo == "ring" || algo == "ring_chunked" || algo == "halving_doubling";
  if (c == Coll::kReduceScatter) return algo == "halving_doubling";
  return algo == "default";
}

// The classic algorithms are bound to a buffer and a count when built, so one is built per size.
std::unique_ptr<gloo::Algorithm> makeClassic(Coll c, const std::string& name, const Context& ctx,
                                             float* buf, const Layout& l) {
  std::vector<float*> ptrs{buf};
  int n = static_cast<int>(l.count);
  if (c == Coll::kReduceScatter) {
    std::vector<int> blocks(ctx->size, static_cast<int>(l.block));
    return std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(ctx, ptrs, n, blocks);
  }
  if (name == "ring") return std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, n);
  if (name == "ring_chunked")
    return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, n);
  return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, n);
}

// The collectives of Gloo's options API (and sendrecv), out of place from in to out. Each call
// has a tag of its own, as Gloo asks of operations that may overlap between ranks.
class Collectives {
 public:
  Collectives(Context ctx, float* in, float* out) : ctx_(std::move(ctx)), in_(in), out_(out) {}

  void run(Coll c, const Layout& l) {
    switch (c) {
      case Coll::kAllGather: {
        gloo::AllgatherOptions a(ctx_);
        a.setInput(in_, l.block);
        a.setOutput(out_, l.count);
        a.setTag(tag_++);
        gloo::allgather(a);
        return;
      }
      case Coll::kBroadcast: {
        gloo::BroadcastOptions a(ctx_);
        if (ctx_->rank == kRoot) a.setInput(in_, l.count);
        a.setOutput(out_, l.count);
        a.setRoot(kRoot);
        a.setTag(tag_++);
        gloo::broadcast(a);
        return;
      }
      case Coll::kReduce:
        return reduce(l);
      case Coll::kAlltoAll: {
        gloo::AlltoallOptions a(ctx_);
        a.setInput(in_, l.count);
        a.setOutput(out_, l.count);
        a.setTag(tag_++);
        gloo::alltoall(a);
        return;
      }
      case Coll::kGather:
        return gather(l);
      case Coll::kScatter:
        return scatter(l);
      default:
        return sendRecv(l);
    }
  }

  uint32_t nextTag() { return tag_++; }

 private:
  void reduce(const Layout& l) {
    gloo::ReduceOptions a(ctx_);
    a.setInput(in_, l.count);
    a.setOutput(out_, l.count);
    a.setRoot(kRoot);
    a.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    a.setTag(tag_++);
    gloo::reduce(a);
  }

  void gather(const Layout& l) {
    gloo::GatherOptions a(ctx_);
    a.setInput(in_, l.block);
    if (ctx_->rank == kRoot) a.setOutput(out_, l.count);
    a.setRoot(kRoot);
    a.setTag(tag_++);
    gloo::gather(a);
  }

  void scatter(const Layout& l) {
    gloo::ScatterOptions a(ctx_);
    std::vector<float*> blocks;
    for (int r = 0; r < ctx_->size; ++r) blocks.push_back(in_ + r * l.block);
    if (ctx_->rank == kRoot) a.setInputs(blocks, l.block);
    a.setOutput(out_, l.block);
    a.setRoot(kRoot);
    a.setTag(tag_++);
    gloo::scatter(a);
  }

  // The ring of nccl-tests' sendrecv: to rank+1, from rank-1, both in flight at once.
  void sendRecv(const Layout& l) {
    const int n = ctx_->size, rank = ctx_->rank;
    auto send = ctx_->createUnboundBuffer(in_, l.count * sizeof(float));
    auto recv = ctx_->createUnboundBuffer(out_, l.count * sizeof(float));
    const uint64_t slot = tag_++;
    recv->recv((rank - 1 + n) % n, slot);
    send->send((rank + 1) % n, slot);
    send->waitSend();
    recv->waitRecv();
  }

  Context ctx_;
  float* in_;
  float* out_;
  uint32_t tag_ = 100;
};

Context connect(int rank, int nranks, const std::string& dir) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore files(dir);
  gloo::rendezvous::PrefixStore store("collie-peer", files);
  auto rctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  // The deadline of every Gloo wait, rendezvous included.
  rctx->setTimeout(std::chrono::seconds(120));
  rctx->connectFullMesh(store, device);
  return rctx;
}

}  // namespace

int main(int argc, char** argv) {
  collie::peers::PeerOptions o;
  if (!collie::peers::parsePeerOptions(argc, argv, &o)) return 2;
  const Coll coll = o.coll->coll;
  if (o.algo.empty())
    o.algo = coll == Coll::kAllReduce       ? "ring"
             : coll == Coll::kReduceScatter ? "halving_doubling"
                                            : "default";
  if (o.label.empty()) o.label = "gloo-" + o.algo;
  int rank = envInt("RANK", -1), nranks = envInt("WORLD_SIZE", -1);
  if (rank < 0 || nranks < 1 || o.store.empty()) {
    fprintf(stderr, "gloo driver: needs RANK and WORLD_SIZE (collie-run sets them) and --store\n");
    return 2;
  }
  if (!knownAlgo(coll, o.algo)) {
    fprintf(stderr,
            "gloo driver: no --algo %s for %s (allreduce: ring, ring_chunked, halving_doubling; "
            "reducescatter: halving_doubling; the others: default)\n",
            o.algo.c_str(), o.coll->name);
    return 2;
  }
  Context ctx = connect(rank, nranks, o.store);
  if (rank == 0) {
    printf("version gloo %d.%d.%d\n", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  }
  size_t maxCount = o.maxBytes / 4;
  std::vector<float> in(maxCount ? maxCount : 1), out(maxCount ? maxCount : 1);
  const bool classic = coll == Coll::kAllReduce || coll == Coll::kReduceScatter;
  Collectives colls(ctx, in.data(), out.data());
  std::unique_ptr<gloo::Algorithm> algo;
  size_t built = 0;
  collie::peers::PeerHooks h;
  h.run = [&](const Layout& l) {
    if (!classic) return colls.run(coll, l);
    if (!algo || built != l.count) {
      algo = makeClassic(coll, o.algo, ctx, in.data(), l);
      built = l.count;
    }
    algo->run();
  };
  h.barrier = [&] {
    gloo::BarrierOptions b(ctx);
    b.setTag(colls.nextTag());
    gloo::barrier(b);
  };
  h.maxOverRanks = [&](double v) {
    double r = 0;
    gloo::AllreduceOptions a(ctx);
    a.setInput(&v, 1);
    a.setOutput(&r, 1);
    a.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    a.setTag(colls.nextTag());
    gloo::allreduce(a);
    return r;
  };
  h.input = [&] { return in.data(); };
  // The classic algorithms work in place: the result is where the input was.
  h.output = [&] { return classic ? in.data() : out.data(); };
  return collie::peers::runSweep(o, rank, nranks, h) ? 1 : 0;
}
