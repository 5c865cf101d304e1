// The CPU kernels for x86-64's baseline (SSE2), which every x86-64 CPU runs.
#define COLLIE_CPU_VARIANT cpu_sse
#define COLLIE_CPU_VARIANT_NAME "sse"
#if defined(__AVX__)
#error "kernels_sse.cc must be built without AVX: it is the variant for CPUs that lack it"
#endif
#include "src/reduce/cpu/cpu_variant.h"
