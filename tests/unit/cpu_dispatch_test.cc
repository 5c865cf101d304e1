// The choice of the CPU kernels' variant: never one the CPU lacks or the build does not hold,
// COLLIE_CPU_ISA honoured where it can be and refused where it cannot.
#include "src/reduce/cpu/cpu_dispatch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "src/reduce/reduce.h"

namespace collie {
namespace {

constexpr unsigned kDispatchBuild =
    cpuIsaBit(CpuIsa::kSse) | cpuIsaBit(CpuIsa::kAvx2) | cpuIsaBit(CpuIsa::kAvx512);
constexpr unsigned kSingleBuild = cpuIsaBit(CpuIsa::kSingle);
const char* const kRequests[] = {"",       "auto",    "sse",  "avx2",   "avx512",
                                 "native", "generic", "AVX2", "avx1024"};

bool has(unsigned set, CpuIsa isa) { return (set & cpuIsaBit(isa)) != 0; }

TEST(CpuDispatch, NeverChoosesAVariantTheCpuLacksOrTheBuildLacks) {
  for (unsigned built : {kDispatchBuild, kSingleBuild}) {
    for (unsigned supported = 0; supported < (1u << kNumCpuIsas); ++supported) {
      // The baseline runs everywhere: every x86-64 CPU has SSE2, and a single variant runs
      // where it was built for.
      const unsigned cpu = supported | cpuIsaBit(CpuIsa::kSse) | cpuIsaBit(CpuIsa::kSingle);
      for (const char* request : kRequests) {
        SCOPED_TRACE(testing::Message() << "built " << built << " cpu " << cpu << " " << request);
        std::string refusal;
        const CpuIsa isa = chooseCpuIsa(request, built, cpu, &refusal);
        EXPECT_TRUE(has(built, isa));
        EXPECT_TRUE(has(cpu, isa));
        const bool named = *request != '\0' && std::strcmp(request, "auto") != 0;
        EXPECT_EQ(named && std::strcmp(cpuIsaName(isa), request) != 0, !refusal.empty());
      }
    }
  }
}

TEST(CpuDispatch, AutoTakesTheWidestTheCpuRuns) {
  std::string refusal;
  const unsigned sse = cpuIsaBit(CpuIsa::kSse), avx2 = cpuIsaBit(CpuIsa::kAvx2);
  const unsigned all = kDispatchBuild;
  EXPECT_EQ(chooseCpuIsa("auto", kDispatchBuild, all, &refusal), CpuIsa::kAvx512);
  EXPECT_EQ(chooseCpuIsa("", kDispatchBuild, sse | avx2, &refusal), CpuIsa::kAvx2);
  EXPECT_EQ(chooseCpuIsa("auto", kDispatchBuild, sse, &refusal), CpuIsa::kSse);
  EXPECT_EQ(chooseCpuIsa("sse", kDispatchBuild, all, &refusal), CpuIsa::kSse);
  EXPECT_TRUE(refusal.empty()) << refusal;
  EXPECT_EQ(chooseCpuIsa("avx512", kDispatchBuild, sse | avx2, &refusal), CpuIsa::kAvx2);
  EXPECT_NE(refusal.find("lacks"), std::string::npos) << refusal;
}

TEST(CpuDispatch, TheVariantInUseIsOneThisCpuRuns) {
  const CpuKernels& k = activeCpuKernels();
  EXPECT_STREQ(reduceKernelIsa(), k.isa);
  bool found = false;
  for (int i = 0; i < kNumCpuIsas; ++i) {
    const CpuIsa isa = static_cast<CpuIsa>(i);
    if (std::strcmp(cpuIsaName(isa), k.isa) != 0) continue;
    found = true;
    EXPECT_TRUE(has(builtCpuIsas(), isa)) << k.isa;
    EXPECT_TRUE(has(supportedCpuIsas(), isa)) << k.isa;
  }
  EXPECT_TRUE(found) << k.isa;
}

// The choice is made once per process, so each setting is tried in a fresh one.
void expectChosenInNewProcess(const char* request, const char* want, const char* log) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("COLLIE_CPU_ISA", request, 1);
        setenv("COLLIE_DEBUG", "INFO", 1);
        std::exit(std::strcmp(reduceKernelIsa(), want) == 0 ? 0 : 1);
      },
      testing::ExitedWithCode(0), log)
      << request;
}

TEST(CpuDispatch, EnvironmentChoosesEachVariantTheCpuRuns) {
  const unsigned usable = builtCpuIsas() & supportedCpuIsas();
  for (int i = 0; i < kNumCpuIsas; ++i) {
    if (!(usable & (1u << i))) continue;
    const char* name = cpuIsaName(static_cast<CpuIsa>(i));
    expectChosenInNewProcess(name, name, (std::string("CPU kernels: ") + name).c_str());
  }
}

TEST(CpuDispatch, EnvironmentRefusesAnUnknownName) {
  std::string refusal;
  const CpuIsa best = chooseCpuIsa("auto", builtCpuIsas(), supportedCpuIsas(), &refusal);
  expectChosenInNewProcess("avx1024", cpuIsaName(best), "COLLIE_CPU_ISA=avx1024 refused");
}

}  // namespace
}  // namespace collie
