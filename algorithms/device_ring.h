// The device ring's schedule: AllReduce on device buffers among the processes of one host,
// each rank's prev copying into the slots of its staging buffer (device_ring_pattern.h lays
// out the messages, slots and flow control). All device work goes through a RingDevice, which
// enqueues it in order on one stream and orders it across processes (cuda_ipc and IPC events
// in src/core/device_ring.cc; plain host memory in the CPU tests). The host thread moves only
// 16-byte control frames over the communicator's connections: "message m is in your slot" to
// next, "I have consumed m" to prev. Every wait is bounded by ctx's deadline and abort flag.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace collie {

class RingDevice {
 public:
  virtual ~RingDevice() = default;
  // Later work waits for what prev (next) had recorded when it sent its last frame here.
  virtual Status waitPrev() = 0;
  virtual Status waitNext() = 0;
  // bytes from src (this rank's memory) to slotOffset in next's staging buffer.
  virtual Status copyToNext(size_t slotOffset, const void* src, size_t bytes) = 0;
  // dst[i] = slot[i] OP own[i], slot at slotOffset in this rank's staging buffer.
  virtual Status reduceSlot(void* dst, size_t slotOffset, const void* own, size_t count,
                            collieDataType_t dtype, collieRedOp_t op) = 0;
  virtual Status scale(void* dst, size_t count, collieDataType_t dtype, int divisor) = 0;
  virtual Status copyFromSlot(void* dst, size_t slotOffset, size_t bytes) = 0;
  // Marks the work enqueued so far: what waitPrev / waitNext of the neighbours wait for.
  virtual Status record() = 0;
};

// Runs one AllReduce (ctx.nranks >= 2) with staging slots of slotBytes, nslots per rank.
// Returns once every frame is through; the device may still be running the work.
Status runDeviceRing(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     RingDevice* dev);

}  // namespace collie
