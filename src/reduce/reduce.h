// Reduction kernels behind one table: the only entry points algorithms use to combine data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collie/collie.h"
#include "src/memory/memory_kind.h"

namespace collie {

// dst[i] = a[i] OP b[i] for i < count. dst may alias a or b exactly (in place); partial overlap
// is not allowed. Pointers need no alignment. collieAvg reduces as collieSum: the caller scales
// once at the end with scaleForAvg. f16/bf16/fp8 are computed in f32 and rounded to nearest
// even (fp8 saturating, see floatToFp8e4m3).
// Integer arithmetic wraps (two's complement), as NCCL's does. Min/max propagate NaN: if either
// input is NaN the result is NaN (like NCCL's device kernels).
void reduce(void* dst, const void* a, const void* b, size_t count, collieDataType_t dtype,
            collieRedOp_t op, MemoryKind kind = MemoryKind::kHost);

// buf[i] = buf[i] / divisor: the one scaling step of collieAvg. Floats multiply by 1/divisor in
// their compute precision (f32 for f16/bf16); integers divide (truncating toward zero).
void scaleForAvg(void* buf, size_t count, collieDataType_t dtype, int divisor,
                 MemoryKind kind = MemoryKind::kHost);

// dst[i] = src[i] * scalar, where scalar points at one element of dtype: the pre-multiplication
// of a PreMulSum op, on host memory. Floats are rounded once to dtype (f16, bf16 and fp8
// computed in f32, where the product is exact); integers wrap. dst may equal src.
void mulByScalar(void* dst, const void* src, size_t count, collieDataType_t dtype,
                 const void* scalar);

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
// The 8-bit floats (collieFloat8e4m3, collieFloat8e5m2): widening is exact; narrowing rounds
// to nearest even and saturates to the largest finite value (448, 57344), infinities included,
// as NCCL's kernels do; NaN comes out as 0x7f (e4m3) or 0x7e (e5m2) with the input's sign.
float fp8e4m3ToFloat(uint8_t b);
uint8_t floatToFp8e4m3(float f);
float fp8e5m2ToFloat(uint8_t b);
uint8_t floatToFp8e5m2(float f);

}  // namespace collie
