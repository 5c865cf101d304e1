// shm_direct's ReduceScatter, AllGather, Broadcast and Reduce (see shm_paths.h). Each stages a
// chunk per slot: ReduceScatter a chunk of every block, and each rank reduces its own block's
// chunk from all staging buffers into its output; AllGather each rank's chunk, and everyone
// copies all of them out; Broadcast the root's chunk only; Reduce everyone's, and the root
// reduces.
#include <algorithm>
#include <cstring>

#include "algorithms/shm_paths.h"

namespace collie {

namespace {

// Bytes staged per slot: whole elements, at most the chunk setting and the room there is.
size_t stepBytes(size_t room, const ShmDirectSettings& s, size_t esz) {
  return std::max<size_t>(esz, std::min(s.chunkBytes, room) / esz * esz);
}

// Reduces the chunk of len bytes at src(j) of every rank j (root's first, then rank order)
// into out.
template <typename Src>
void reduceChunk(char* out, Src src, size_t len, const CollArgs& a, int n, int first) {
  const size_t ce = len / dtypeSize(a.dtype);
  const void* acc = src(first);
  for (int j = 0; j < n; ++j) {
    if (j == first) continue;
    reduce(out, acc, src(j), ce, a.dtype, passOp(a.op));
    acc = out;
  }
  if (a.op == collieAvg) scaleForAvg(out, ce, a.dtype, n);
}

}  // namespace

Status shmReduceScatter(const CollArgs& a, AlgoContext& ctx, ShmFlags& f,
                        const ShmDirectSettings& s) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), block = a.count * esz;
  // One region per block, each of whole cache lines.
  const size_t room = f.room() / static_cast<size_t>(n) / kLine * kLine;
  const size_t step = stepBytes(room, s, esz), mine = static_cast<size_t>(r) * room;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  for (size_t off = 0; off < block; off += step) {
    const size_t len = std::min(step, block - off);
    const uint64_t e = f.take();
    for (int b = 0; b < n; ++b)
      memcpy(f.data(r, e) + static_cast<size_t>(b) * room,
             in + static_cast<size_t>(b) * block + off, len);
    f.publishStaged(a, ctx, e);
    COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
    reduceChunk(
        out + off, [&](int j) -> const void* { return f.data(j, e) + mine; }, len, a, n, 0);
  }
  return Status::ok();
}

Status shmAllGather(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), block = a.count * esz;
  const size_t step = stepBytes(f.room(), s, esz);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const bool streamOut = block * static_cast<size_t>(n) >= s.streamBytes;
  for (size_t off = 0; off < block; off += step) {
    const size_t len = std::min(step, block - off);
    const uint64_t e = f.take();
    memcpy(f.data(r, e), in + off, len);
    f.publishStaged(a, ctx, e);
    char* own = out + static_cast<size_t>(r) * block + off;
    if (own != in + off) memcpy(own, in + off, len);
    COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
    for (int j = 0; j < n; ++j)
      if (j != r) copyOut(out + static_cast<size_t>(j) * block + off, f.data(j, e), len, streamOut);
  }
  return Status::ok();
}

Status shmRooted(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s) {
  const int n = ctx.nranks, r = ctx.rank, root = a.root;
  const bool bcast = a.coll == Collective::kBroadcast;
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const size_t step = stepBytes(f.room(), s, esz);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  for (size_t off = 0; off < bytes; off += step) {
    const size_t len = std::min(step, bytes - off);
    const uint64_t e = f.take();
    // Broadcast stages the root's chunk, Reduce everyone's but the root's (it reads its own
    // input in place).
    if (bcast ? r == root : r != root) memcpy(f.data(r, e), in + off, len);
    f.publishStaged(a, ctx, e);
    if (bcast && r == root && out != in) memcpy(out + off, in + off, len);
    COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
    if (bcast && r != root) memcpy(out + off, f.data(root, e), len);
    // Reduce: the root's input first (in place it is the output), then the others in order.
    auto src = [&](int j) -> const void* { return j == root ? in + off : f.data(j, e); };
    if (!bcast && r == root) reduceChunk(out + off, src, len, a, n, root);
  }
  return Status::ok();
}

}  // namespace collie
