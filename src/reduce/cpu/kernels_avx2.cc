// The CPU kernels for AVX2 with FMA and F16C (built with -mavx2 -mfma -mf16c).
#define COLLIE_CPU_VARIANT cpu_avx2
#define COLLIE_CPU_VARIANT_NAME "avx2"
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__) || defined(__AVX512F__)
#error "kernels_avx2.cc must be built with -mavx2 -mfma -mf16c and without AVX-512"
#endif
#include "src/reduce/cpu/cpu_variant.h"
