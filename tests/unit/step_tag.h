// The frame tag of step `step` of a pretend op (sequence 1, count 5), for transport tests that
// send framed messages without a communicator.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace collie {

inline FrameTag stepTag(uint32_t step) {
  FrameTag t;
  t.seq = 1;
  t.count = 5;
  t.tag = step;
  return t;
}

}  // namespace collie
