// collie-kernel-bench: memory bandwidth of the CUDA reduction kernels against cudaMemcpy
// device-to-device on the same GPU. Bandwidth counts every byte read and written: a copy moves
// 2N bytes, dst = a + b moves 3N, the reduce-and-copy form 4N.
//
// usage: collie-kernel-bench [bytes per buffer, K/M/G suffix; default 1G] [iterations; 20]
// Prints one "key value" line per measurement and the ratio kernel/memcpy.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "src/reduce/cuda/reduce_cuda.h"

namespace {

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  double unit = 1;
  if (*end == 'K' || *end == 'k') unit = 1024.0;
  if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024;
  if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v * unit);
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "collie-kernel-bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Seconds per call of fn, timed with events after one warm-up call.
template <typename Fn>
double timeIt(int iters, Fn fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  fn();
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? parseBytes(argv[1]) : (size_t(1) << 30);
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  if (bytes < 4096 || iters < 1) {
    fprintf(stderr, "usage: collie-kernel-bench [bytes >= 4K] [iterations >= 1]\n");
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("skipped no CUDA device visible\n");
    return 0;
  }
  void *a, *b, *d, *p;
  if (!ok(cudaMalloc(&a, bytes), "cudaMalloc") || !ok(cudaMalloc(&b, bytes), "cudaMalloc") ||
      !ok(cudaMalloc(&d, bytes), "cudaMalloc") || !ok(cudaMalloc(&p, bytes), "cudaMalloc"))
    return 1;
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  const size_t count = bytes / sizeof(float);
  bool failed = false;
  double tCopy = timeIt(iters, [&] { cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice); });
  double tSum = timeIt(iters, [&] {
    failed |=
        !collie::reduceDevice(d, nullptr, a, b, count, collieFloat32, collieSum, nullptr).isOk();
  });
  double tSumCopy = timeIt(iters, [&] {
    failed |= !collie::reduceDevice(d, p, a, b, count, collieFloat32, collieSum, nullptr).isOk();
  });
  double tHalf = timeIt(iters, [&] {
    failed |= !collie::reduceDevice(d, nullptr, a, b, bytes / 2, collieBfloat16, collieSum, nullptr)
                   .isOk();
  });
  if (failed || !ok(cudaDeviceSynchronize(), "kernels")) return 1;
  const double gb = static_cast<double>(bytes) / 1e9;
  double copyBw = 2 * gb / tCopy, sumBw = 3 * gb / tSum, sumCopyBw = 4 * gb / tSumCopy,
         halfBw = 3 * gb / tHalf;
  printf("bytes_per_buffer %zu\n", bytes);
  printf("memcpy_d2d_GBps %.1f\n", copyBw);
  printf("kernel_f32_sum_GBps %.1f\n", sumBw);
  printf("kernel_f32_sum_copy_GBps %.1f\n", sumCopyBw);
  printf("kernel_bf16_sum_GBps %.1f\n", halfBw);
  printf("ratio_f32_sum_vs_memcpy %.3f\n", sumBw / copyBw);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(p);
  return 0;
}
