// runDeviceTree (see device_tree.h).
#include "algorithms/device_tree.h"

#include <algorithm>

#include "algorithms/patterns/tree_pattern.h"

namespace collie {

size_t deviceTreeSlotBytes(size_t slotBytes) { return (slotBytes / 3) & ~size_t(255); }

Status runDeviceTree(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev) {
  const int n = ctx.nranks, me = ctx.rank;
  const tree::Node node = tree::node(me, 0, n);
  const size_t esz = dtypeSize(args.dtype);
  const size_t ts = deviceTreeSlotBytes(slotBytes);
  if (ts < esz)
    return invalidArgument("device tree: slots of " + std::to_string(slotBytes) +
                           " bytes are too small (COLLIE_CUDA_SLOT_BYTES)");
  const size_t chunkElems = ts / esz;
  const size_t K = (args.count + chunkElems - 1) / chunkElems;
  const size_t ns = static_cast<size_t>(nslots);
  auto slotAt = [&](int region, size_t k) { return (region * ns + k % ns) * ts; };
  auto first = [&](size_t k) { return k * chunkElems; };
  auto countOf = [&](size_t k) { return std::min(chunkElems, args.count - first(k)); };
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);

  std::vector<int> children;
  for (int c : node.child)
    if (c >= 0) children.push_back(c);
  const bool root = node.parent < 0;
  // My region in my parent's buffer: 0 or 1, as which child I am.
  int upRegion = 0;
  if (!root) upRegion = tree::node(node.parent, 0, n).child[0] == me ? 0 : 1;
  std::vector<DeviceChannels::Neighbour> nb;
  if (!root) nb.push_back({node.parent, K, K});
  for (int c : children) nb.push_back({c, K, K});
  DeviceChannels ch(args, ctx, "device tree", nb);
  COLLIE_RETURN_IF_ERROR(ch.start());

  size_t reducedFrom[2] = {0, 0};  // chunks of each child reduced into recv
  size_t up = 0, rootDone = 0, fromParent = 0;
  size_t down[2] = {0, 0};
  auto reduced = [&] {  // chunks whose partial (or, at the root, result) is complete
    size_t r = K;
    for (size_t i = 0; i < children.size(); ++i) r = std::min(r, reducedFrom[i]);
    return r;
  };
  auto advance = [&](bool* acted) -> Status {
    // Reduce: child 0's chunk with my input, then child 1's into that.
    for (size_t i = 0; i < children.size(); ++i) {
      const int c = children[i];
      while (reducedFrom[i] < ch.ready(c) && (i == 0 || reducedFrom[0] > reducedFrom[i])) {
        const size_t k = reducedFrom[i]++;
        char* dst = recv + first(k) * esz;
        const void* own = i == 0 ? static_cast<const void*>(send + first(k) * esz) : dst;
        COLLIE_RETURN_IF_ERROR(dev->waitPeer(c));
        COLLIE_RETURN_IF_ERROR(dev->reduceSlot(dst, slotAt(static_cast<int>(i), k), own, countOf(k),
                                               args.dtype, args.op));
        COLLIE_RETURN_IF_ERROR(dev->record());
        COLLIE_RETURN_IF_ERROR(ch.sendFree(c, k));
        *acted = true;
      }
    }
    if (!root) {
      // Up: the partial (a leaf's own input) into my slot at the parent.
      while (up < reduced() && (up < ns || ch.freed(node.parent) > up - ns)) {
        const size_t k = up++;
        const char* src = (children.empty() ? send : recv) + first(k) * esz;
        COLLIE_RETURN_IF_ERROR(dev->waitPeer(node.parent));
        COLLIE_RETURN_IF_ERROR(
            dev->copyToPeer(node.parent, slotAt(upRegion, k), src, countOf(k) * esz));
        COLLIE_RETURN_IF_ERROR(dev->record());
        COLLIE_RETURN_IF_ERROR(ch.sendReady(node.parent, k));
        *acted = true;
      }
      // Down: the result from the parent (after my partial went up: stream order).
      while (fromParent < ch.ready(node.parent)) {
        const size_t k = fromParent++;
        COLLIE_RETURN_IF_ERROR(dev->waitPeer(node.parent));
        COLLIE_RETURN_IF_ERROR(
            dev->copyFromSlot(recv + first(k) * esz, slotAt(2, k), countOf(k) * esz));
        COLLIE_RETURN_IF_ERROR(dev->record());
        COLLIE_RETURN_IF_ERROR(ch.sendFree(node.parent, k));
        *acted = true;
      }
    } else {
      while (rootDone < reduced()) {
        const size_t k = rootDone++;
        if (args.op == collieAvg) {
          COLLIE_RETURN_IF_ERROR(dev->scale(recv + first(k) * esz, countOf(k), args.dtype, n));
          COLLIE_RETURN_IF_ERROR(dev->record());
        }
        *acted = true;
      }
    }
    const size_t result = root ? rootDone : fromParent;
    for (size_t i = 0; i < children.size(); ++i) {
      const int c = children[i];
      while (down[i] < result && (down[i] < ns || ch.freed(c) > down[i] - ns)) {
        const size_t k = down[i]++;
        COLLIE_RETURN_IF_ERROR(dev->waitPeer(c));
        COLLIE_RETURN_IF_ERROR(
            dev->copyToPeer(c, slotAt(2, k), recv + first(k) * esz, countOf(k) * esz));
        COLLIE_RETURN_IF_ERROR(dev->record());
        COLLIE_RETURN_IF_ERROR(ch.sendReady(c, k));
        *acted = true;
      }
    }
    return Status::ok();
  };
  auto done = [&] {
    if (reduced() < K || (root ? rootDone : fromParent) < K || (!root && up < K)) return false;
    for (size_t i = 0; i < children.size(); ++i)
      if (down[i] < K) return false;
    return ch.allFreed();
  };
  return ch.drive(advance, done);
}

}  // namespace collie
