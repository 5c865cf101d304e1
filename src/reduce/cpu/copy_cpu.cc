// copyStreaming(): the streaming copy of the CPU kernels' variant in use (cpu_dispatch.h).
#include "src/reduce/cpu/cpu_dispatch.h"
#include "src/reduce/reduce.h"

namespace collie {

void copyStreaming(void* dst, const void* src, size_t n) {
  activeCpuKernels().copyStreaming(dst, src, n);
}

}  // namespace collie
