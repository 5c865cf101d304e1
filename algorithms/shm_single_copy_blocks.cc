// shm_single_copy's block moves (see shm_single_copy.h). Every rank pulls what it receives
// straight from the peers' buffers into its own output, except Gather, where every rank pushes
// its block into the root's output: the copies then run on all ranks at once, not one after
// another on the root. A first flag round publishes the addresses; a second tells that every
// peer is done with this rank's buffers, so that no rank returns while a peer still copies.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/shm_single_copy.h"

namespace collie {

namespace {

// In-place AllToAll's bounce buffer: a block from the peer waits there while this rank's own
// block for that peer leaves from where it will land.
constexpr size_t kSwapChunk = 1 << 20;

// AllToAllv: where a rank's block for each peer starts, in its address space, and its elements;
// published in the rank's slot, one entry per peer.
struct PeerBlock {
  uint64_t addr;
  uint64_t count;
};

char* offsetBy(uint64_t addr, size_t bytes) { return reinterpret_cast<char*>(addr) + bytes; }

Status readFrom(AlgoContext& ctx, int j, const void* remote, void* local, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return ctx.conns[j]->peerMemory()->read(remote, local, bytes, ctx.opName);
}

void copyLocal(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) memcpy(dst, src, bytes);
}

// The rooted calls share the copies between the root and the peers, which would otherwise
// wait for one side: of each peer's block the peer copies the head and the root the tail, a
// 1/n share, so that every rank copies (n-1)/n of a block. A root out of place copies its own
// block instead, as much as each peer's: then the peers copy all of theirs.
size_t headBytes(const CollArgs& a, int n, const SlotFlags* root) {
  const size_t at = static_cast<size_t>(a.root) * argBytes(a);
  const bool inPlace = a.coll == Collective::kBroadcast ? root->sendAddr == root->recvAddr
                       : a.coll == Collective::kGather  ? root->sendAddr == root->recvAddr + at
                                                        : root->recvAddr == root->sendAddr + at;
  if (!inPlace) return argBytes(a);
  return argBytes(a) - a.count / static_cast<size_t>(n) * dtypeSize(a.dtype);
}

// Between the root's block for each peer (Broadcast: its one block) and the peer's buffer:
// into the root's output (Gather, toRoot) or out of the root's input.
Status splitCopy(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e, bool toRoot) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t bytes = argBytes(a), head = headBytes(a, n, f.flags(a.root, e));
  const bool perPeer = a.coll != Collective::kBroadcast;
  if (r != a.root) {
    const SlotFlags* root = f.flags(a.root, e);
    const size_t at = perPeer ? static_cast<size_t>(r) * bytes : 0;
    PeerMemory* m = ctx.conns[a.root]->peerMemory();
    if (head == 0) return Status::ok();
    return toRoot ? m->write(offsetBy(root->recvAddr, at), a.send, head, ctx.opName)
                  : m->read(offsetBy(root->sendAddr, at), a.recv, head, ctx.opName);
  }
  for (int k = 1; k < n && head < bytes; ++k) {
    const int j = (r + k) % n;
    const size_t at = perPeer ? static_cast<size_t>(j) * bytes + head : head;
    const SlotFlags* p = f.flags(j, e);
    PeerMemory* m = ctx.conns[j]->peerMemory();
    COLLIE_RETURN_IF_ERROR(
        toRoot ? m->read(offsetBy(p->sendAddr, head), static_cast<char*>(a.recv) + at, bytes - head,
                         ctx.opName)
               : m->write(offsetBy(p->recvAddr, head), static_cast<const char*>(a.send) + at,
                          bytes - head, ctx.opName));
  }
  return Status::ok();
}

// The root's own block, where it is not in place.
void rootOwnBlock(const CollArgs& a, int r) {
  const size_t bytes = argBytes(a), at = static_cast<size_t>(r) * bytes;
  if (a.coll == Collective::kBroadcast)
    copyLocal(a.recv, a.send, bytes);
  else if (a.coll == Collective::kScatter)
    copyLocal(a.recv, static_cast<const char*>(a.send) + at, bytes);
  else
    copyLocal(static_cast<char*>(a.recv) + at, a.send, bytes);
}

