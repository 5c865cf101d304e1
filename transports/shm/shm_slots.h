// The flag slots of the ranks of one host (ShmSlots, transport.h): every local rank's staging
// buffer cut into ShmSlots::kSlots slots of whole cache lines.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "transports/transport.h"

namespace collie {

// staging[i] is the staging buffer of localRanks[i] as mapped here, stagingBytes long. The
// buffers must outlive the slots.
std::shared_ptr<ShmSlots> makeShmSlots(const std::vector<int>& localRanks,
                                       const std::vector<char*>& staging, size_t stagingBytes);

}  // namespace collie
