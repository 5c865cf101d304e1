// The CPU kernels of a build without run-time dispatch (COLLIE_NATIVE=ON, or a CPU other than
// x86-64): one variant, built with the compiler's flags for the whole library.
#define COLLIE_CPU_VARIANT cpu_single
#if defined(COLLIE_CPU_NATIVE)
#define COLLIE_CPU_VARIANT_NAME "native"
#else
#define COLLIE_CPU_VARIANT_NAME "generic"
#endif
#include "src/reduce/cpu/cpu_variant.h"
