// The device ring: AllReduce on device buffers among the processes of one host. Each rank's
// prev copies into nslots slots of its staging buffer, the device reduces each slot into the
// recv block, and the all-gather steps copy finished blocks around the ring; messages, slots
// and flow control as device_ring_pattern.h lays them out, frames as device_channels.h.
#pragma once

#include <cstddef>

#include "algorithms/device_channels.h"

namespace collie {

// One AllReduce (ctx.nranks >= 2) with staging slots of slotBytes, nslots per rank. Returns
// once every frame is through; the device may still be running the work.
Status runDeviceRing(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev);

}  // namespace collie
