// Which path device-buffer AllReduces take (COLLIE_CUDA_PATH), and how the ranks agree on it.
//   auto    the device ring over cuda_ipc when every rank is on one host and each one could set
//           it up; else device data is staged through pinned host buffers;
//   ipc     the device ring or an error that names the rank that cannot;
//   staged  always through pinned host buffers (the host transports and algorithms).
// Each rank publishes what it could do ("ok" or "!reason") and all decide alike from the set,
// so that no rank runs the ring while another stages. Kept free of CUDA: tested on the CPU.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace collie {

enum class CudaPath { kAuto, kIpc, kStaged };

// invalidArgument for a value that is none of the three.
StatusOr<CudaPath> parseCudaPath(const std::string& value);
const char* cudaPathName(CudaPath p);

// Before any exchange: whether the device ring is worth trying (true), not tried (false), or an
// error (ipc asked for where it cannot run).
StatusOr<bool> tryDeviceRing(CudaPath path, int nranks, bool oneHost);

// What rank `rank` publishes: "ok", or "!" and why not.
std::string cudaPathVote(const Status& s);

// From every rank's vote: true for the ring, false for staging (auto), or an error naming the
// first rank that could not (ipc, or a vote that is neither).
StatusOr<bool> decideCudaPath(CudaPath path, const std::vector<std::string>& votes,
                              const char* stage);

// Which device schedule an AllReduce of bytes over nranks (>= 2) of one host runs: the tree
// when its 2 log2(n) hops beat the ring's 2 (n - 1) by more than the ring's bandwidth gains,
// i.e. bytes < hopUs * GBps * n * (n - 1 - height), from an alpha-beta model of a hop (a
// frame and an event wait, hopUs) and of a device copy (GBps).
enum class DeviceAlgo { kRing, kTree };
DeviceAlgo pickDeviceAlgo(int nranks, size_t bytes, double hopUs, double gbps);
// Guesses until a GPU run of tests/gpu/device_check.sh (ring and tree tables) calibrates them.
constexpr double kDeviceHopUs = 20.0;
constexpr double kDeviceGBps = 100.0;

}  // namespace collie
