// Streaming copy, compiled once per instruction set (see cpu_variant.h): non-temporal stores
// for large copies into memory that will not be read again soon (an AllReduce's output). Plain
// stores first read each destination line from memory (read for ownership); streaming stores
// skip that, which saves a third of the memory traffic of a DRAM-bound copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#ifndef COLLIE_CPU_VARIANT
#error "copy_kernel.h is included by cpu_variant.h only"
#endif

namespace collie {
namespace COLLIE_CPU_VARIANT {
namespace {

#if defined(__AVX512F__)
// A whole line per store: the write-combining buffer fills in one go, which beats two
// 32-byte stores on large copies.
using CopyVec = __m512i;
CopyVec loadCopyVec(const char* s) { return _mm512_loadu_si512(s); }
void streamCopyVec(char* d, CopyVec v) { _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v); }
#elif defined(__AVX__)
using CopyVec = __m256i;
CopyVec loadCopyVec(const char* s) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
}
void streamCopyVec(char* d, CopyVec v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(d), v); }
#elif defined(__x86_64__)
// SSE2 is part of x86-64: every such CPU streams 16 bytes at a time.
using CopyVec = __m128i;
CopyVec loadCopyVec(const char* s) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)); }
void streamCopyVec(char* d, CopyVec v) { _mm_stream_si128(reinterpret_cast<__m128i*>(d), v); }
#endif

#if defined(__x86_64__)
constexpr size_t kCopyVec = sizeof(CopyVec);

// Four vectors: all loaded before the first store, so the loads overlap.
void streamFour(char* d, const char* s) {
  CopyVec v[4];
  for (int k = 0; k < 4; ++k) v[k] = loadCopyVec(s + k * kCopyVec);
  for (int k = 0; k < 4; ++k) streamCopyVec(d + k * kCopyVec, v[k]);
}

void copyStreamingKernel(void* dst, const void* src, size_t n) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Align the destination to a vector with an ordinary copy of the head.
  size_t head = (kCopyVec - (reinterpret_cast<uintptr_t>(d) & (kCopyVec - 1))) & (kCopyVec - 1);
  if (head > n) head = n;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t i = 0;
  for (; i + 4 * kCopyVec <= n; i += 4 * kCopyVec) streamFour(d + i, s + i);
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();  // streaming stores are weakly ordered: order them before what follows
}
#else
void copyStreamingKernel(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
#endif

}  // namespace
}  // namespace COLLIE_CPU_VARIANT
}  // namespace collie
