// runDeviceTree (see device_tree.h).
#include "algorithms/device_tree.h"

#include <algorithm>

#include "algorithms/patterns/tree_pattern.h"

namespace collie {

namespace {

// One AllReduce through the tree: the counters of each stream of chunks and the steps that
// advance them. Every step enqueues device work and then sends the frame that announces it.
class TreeRun {
 public:
  TreeRun(const CollArgs& args, const AlgoContext& ctx, size_t ts, int nslots, DeviceOps* dev)
      : args_(args),
        n_(ctx.nranks),
        me_(ctx.rank),
        node_(tree::node(me_, 0, n_)),
        esz_(dtypeSize(args.dtype)),
        ts_(ts),
        chunkElems_(ts / esz_),
        K_((args.count + chunkElems_ - 1) / chunkElems_),
        ns_(static_cast<size_t>(nslots)),
        root_(node_.parent < 0),
        send_(static_cast<const char*>(args.send)),
        recv_(static_cast<char*>(args.recv)),
        dev_(dev),
        ch_(args, ctx, "device tree", neighbours()) {}

  Status run() {
    COLLIE_RETURN_IF_ERROR(ch_.start());
    return ch_.drive([this](bool* acted) { return advance(acted); }, [this] { return done(); });
  }

 private:
  std::vector<DeviceChannels::Neighbour> neighbours() {
    for (int c : node_.child)
      if (c >= 0) children_.push_back(c);
    // My region in my parent's buffer: 0 or 1, as which child I am.
    if (!root_) upRegion_ = tree::node(node_.parent, 0, n_).child[0] == me_ ? 0 : 1;
    std::vector<DeviceChannels::Neighbour> nb;
    if (!root_) nb.push_back({node_.parent, K_, K_});
    for (int c : children_) nb.push_back({c, K_, K_});
    return nb;
  }

  size_t slotAt(int region, size_t k) const { return (region * ns_ + k % ns_) * ts_; }
  size_t first(size_t k) const { return k * chunkElems_; }
  size_t countOf(size_t k) const { return std::min(chunkElems_, args_.count - first(k)); }
  char* recvAt(size_t k) const { return recv_ + first(k) * esz_; }
  // A slot at peer takes chunk k once that peer freed chunk k - ns.
  bool slotFreeAt(int peer, size_t k) const { return k < ns_ || ch_.freed(peer) > k - ns_; }

  // Chunks whose partial (or, at the root, result) is complete.
  size_t reduced() const {
    size_t r = K_;
    for (size_t i = 0; i < children_.size(); ++i) r = std::min(r, reducedFrom_[i]);
    return r;
  }
  size_t result() const { return root_ ? rootDone_ : fromParent_; }

  // Child 0's chunk with my input, then child 1's into that.
  Status reduceChildren(bool* acted) {
    for (size_t i = 0; i < children_.size(); ++i) {
      const int c = children_[i];
      while (reducedFrom_[i] < ch_.ready(c) && (i == 0 || reducedFrom_[0] > reducedFrom_[i])) {
        const size_t k = reducedFrom_[i]++;
        char* dst = recvAt(k);
        const void* own = i == 0 ? static_cast<const void*>(send_ + first(k) * esz_) : dst;
        COLLIE_RETURN_IF_ERROR(dev_->waitPeer(c));
        COLLIE_RETURN_IF_ERROR(dev_->reduceSlot(dst, slotAt(static_cast<int>(i), k), own,
                                                countOf(k), args_.dtype, args_.op));
        COLLIE_RETURN_IF_ERROR(dev_->record());
        COLLIE_RETURN_IF_ERROR(ch_.sendFree(c, k));
        *acted = true;
      }
    }
    return Status::ok();
  }

