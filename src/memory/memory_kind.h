// Memory kinds: where a buffer lives (host or a CUDA device), and how a pointer is classified.
#pragma once

#include <functional>
#include <string>

namespace collie {

enum class MemoryKind { kHost = 0, kCuda = 1 };

inline const char* memoryKindName(MemoryKind k) { return k == MemoryKind::kCuda ? "cuda" : "host"; }

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the CUDA device ordinal of a kCuda pointer
};

// What a CUDA runtime says about a pointer, reduced to what classification needs.
struct PointerQuery {
  bool ok = false;      // the query succeeded (no driver, no context: false)
  bool device = false;  // device or managed memory (not pinned or pageable host memory)
  int ordinal = -1;
};
using PointerQueryFn = std::function<PointerQuery(const void*)>;

// Where p lives. Host when this build has no CUDA, when the process never loaded the CUDA
// driver (so no device pointer can exist, and a host-only program never creates a context),
// or when the query fails. Pinned host memory is host.
PointerInfo classifyPointer(const void* p);
// False where no pointer of this process can be device memory: a build without CUDA, or a
// process that has not loaded the CUDA driver.
bool deviceMemoryPossible();
// The same decision with the query given (tests, and builds without CUDA).
PointerInfo classifyPointerWith(const void* p, const PointerQueryFn& query);

// Whether this build has CUDA support compiled in.
bool cudaBuilt();
// How many CUDA devices this process sees; 0 with *why set when none (no driver, no GPU, or
// a build without CUDA).
int cudaDeviceCount(std::string* why);

}  // namespace collie
