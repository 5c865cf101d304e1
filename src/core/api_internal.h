// What the C and C++ API implementations share: communicator checks and argument validation.
#pragma once

#include "algorithms/algorithm.h"
#include "collie/collie.h"
#include "src/base/status.h"

namespace collie {

class CommImpl;

// Ok when comm is a live communicator of this process.
Status checkComm(const collieComm* comm);
CommImpl* commImpl(collieComm_t comm);
// Null buffers, unknown dtype/op, byte counts that overflow, partially overlapping buffers.
Status checkCollArgs(const CollArgs& args, int nranks);

}  // namespace collie
