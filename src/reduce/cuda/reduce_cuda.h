// CUDA reduction kernels: the device-memory twin of src/reduce/reduce.h, every dtype x op.
// Same semantics as the CPU kernels (integers wrap, min/max propagate NaN, f16/bf16 computed
// in f32, avg = sum then one scale). Streams are cudaStream_t passed as void* so that no
// caller needs CUDA headers; nullptr is the legacy default stream. Calls only enqueue work.
#pragma once

#include <cstddef>

#include "collie/collie.h"
#include "src/base/status.h"

namespace collie {

// dst[i] = a[i] OP b[i]; dst may alias a or b exactly. With peer non-null the result is also
// written to peer (another buffer, e.g. a peer's staging buffer mapped here): one pass reads
// the inputs once and writes both outputs.
Status reduceDevice(void* dst, void* peer, const void* a, const void* b, size_t count,
                    collieDataType_t dtype, collieRedOp_t op, void* stream);

// buf[i] /= divisor, as scaleForAvg.
Status scaleDevice(void* buf, size_t count, collieDataType_t dtype, int divisor, void* stream);

}  // namespace collie
