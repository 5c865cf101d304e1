// reduce() and scaleForAvg() for host memory: the arguments are checked here, then the
// kernels of the variant in use (cpu_dispatch.h) run, one table lookup per call.
//
// Large outputs of a separate buffer are written with non-temporal stores: an ordinary store
// first reads the destination line from memory (read for ownership), so a DRAM-bound
// out-of-place reduction would move four streams of data where it needs three. Outputs that
// fit in cache, and in-place ones (whose lines the load already brought in), keep plain stores.
#include <cstdio>
#include <cstdlib>

#include "src/base/dtype.h"
#include "src/reduce/cpu/cpu_dispatch.h"
#include "src/reduce/reduce.h"

namespace collie {
namespace {

// Outputs from this size on are streamed (see the top of the file): well past L2, where the
// output would be evicted before it is read again anyway.
constexpr size_t kStreamingBytes = size_t{8} << 20;

[[noreturn]] void fatal(const char* what) {
  std::fprintf(stderr, "collie: fatal: %s\n", what);
  std::abort();
}

void checkHostMemory(const char* fn, MemoryKind kind) {
  if (kind != MemoryKind::kHost) {
    // Device buffers go to the CUDA kernels: one reaching here is a routing bug, and touching
    // it from the CPU would crash or corrupt far from the cause.
    std::fprintf(stderr, "collie: fatal: %s: MemoryKind::kCuda buffer given to the CPU kernels\n",
                 fn);
    std::abort();
  }
}

}  // namespace

void reduceWith(const CpuKernels& k, void* dst, const void* a, const void* b, size_t count,
                collieDataType_t dtype, collieRedOp_t op) {
  if (!validDtype(dtype)) fatal("CPU reduction kernel called with an invalid dtype");
  if (!validRedOp(op)) fatal("reduce: invalid reduction op");
  if (count == 0) return;
  const DtypeKernels& d = k.dtypes[dtype];
  // Separate from both inputs (disjoint, since partial overlap is not allowed) and larger than
  // a core's caches: stream it out.
  if (d.stream[op] != nullptr && dst != a && dst != b && count * d.elemBytes >= kStreamingBytes)
    return d.stream[op](dst, a, b, count);
  d.reduce[op](dst, a, b, count);
}

void scaleWith(const CpuKernels& k, void* buf, size_t count, collieDataType_t dtype, int divisor) {
  if (!validDtype(dtype)) fatal("CPU reduction kernel called with an invalid dtype");
  if (divisor <= 0) fatal("scaleForAvg: divisor must be positive (it is the number of ranks)");
  if (count == 0) return;
  k.dtypes[dtype].scale(buf, count, divisor);
}

void reduce(void* dst, const void* a, const void* b, size_t count, collieDataType_t dtype,
            collieRedOp_t op, MemoryKind kind) {
  checkHostMemory("reduce", kind);
  reduceWith(activeCpuKernels(), dst, a, b, count, dtype, op);
}

void scaleForAvg(void* buf, size_t count, collieDataType_t dtype, int divisor, MemoryKind kind) {
  checkHostMemory("scaleForAvg", kind);
  scaleWith(activeCpuKernels(), buf, count, dtype, divisor);
}

}  // namespace collie
