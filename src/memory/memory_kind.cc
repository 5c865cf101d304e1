// Pointer classification. With CUDA built, a pointer is asked about only once the process has
// loaded the CUDA driver: cudaPointerGetAttributes would otherwise initialise CUDA (and create
// a context on a GPU) in programs that only ever pass host memory.
#include "src/memory/memory_kind.h"

#include <dlfcn.h>

#ifdef COLLIE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace collie {

PointerInfo classifyPointerWith(const void* p, const PointerQueryFn& query) {
  PointerInfo info;
  if (p == nullptr || !query) return info;
  PointerQuery q = query(p);
  if (q.ok && q.device) {
    info.kind = MemoryKind::kCuda;
    info.device = q.ordinal;
  }
  return info;
}

#ifdef COLLIE_HAVE_CUDA

namespace {

bool driverLoaded() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);  // drops only the reference NOLOAD took
  return true;
}

PointerQuery cudaQuery(const void* p) {
  PointerQuery q;
  if (!driverLoaded()) return q;
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    cudaGetLastError();  // a failed query must not surface as a later call's error
    return q;
  }
  q.ok = true;
  q.device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  q.ordinal = attr.device;
  return q;
}

}  // namespace

PointerInfo classifyPointer(const void* p) { return classifyPointerWith(p, cudaQuery); }

bool cudaBuilt() { return true; }

int cudaDeviceCount(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (error " +
             std::to_string(static_cast<int>(e)) + ")";
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount found no CUDA device";
  return n;
}

#else

PointerInfo classifyPointer(const void* p) { return classifyPointerWith(p, nullptr); }

bool cudaBuilt() { return false; }

int cudaDeviceCount(std::string* why) {
  if (why) *why = "this build has no CUDA support (COLLIE_WITH_CUDA=OFF or no toolkit found)";
  return 0;
}

#endif

}  // namespace collie
