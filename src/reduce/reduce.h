// Reduction kernels behind one table: the only entry points algorithms use to combine data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collie/collie.h"
#include "src/memory/memory_kind.h"

namespace collie {

// dst[i] = a[i] OP b[i] for i < count. dst may alias a or b exactly (in place); partial overlap
// is not allowed. Pointers need no alignment. collieAvg reduces as collieSum: the caller scales
// once at the end with scaleForAvg. f16/bf16 are computed in f32 and rounded to nearest even.
// Integer arithmetic wraps (two's complement), as NCCL's does. Min/max propagate NaN: if either
// input is NaN the result is NaN (like NCCL's device kernels).
void reduce(void* dst, const void* a, const void* b, size_t count, collieDataType_t dtype,
            collieRedOp_t op, MemoryKind kind = MemoryKind::kHost);

// buf[i] = buf[i] / divisor: the one scaling step of collieAvg. Floats multiply by 1/divisor in
// their compute precision (f32 for f16/bf16); integers divide (truncating toward zero).
void scaleForAvg(void* buf, size_t count, collieDataType_t dtype, int divisor,
                 MemoryKind kind = MemoryKind::kHost);

// memcpy with non-temporal stores, for large outputs that are not read again soon. The
// buffers must not overlap.
void copyStreaming(void* dst, const void* src, size_t n);

// The instruction set of the CPU kernels in use: "avx512", "avx2" or "sse", chosen once at the
// first call from the CPU and COLLIE_CPU_ISA; "native" in a COLLIE_NATIVE build.
const char* reduceKernelIsa();

// Conversions used by kernels, tests and tools.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);  // round to nearest even, overflow to inf, NaN stays NaN
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);  // round to nearest even, NaN stays NaN

}  // namespace collie
