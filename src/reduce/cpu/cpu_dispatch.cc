// The choice of the CPU kernels' variant (see cpu_dispatch.h). Built without any ISA flag, so
// that it runs on every CPU the library is meant for before it knows which one it is on.
#include "src/reduce/cpu/cpu_dispatch.h"

#include <cstdio>
#include <cstdlib>

#include "src/base/log.h"
#include "src/base/params.h"
#include "src/reduce/reduce.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#if defined(COLLIE_CPU_NATIVE)
#define COLLIE_CPU_SINGLE_NAME "native"
#else
#define COLLIE_CPU_SINGLE_NAME "generic"
#endif

namespace collie {
namespace {

#if defined(__x86_64__)
// F16C from CPUID leaf 1 itself: clang before 15 does not know "f16c" in __builtin_cpu_supports.
bool cpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

constexpr const char* kIsaNames[kNumCpuIsas] = {"sse", "avx2", "avx512", COLLIE_CPU_SINGLE_NAME};

#if defined(COLLIE_CPU_DISPATCH)
constexpr unsigned kBuiltIsas =
    cpuIsaBit(CpuIsa::kSse) | cpuIsaBit(CpuIsa::kAvx2) | cpuIsaBit(CpuIsa::kAvx512);
#else
constexpr unsigned kBuiltIsas = cpuIsaBit(CpuIsa::kSingle);
#endif

// The widest variant in `usable`; the narrowest built one if it is empty.
CpuIsa widest(unsigned usable, unsigned built) {
  for (int i = kNumCpuIsas - 1; i >= 0; --i)
    if (usable & (1u << i)) return static_cast<CpuIsa>(i);
  for (int i = 0; i < kNumCpuIsas; ++i)
    if (built & (1u << i)) return static_cast<CpuIsa>(i);
  return CpuIsa::kSse;
}

const CpuKernels& chooseOnce() {
  const std::string request = params().getString("COLLIE_CPU_ISA");
  std::string refusal;
  const CpuIsa isa = chooseCpuIsa(request, builtCpuIsas(), supportedCpuIsas(), &refusal);
  const CpuKernels& k = cpuKernels(isa);
  if (!refusal.empty())
    COLLIE_WARN(kLogInit, "COLLIE_CPU_ISA=%s refused: %s; using %s", request.c_str(),
                refusal.c_str(), k.isa);
  COLLIE_INFO(kLogInit, "CPU kernels: %s", k.isa);
  return k;
}

}  // namespace

const char* cpuIsaName(CpuIsa isa) { return kIsaNames[static_cast<int>(isa)]; }

unsigned builtCpuIsas() { return kBuiltIsas; }

unsigned supportedCpuIsas() {
  // A build without dispatch runs where it was built for, or not at all.
  unsigned s = cpuIsaBit(CpuIsa::kSingle);
#if defined(__x86_64__)
  __builtin_cpu_init();
  s |= cpuIsaBit(CpuIsa::kSse);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
  if (avx2) s |= cpuIsaBit(CpuIsa::kAvx2);
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    s |= cpuIsaBit(CpuIsa::kAvx512);
#endif
  return s;
}

const CpuKernels& cpuKernels(CpuIsa isa) {
  switch (isa) {
#if defined(COLLIE_CPU_DISPATCH)
    case CpuIsa::kSse:
      return cpu_sse::kKernels;
    case CpuIsa::kAvx2:
      return cpu_avx2::kKernels;
    case CpuIsa::kAvx512:
      return cpu_avx512::kKernels;
#else
    case CpuIsa::kSingle:
      return cpu_single::kKernels;
#endif
    default:
      break;
  }
  std::fprintf(stderr, "collie: fatal: no %s variant of the CPU kernels in this build\n",
               cpuIsaName(isa));
  std::abort();
}

CpuIsa chooseCpuIsa(const std::string& request, unsigned built, unsigned supported,
                    std::string* refusal) {
  const CpuIsa best = widest(built & supported, built);
  if (request.empty() || request == "auto") return best;
  for (int i = 0; i < kNumCpuIsas; ++i) {
    if (request != kIsaNames[i]) continue;
    if (!(built & (1u << i)))
      *refusal = "this build has no such variant";
    else if (!(supported & (1u << i)))
      *refusal = "this CPU lacks its instructions";
    else
      return static_cast<CpuIsa>(i);
    return best;
  }
  *refusal = "not a variant name (auto, sse, avx2, avx512)";
  return best;
}

const CpuKernels& activeCpuKernels() {
  static const CpuKernels& k = chooseOnce();
  return k;
}

const char* reduceKernelIsa() { return activeCpuKernels().isa; }

}  // namespace collie