Status rooted(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e) {
  if (ctx.rank == a.root) rootOwnBlock(a, ctx.rank);
  return splitCopy(a, ctx, f, e, a.coll == Collective::kGather);
}

// Every rank reads the peers in turn from the next one on, so that no peer is read by all at once.
Status allGather(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t bytes = argBytes(a);
  char* out = static_cast<char*>(a.recv);
  copyLocal(out + static_cast<size_t>(r) * bytes, a.send, bytes);
  for (int k = 1; k < n; ++k) {
    const int j = (r + k) % n;
    COLLIE_RETURN_IF_ERROR(readFrom(ctx, j, offsetBy(f.flags(j, e)->sendAddr, 0),
                                    out + static_cast<size_t>(j) * bytes, bytes));
  }
  return Status::ok();
}

// A pair of which one rank runs in place: each of its blocks for the other must be read before
// it is overwritten. The two ranks swap the pair's blocks both ways, the lower rank the first
// half of the elements, the higher the rest; for each piece of its half a rank reads the
// peer's piece aside, writes its own piece where the peer receives it, then lands the one put
// aside. No one else touches these pieces, and each is read before it is written.
Status swapHalf(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e, int j,
                std::vector<char>* tmp) {
  const int r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), bytes = argBytes(a), half = a.count / 2 * esz;
  const size_t from = r < j ? 0 : half, to = r < j ? half : bytes;
  const SlotFlags* p = f.flags(j, e);
  const char* theirSend = offsetBy(p->sendAddr, static_cast<size_t>(r) * bytes);
  char* theirRecv = offsetBy(p->recvAddr, static_cast<size_t>(r) * bytes);
  const char* mySend = static_cast<const char*>(a.send) + static_cast<size_t>(j) * bytes;
  char* myRecv = static_cast<char*>(a.recv) + static_cast<size_t>(j) * bytes;
  PeerMemory* m = ctx.conns[j]->peerMemory();
  const size_t step = std::max(esz, kSwapChunk / esz * esz);
  if (tmp->size() < std::min(step, to - from)) tmp->resize(std::min(step, to - from));
  for (size_t off = from; off < to; off += step) {
    const size_t len = std::min(step, to - off);
    COLLIE_RETURN_IF_ERROR(m->read(theirSend + off, tmp->data(), len, ctx.opName));
    COLLIE_RETURN_IF_ERROR(m->write(theirRecv + off, mySend + off, len, ctx.opName));
    memcpy(myRecv + off, tmp->data(), len);
  }
  return Status::ok();
}

Status allToAll(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e,
                std::vector<char>* tmp) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t bytes = argBytes(a);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  copyLocal(out + static_cast<size_t>(r) * bytes, in + static_cast<size_t>(r) * bytes, bytes);
  for (int k = 1; k < n; ++k) {
    const int j = (r + k) % n;
    const SlotFlags* p = f.flags(j, e);
    // Both ranks of the pair see both placements, so both take the same road.
    if (a.send == a.recv || p->sendAddr == p->recvAddr) {
      COLLIE_RETURN_IF_ERROR(swapHalf(a, ctx, f, e, j, tmp));
      continue;
    }
    COLLIE_RETURN_IF_ERROR(readFrom(ctx, j, offsetBy(p->sendAddr, static_cast<size_t>(r) * bytes),
                                    out + static_cast<size_t>(j) * bytes, bytes));
  }
  return Status::ok();
}

// Before the addresses are published: a rank's mistake is found before any peer reads from it.
Status publishAllToAllv(const CollArgs& a, const AlgoContext& ctx, ShmFlags& f, uint64_t e) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  if (a.sendCounts[r] != a.recvCounts[r])
    return invalidUsage(std::string(ctx.opName) + ": rank " + std::to_string(r) + " sends " +
                        std::to_string(a.sendCounts[r]) + " elements to itself (sendcounts[" +
                        std::to_string(r) + "]) but expects " + std::to_string(a.recvCounts[r]) +
                        " (recvcounts[" + std::to_string(r) + "])");
  PeerBlock* table = reinterpret_cast<PeerBlock*>(f.data(r, e));
  for (int j = 0; j < n; ++j) {
    const char* at =
        a.sendCounts[j] == 0 ? nullptr : static_cast<const char*>(a.send) + a.sendDispls[j] * esz;
    table[j] = PeerBlock{reinterpret_cast<uintptr_t>(at), a.sendCounts[j]};
  }
  return Status::ok();
}