  // The partial (a leaf's own input) into my slot at the parent.
  Status sendUp(bool* acted) {
    while (up_ < reduced() && slotFreeAt(node_.parent, up_)) {
      const size_t k = up_++;
      const char* src = (children_.empty() ? send_ : recv_) + first(k) * esz_;
      COLLIE_RETURN_IF_ERROR(dev_->waitPeer(node_.parent));
      COLLIE_RETURN_IF_ERROR(
          dev_->copyToPeer(node_.parent, slotAt(upRegion_, k), src, countOf(k) * esz_));
      COLLIE_RETURN_IF_ERROR(dev_->record());
      COLLIE_RETURN_IF_ERROR(ch_.sendReady(node_.parent, k));
      *acted = true;
    }
    return Status::ok();
  }

  // The result from the parent (after my partial went up: stream order).
  Status takeFromParent(bool* acted) {
    while (fromParent_ < ch_.ready(node_.parent)) {
      const size_t k = fromParent_++;
      COLLIE_RETURN_IF_ERROR(dev_->waitPeer(node_.parent));
      COLLIE_RETURN_IF_ERROR(dev_->copyFromSlot(recvAt(k), slotAt(2, k), countOf(k) * esz_));
      COLLIE_RETURN_IF_ERROR(dev_->record());
      COLLIE_RETURN_IF_ERROR(ch_.sendFree(node_.parent, k));
      *acted = true;
    }
    return Status::ok();
  }

  // The root's reduced chunks are the result; avg divides them once, here.
  Status finishAtRoot(bool* acted) {
    while (rootDone_ < reduced()) {
      const size_t k = rootDone_++;
      if (args_.op == collieAvg) {
        COLLIE_RETURN_IF_ERROR(dev_->scale(recvAt(k), countOf(k), args_.dtype, n_));
        COLLIE_RETURN_IF_ERROR(dev_->record());
      }
      *acted = true;
    }
    return Status::ok();
  }

  Status sendDown(bool* acted) {
    for (size_t i = 0; i < children_.size(); ++i) {
      const int c = children_[i];
      while (down_[i] < result() && slotFreeAt(c, down_[i])) {
        const size_t k = down_[i]++;
        COLLIE_RETURN_IF_ERROR(dev_->waitPeer(c));
        COLLIE_RETURN_IF_ERROR(dev_->copyToPeer(c, slotAt(2, k), recvAt(k), countOf(k) * esz_));
        COLLIE_RETURN_IF_ERROR(dev_->record());
        COLLIE_RETURN_IF_ERROR(ch_.sendReady(c, k));
        *acted = true;
      }
    }
    return Status::ok();
  }

  Status advance(bool* acted) {
    COLLIE_RETURN_IF_ERROR(reduceChildren(acted));
    if (root_) {
      COLLIE_RETURN_IF_ERROR(finishAtRoot(acted));
    } else {
      COLLIE_RETURN_IF_ERROR(sendUp(acted));
      COLLIE_RETURN_IF_ERROR(takeFromParent(acted));
    }
    return sendDown(acted);
  }

  bool done() const {
    if (reduced() < K_ || result() < K_ || (!root_ && up_ < K_)) return false;
    for (size_t i = 0; i < children_.size(); ++i)
      if (down_[i] < K_) return false;
    return ch_.allFreed();
  }

  const CollArgs& args_;
  const int n_, me_;
  const tree::Node node_;
  const size_t esz_, ts_, chunkElems_, K_, ns_;
  const bool root_;
  const char* send_;
  char* recv_;
  DeviceOps* dev_;
  std::vector<int> children_;
  int upRegion_ = 0;
  DeviceChannels ch_;               // declared after what neighbours() fills
  size_t reducedFrom_[2] = {0, 0};  // chunks of each child reduced into recv
  size_t up_ = 0, rootDone_ = 0, fromParent_ = 0;
  size_t down_[2] = {0, 0};
};

}  // namespace

size_t deviceTreeSlotBytes(size_t slotBytes) { return (slotBytes / 3) & ~size_t(255); }

Status runDeviceTree(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev) {
  const size_t ts = deviceTreeSlotBytes(slotBytes);
  if (ts < dtypeSize(args.dtype))
    return invalidArgument("device tree: slots of " + std::to_string(slotBytes) +
                           " bytes are too small (COLLIE_CUDA_SLOT_BYTES)");
  return TreeRun(args, ctx, ts, nslots, dev).run();
}

}  // namespace collie
