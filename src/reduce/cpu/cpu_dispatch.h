// Which variant of the CPU kernels runs: chosen once, at first use, from the instruction sets
// this CPU runs and COLLIE_CPU_ISA. Tests and benchmarks may also run a given variant.
#pragma once

#include <cstddef>
#include <string>

#include "collie/collie.h"
#include "src/reduce/cpu/cpu_kernels.h"

namespace collie {

// The variants, narrowest first. kSingle is the one variant of a build without dispatch.
enum class CpuIsa : int { kSse, kAvx2, kAvx512, kSingle };
constexpr int kNumCpuIsas = 4;

constexpr unsigned cpuIsaBit(CpuIsa isa) { return 1u << static_cast<int>(isa); }

// The name COLLIE_CPU_ISA takes for isa ("sse", "avx2", "avx512", or the single variant's).
const char* cpuIsaName(CpuIsa isa);
// The variants this build holds, as a set of cpuIsaBit()s.
unsigned builtCpuIsas();
// The variants this CPU runs: it has their instructions and the OS saves their registers.
unsigned supportedCpuIsas();
// The variant's kernels; isa must be built.
const CpuKernels& cpuKernels(CpuIsa isa);

// The variant for a COLLIE_CPU_ISA value: "auto" (or empty) takes the widest variant in both
// sets. A named variant that is not built, that the CPU lacks, or an unknown name is refused:
// *refusal says why, and auto's choice is returned.
CpuIsa chooseCpuIsa(const std::string& request, unsigned built, unsigned supported,
                    std::string* refusal);

// The variant in use: chosen at the first call, logged once at INFO.
const CpuKernels& activeCpuKernels();

// reduce() and scaleForAvg() of host memory, run by the given variant's kernels.
void reduceWith(const CpuKernels& k, void* dst, const void* a, const void* b, size_t count,
                collieDataType_t dtype, collieRedOp_t op);
void scaleWith(const CpuKernels& k, void* buf, size_t count, collieDataType_t dtype, int divisor);

}  // namespace collie
