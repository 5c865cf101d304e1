// The table of CPU kernels one build of cpu_variant.h fills: one table per instruction set
// (kernels_<isa>.cc), chosen once at run time (cpu_dispatch.h).
#pragma once

#include <cstddef>

#include "collie/collie.h"

namespace collie {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
using ScaleFn = void (*)(void* buf, size_t count, int divisor);
using CopyFn = void (*)(void* dst, const void* src, size_t n);

// One dtype's kernels, indexed by op. stream[op] is null where the lanes do not stream.
struct DtypeKernels {
  ReduceFn reduce[collieNumOps];
  ReduceFn stream[collieNumOps];
  ScaleFn scale;
  size_t elemBytes;
  bool filled;
};

// Every kernel of one variant, with the name COLLIE_CPU_ISA and the logs call it by.
struct CpuKernels {
  const char* isa;
  DtypeKernels dtypes[collieNumTypes];
  CopyFn copyStreaming;
};

// The variants. Builds with dispatch hold the first three; a native build (or one for a CPU
// other than x86-64) holds only the one built with the compiler's own flags.
namespace cpu_sse {
extern const CpuKernels kKernels;
}
namespace cpu_avx2 {
extern const CpuKernels kKernels;
}
namespace cpu_avx512 {
extern const CpuKernels kKernels;
}
namespace cpu_single {
extern const CpuKernels kKernels;
}

}  // namespace collie
