// The CPU kernels for AVX-512 F, BW, VL and DQ, with AVX2, FMA and F16C.
#define COLLIE_CPU_VARIANT cpu_avx512
#define COLLIE_CPU_VARIANT_NAME "avx512"
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__F16C__) || !defined(__FMA__)
#error "kernels_avx512.cc must be built with -mavx512f -mavx512bw -mavx512vl -mavx512dq"
#endif
#include "src/reduce/cpu/cpu_variant.h"
