// Streaming copy: non-temporal stores for large copies into memory that will not be read again
// soon (an AllReduce's output). Plain stores first read each destination line from memory
// (read for ownership); streaming stores skip that, which saves a third of the memory traffic
// of a DRAM-bound copy.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "src/reduce/reduce.h"

namespace collie {

#if defined(__AVX512F__) || defined(__AVX2__)
namespace {

#if defined(__AVX512F__)
// A whole line per store: the write-combining buffer fills in one go, which beats two
// 32-byte stores on large copies.
constexpr size_t kVec = 64;
void streamFour(char* d, const char* s) {
  __m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 64);
  __m512i c = _mm512_loadu_si512(s + 128), e = _mm512_loadu_si512(s + 192);
  _mm512_stream_si512(reinterpret_cast<__m512i*>(d), a);
  _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 64), b);
  _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 128), c);
  _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 192), e);
}
#else
constexpr size_t kVec = 32;
void streamFour(char* d, const char* s) {
  __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
  __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
  __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
  _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
}
#endif

}  // namespace
#endif

void copyStreaming(void* dst, const void* src, size_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Align the destination to a vector with an ordinary copy of the head.
  size_t head = (kVec - (reinterpret_cast<uintptr_t>(d) & (kVec - 1))) & (kVec - 1);
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t i = 0;
  for (; i + 4 * kVec <= n; i += 4 * kVec) streamFour(d + i, s + i);
  memcpy(d + i, s + i, n - i);
  _mm_sfence();  // streaming stores are weakly ordered: order them before what follows
#else
  memcpy(dst, src, n);
#endif
}

}  // namespace collie
