// The device tree: AllReduce on device buffers among the processes of one host, for the sizes
// where the ring's 2 (n - 1) hops cost more than its bandwidth saves. One binary tree (tree 0 of
// tree_pattern.h), pipelined in chunks: each rank reduces its children's chunks into its recv
// and copies the partial up to its parent's slot; the root's result (scaled once for avg) is
// copied down, each rank forwarding it to its children. A rank's staging buffer holds three
// regions of nslots slots, one per incoming channel (child 0, child 1, parent); frames and
// flow control as device_channels.h.
#pragma once

#include <cstddef>

#include "algorithms/device_channels.h"

namespace collie {

// The tree's slot size in a staging buffer of nslots x slotBytes (three regions).
size_t deviceTreeSlotBytes(size_t slotBytes);

// One AllReduce (ctx.nranks >= 2). Returns once every frame is through; the device may still
// be running the work.
Status runDeviceTree(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev);

}  // namespace collie
