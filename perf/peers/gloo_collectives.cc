// Gloo peer driver: float32 sum all-reduce with one of Gloo's classic in-place algorithms
// (ring, ring_chunked, halving_doubling) over its TCP transport on 127.0.0.1, timed as
// peer_bench.h says. Started by collie-run (RANK, WORLD_SIZE); ranks meet through a Gloo
// FileStore in the directory given with --store.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "perf/peers/peer_bench.h"

namespace {

using Context = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

// The classic algorithms are bound to a buffer and a count when built, so one is built per size.
std::unique_ptr<gloo::Algorithm> makeAlgorithm(const std::string& name, const Context& ctx,
                                               float* buf, size_t count) {
  std::vector<float*> ptrs{buf};
  int n = static_cast<int>(count);
  if (name == "ring") return std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, n);
  if (name == "ring_chunked") {
    return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, n);
  }
  if (name == "halving_doubling") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, n);
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  collie::peers::PeerOptions o;
  o.algo = "ring";
  if (!collie::peers::parsePeerOptions(argc, argv, &o)) return 2;
  if (o.label.empty()) o.label = "gloo-" + o.algo;
  int rank = envInt("RANK", -1), nranks = envInt("WORLD_SIZE", -1);
  if (rank < 0 || nranks < 1 || o.store.empty()) {
    fprintf(stderr, "gloo driver: needs RANK and WORLD_SIZE (collie-run sets them) and --store\n");
    return 2;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore files(o.store);
  gloo::rendezvous::PrefixStore store("collie-peer", files);
  auto rctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  // The deadline of every Gloo wait, rendezvous included.
  rctx->setTimeout(std::chrono::seconds(120));
  rctx->connectFullMesh(store, device);
  Context ctx = rctx;
  if (rank == 0) {
    printf("version gloo %d.%d.%d\n", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  }

  size_t maxCount = o.maxBytes / 4;
  std::vector<float> buf(maxCount ? maxCount : 1);
  std::unique_ptr<gloo::Algorithm> algo;
  size_t built = 0;
  collie::peers::PeerHooks h;
  h.allreduce = [&](size_t count) {
    if (!algo || built != count) {
      algo = makeAlgorithm(o.algo, ctx, buf.data(), count);
      built = count;
    }
    algo->run();
  };
  uint32_t tag = 100;
  h.barrier = [&] {
    gloo::BarrierOptions b(ctx);
    b.setTag(tag++);
    gloo::barrier(b);
  };
  h.maxOverRanks = [&](double v) {
    double r = 0;
    gloo::AllreduceOptions a(ctx);
    a.setInput(&v, 1);
    a.setOutput(&r, 1);
    a.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    a.setTag(tag++);
    gloo::allreduce(a);
    return r;
  };
  // In place: input and output are the one buffer.
  h.fillInput = [&](size_t count, float value) {
    std::fill(buf.begin(), buf.begin() + count, value);
  };
  h.output = [&] { return buf.data(); };
  if (!makeAlgorithm(o.algo, ctx, buf.data(), 1)) {
    fprintf(stderr, "gloo driver: unknown --algo %s (ring, ring_chunked, halving_doubling)\n",
            o.algo.c_str());
    return 2;
  }
  return collie::peers::runSweep(o, rank, nranks, h) ? 1 : 0;
}