Status allToAllv(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (a.recvCounts[r] > 0)
    copyLocal(out + a.recvDispls[r] * esz, static_cast<const char*>(a.send) + a.sendDispls[r] * esz,
              a.recvCounts[r] * esz);
  for (int k = 1; k < n; ++k) {
    const int j = (r + k) % n;
    const PeerBlock b = reinterpret_cast<const PeerBlock*>(f.data(j, e))[r];
    if (b.count != a.recvCounts[j])
      return invalidUsage(std::string(ctx.opName) + ": ranks disagree: rank " + std::to_string(r) +
                          " expects " + std::to_string(a.recvCounts[j]) +
                          " elements from peer rank " + std::to_string(j) + " (recvcounts[" +
                          std::to_string(j) + "]), which sends it " + std::to_string(b.count) +
                          " (its sendcounts[" + std::to_string(r) + "])");
    if (b.count > 0)
      COLLIE_RETURN_IF_ERROR(
          readFrom(ctx, j, offsetBy(b.addr, 0), out + a.recvDispls[j] * esz, b.count * esz));
  }
  return Status::ok();
}

Status moveBlocks(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e,
                  std::vector<char>* tmp) {
  switch (a.coll) {
    case Collective::kBroadcast:
    case Collective::kGather:
    case Collective::kScatter:
      return rooted(a, ctx, f, e);
    case Collective::kAllGather:
      return allGather(a, ctx, f, e);
    case Collective::kAllToAll:
      return allToAll(a, ctx, f, e, tmp);
    case Collective::kAllToAllv:
      return allToAllv(a, ctx, f, e);
    default:
      return invalidUsage(std::string("shm_single_copy cannot run ") + collectiveName(a.coll));
  }
}

}  // namespace

bool singleCopyMovesBlocks(Collective coll) {
  switch (coll) {
    case Collective::kBroadcast:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
    case Collective::kGather:
    case Collective::kScatter:
      return true;
    default:
      return false;
  }
}

bool singleCopyBlocksFit(const CollArgs& a, int nranks, size_t slotRoom) {
  return a.coll != Collective::kAllToAllv ||
         static_cast<size_t>(nranks) * sizeof(PeerBlock) <= slotRoom;
}

double singleCopyBlocksCostUs(const CollArgs& a, int n, double copyRatio) {
  // The busiest rank's copies: through the kernel at the agreed speed, its own block by memcpy.
  const double b = static_cast<double>(argBytes(a)), dn = n;
  double kernel = b, local = 0, calls = 1;
  switch (a.coll) {
    case Collective::kAllGather:
    case Collective::kAllToAll:
      kernel = (dn - 1) * b;
      local = b;
      calls = dn - 1;
      break;
    default:  // rooted, out of place: a block on each peer, and the root's own block by memcpy
      local = b;
      calls = dn - 1;
      break;
  }
  return 0.6 + calls * kSingleCopySystemCallUs + (kernel / copyRatio + local) / kShmCopyBytesPerUs;
}

Status singleCopyBlocks(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, std::vector<char>* tmp) {
  const int r = ctx.rank;
  if (a.count == 0 && a.coll != Collective::kAllToAllv) return Status::ok();
  const uint64_t e = f.take();
  SlotFlags* mine = f.flags(r, e);
  mine->sendAddr = reinterpret_cast<uintptr_t>(a.send);
  mine->recvAddr = reinterpret_cast<uintptr_t>(a.recv);
  if (a.coll == Collective::kAllToAllv) COLLIE_RETURN_IF_ERROR(publishAllToAllv(a, ctx, f, e));
  f.publishStaged(a, ctx, e, kSingle);
  COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
  COLLIE_RETURN_IF_ERROR(moveBlocks(a, ctx, f, e, tmp));
  // Done with the peers' buffers; return once they are done with this rank's.
  mine->reduced.store(e + 1, std::memory_order_release);
  return f.waitAll(a, ctx, e, false);
}

}  // namespace collie
