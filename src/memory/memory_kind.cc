// Pointer classification. With CUDA built, a pointer is asked about only once the process has
// loaded the CUDA driver: cudaPointerGetAttributes would otherwise initialise CUDA (and create
// a context on a GPU) in programs that only ever pass host memory.
#include "src/memory/memory_kind.h"

#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstring>

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

// Asked on every collective, so it must be cheap: the list of loaded objects is walked in
// memory (dlopen with RTLD_NOLOAD would search the library path with system calls each time),
// only again once the loader has loaded something since the last walk,
// and once the driver is there the answer stays yes.
bool driverLoaded() {
  static std::atomic<bool> loaded{false};
  static std::atomic<unsigned long long> walkedAt{~0ull};  // the loader's load count then
  if (loaded.load(std::memory_order_relaxed)) return true;
  struct Walk {
    unsigned long long seenAdds;
    bool first = true, unchanged = false, found = false;
  } w{walkedAt.load(std::memory_order_relaxed)};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* arg) {
        Walk& w = *static_cast<Walk*>(arg);
        if (w.first) {
          w.first = false;
          if (size >= offsetof(struct dl_phdr_info, dlpi_subs) && info->dlpi_adds == w.seenAdds) {
            w.unchanged = true;
            return 1;
          }
          w.seenAdds = info->dlpi_adds;
        }
        const char* slash = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
        const char* base = slash ? slash + 1 : info->dlpi_name;
        if (base && std::strncmp(base, "libcuda.so", 10) == 0) {
          w.found = true;
          return 1;
        }
        return 0;
      },
      &w);
  if (w.unchanged) return false;
  if (w.found)
    loaded.store(true, std::memory_order_relaxed);
  else
    walkedAt.store(w.seenAdds, std::memory_order_relaxed);
  return w.found;
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

bool deviceMemoryPossible() { return driverLoaded(); }

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

bool deviceMemoryPossible() { return false; }

bool cudaBuilt() { return false; }

int cudaDeviceCount(std::string* why) {
  if (why) *why = "this build has no CUDA support (COLLIE_WITH_CUDA=OFF or no toolkit found)";
  return 0;
}

#endif

}  // namespace collie
