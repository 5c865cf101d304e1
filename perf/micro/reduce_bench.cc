// Reduction kernels (src/reduce) for every datatype against memcpy, a streaming copy and a
// "read two, write one" f32 add with streaming stores, all in one binary so that their rates
// compare. Rates are bytes of output per second (GB/s in the table is 1e9 B/s), at 64 KiB
// (L2), 1 MiB (cache) and 64 MiB (memory). Out of place: dst = a + b over three buffers.
// COLLIE_CPU_ISA picks the kernels' variant, as in the library.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "perf/limits/stream_loops.h"
#include "perf/micro/micro_util.h"
#include "src/base/dtype.h"
#include "src/reduce/reduce.h"

namespace collie::micro {
namespace {

// Three buffers of `bytes`, page-aligned and touched: a and b hold small values (1 in every
// byte pattern the type reads as finite), dst zero.
struct Three {
  AlignedBuffer a, b, dst;
  explicit Three(size_t bytes) : a(bytes, 0x01), b(bytes, 0x01), dst(bytes, 0) {}
};

// Times body(t) over three buffers of state.range(0) bytes; the rate counts output bytes.
template <typename Body>
void timeOnThree(benchmark::State& state, Body body) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Three t(bytes);
  for (auto _ : state) {
    body(t, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

void BM_Reduce(benchmark::State& state, collieDataType_t dtype, collieRedOp_t op) {
  const size_t count = static_cast<size_t>(state.range(0)) / dtypeSize(dtype);
  timeOnThree(state, [&](Three& t, size_t) {
    reduce(t.dst.data(), t.a.data(), t.b.data(), count, dtype, op);
  });
}

void BM_Memcpy(benchmark::State& state) {
  timeOnThree(state, [](Three& t, size_t bytes) { memcpy(t.dst.data(), t.a.data(), bytes); });
}

void BM_CopyStreaming(benchmark::State& state) {
  timeOnThree(state,
              [](Three& t, size_t bytes) { copyStreaming(t.dst.data(), t.a.data(), bytes); });
}

// The reference the f32 sum kernel is held to: the simplest loop that reads two inputs and
// writes one output, with non-temporal stores when the output is large (cached ones when it
// fits in cache, where streaming would only evict it).
void addCachedReference(float* __restrict dst, const float* __restrict a, const float* __restrict b,
                        size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void addReference(float* dst, const float* a, const float* b, size_t n, bool streaming) {
  if (!streaming) return addCachedReference(dst, a, b, n);
  limits::addStream(dst, a, b, n);
}

void BM_AddReference(benchmark::State& state, bool streaming) {
  timeOnThree(state, [&](Three& t, size_t bytes) {
    addReference(reinterpret_cast<float*>(t.dst.data()), reinterpret_cast<float*>(t.a.data()),
                 reinterpret_cast<float*>(t.b.data()), bytes / sizeof(float), streaming);
  });
}

constexpr int64_t kL2 = 64 << 10;
constexpr int64_t kCache = 1 << 20;
constexpr int64_t kDram = 64 << 20;

void atEverySize(benchmark::internal::Benchmark* b) { b->Arg(kL2)->Arg(kCache)->Arg(kDram); }

struct Named {
  collieDataType_t dtype;
  const char* name;
};
const Named kTypes[] = {
    {collieInt8, "int8"},         {collieUint8, "uint8"},       {collieInt32, "int32"},
    {collieUint32, "uint32"},     {collieInt64, "int64"},       {collieUint64, "uint64"},
    {collieFloat16, "half"},      {collieFloat32, "float"},     {collieFloat64, "double"},
    {collieBfloat16, "bfloat16"}, {collieFloat8e4m3, "f8e4m3"}, {collieFloat8e5m2, "f8e5m2"}};

// Registered explicitly (not with static initialisers spread over files) so the order of the
// table is the order here: references first, then every dtype's sum, then f32's other ops.
void registerAll() {
  benchmark::AddCustomContext("cpu_kernels", reduceKernelIsa());
  benchmark::RegisterBenchmark("memcpy", BM_Memcpy)->Apply(atEverySize);
  benchmark::RegisterBenchmark("copy_streaming", BM_CopyStreaming)->Apply(atEverySize);
  benchmark::RegisterBenchmark("add_f32_reference/cached", BM_AddReference, false)
      ->Apply(atEverySize);
  benchmark::RegisterBenchmark("add_f32_reference/streaming", BM_AddReference, true)
      ->Apply(atEverySize);
  for (const Named& t : kTypes) {
    std::string name = std::string("reduce/") + t.name + "/sum";
    benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, t.dtype, collieSum)->Apply(atEverySize);
  }
  for (collieRedOp_t op : {collieProd, collieMax, collieMin}) {
    const char* names[] = {"sum", "prod", "max", "min", "avg"};
    std::string name = std::string("reduce/float/") + names[op];
    benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, collieFloat32, op)->Apply(atEverySize);
  }
}

}  // namespace

void registerReduceBenchmarks() { registerAll(); }

}  // namespace collie::micro
