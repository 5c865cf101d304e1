// The streaming-store loops the memory limits and the kernel benchmarks time as references:
// f32 c = a + b and a copy, in the widest vectors this CPU has (chosen at run time), so the
// reference does not depend on the flags the program was built with.
#pragma once

#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace collie::limits {

#if defined(__x86_64__)
// Each does the elements (bytes for copies) whole vectors cover and returns how many; the
// caller does the rest and the fence.
__attribute__((target("avx512f"))) inline size_t addStreamAvx512(float* dst, const float* a,
                                                                 const float* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_stream_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  return i;
}
__attribute__((target("avx"))) inline size_t addStreamAvx(float* dst, const float* a,
                                                          const float* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_stream_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  return i;
}
__attribute__((target("avx512f"))) inline size_t copyStreamAvx512(char* d, const char* s,
                                                                  size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  return i;
}
__attribute__((target("avx"))) inline size_t copyStreamAvx(char* d, const char* s, size_t bytes) {
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  return i;
}
#endif

// dst = a + b with non-temporal stores; n floats, dst 64-byte aligned for the widest stores.
inline void addStream(float* dst, const float* a, const float* b, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    i = addStreamAvx512(dst, a, b, n);
  else if (__builtin_cpu_supports("avx"))
    i = addStreamAvx(dst, a, b, n);
  _mm_sfence();
#endif
  for (; i < n; ++i) dst[i] = a[i] + b[i];
}

// memcpy with non-temporal stores; dst 64-byte aligned for the widest stores.
inline void copyStream(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    i = copyStreamAvx512(d, s, bytes);
  else if (__builtin_cpu_supports("avx"))
    i = copyStreamAvx(d, s, bytes);
  _mm_sfence();
#endif
  std::memcpy(d + i, s + i, bytes - i);
}

}  // namespace collie::limits
