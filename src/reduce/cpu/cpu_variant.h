// One variant of the CPU kernels: kernels_<isa>.cc defines COLLIE_CPU_VARIANT (the namespace
// of cpu_kernels.h it fills) and COLLIE_CPU_VARIANT_NAME, includes this file once, and is
// compiled with that instruction set's flags. Every function here has internal linkage or
// sits in the variant's namespace, and the kernels call no inline library function: code
// built for AVX must not leave the file under a name another file also defines, or the linker
// could hand it to a CPU without AVX.
#pragma once

#include <type_traits>

#include "src/base/dtype.h"
#include "src/reduce/cpu/copy_kernel.h"
#include "src/reduce/cpu/cpu_kernels.h"
#include "src/reduce/cpu/vector_kernels.h"

#ifndef COLLIE_CPU_VARIANT_NAME
#error "define COLLIE_CPU_VARIANT_NAME before including cpu_variant.h"
#endif

namespace collie {
namespace COLLIE_CPU_VARIANT {
namespace {

// Arith lanes do sum and prod (unsigned for integers, so they wrap), Order lanes do max and min.
template <typename Arith, typename Order>
constexpr DtypeKernels kernelsFor(ScaleFn scale) {
  static_assert(sizeof(typename Arith::Elem) == sizeof(typename Order::Elem));
  DtypeKernels k{};
  k.reduce[collieSum] = &reduceKernel<Arith, SumOp>;
  k.reduce[collieProd] = &reduceKernel<Arith, ProdOp>;
  k.reduce[collieMax] = &reduceKernel<Order, MaxOp>;
  k.reduce[collieMin] = &reduceKernel<Order, MinOp>;
  k.reduce[collieAvg] = &reduceKernel<Arith, SumOp>;  // the caller scales once at the end
  if constexpr (kHaveStreamingStores && Arith::kWidth * sizeof(typename Arith::Elem) == kVecBytes &&
                Order::kWidth * sizeof(typename Order::Elem) == kVecBytes) {
    k.stream[collieSum] = &reduceStreamingKernel<Arith, SumOp>;
    k.stream[collieProd] = &reduceStreamingKernel<Arith, ProdOp>;
    k.stream[collieMax] = &reduceStreamingKernel<Order, MaxOp>;
    k.stream[collieMin] = &reduceStreamingKernel<Order, MinOp>;
    k.stream[collieAvg] = &reduceStreamingKernel<Arith, SumOp>;
  }
  k.scale = scale;
  k.elemBytes = sizeof(typename Arith::Elem);
  k.filled = true;
  return k;
}

template <typename T>
constexpr DtypeKernels floatKernels() {
  return kernelsFor<NativeLanes<T>, NativeLanes<T>>(&scaleFloat<NativeLanes<T>>);
}

template <typename T>
constexpr DtypeKernels integerKernels() {
  return kernelsFor<NativeLanes<std::make_unsigned_t<T>>, NativeLanes<T>>(&scaleInt<T>);
}

constexpr CpuKernels makeKernels() {
  CpuKernels t{};
  t.isa = COLLIE_CPU_VARIANT_NAME;
  t.dtypes[collieInt8] = integerKernels<int8_t>();
  t.dtypes[collieUint8] = integerKernels<uint8_t>();
  t.dtypes[collieInt32] = integerKernels<int32_t>();
  t.dtypes[collieUint32] = integerKernels<uint32_t>();
  t.dtypes[collieInt64] = integerKernels<int64_t>();
  t.dtypes[collieUint64] = integerKernels<uint64_t>();
  t.dtypes[collieFloat16] = kernelsFor<HalfLanes, HalfLanes>(&scaleFloat<HalfLanes>);
  t.dtypes[collieFloat32] = floatKernels<float>();
  t.dtypes[collieFloat64] = floatKernels<double>();
  t.dtypes[collieBfloat16] = kernelsFor<Bf16Lanes, Bf16Lanes>(&scaleFloat<Bf16Lanes>);
  t.dtypes[collieFloat8e4m3] = kernelsFor<E4m3Lanes, E4m3Lanes>(&scaleFloat<E4m3Lanes>);
  t.dtypes[collieFloat8e5m2] = kernelsFor<E5m2Lanes, E5m2Lanes>(&scaleFloat<E5m2Lanes>);
  t.copyStreaming = &copyStreamingKernel;
  return t;
}

constexpr CpuKernels kBuilt = makeKernels();

// Every dtype of the one dtype list has its kernels, with the element size that list gives.
// (kernelsFor sets every entry and `filled`; function pointers themselves cannot be compared in
// a constant expression when the sanitizers instrument them.)
constexpr bool tableIsComplete() {
#define COLLIE_X(e, n, s) \
  if (!kBuilt.dtypes[e].filled || kBuilt.dtypes[e].elemBytes != (s)) return false;
  COLLIE_DTYPES(COLLIE_X)
#undef COLLIE_X
  return true;
}
static_assert(tableIsComplete(), "a dtype in COLLIE_DTYPES has no CPU kernels or the wrong size");

}  // namespace

const CpuKernels kKernels = kBuilt;

}  // namespace COLLIE_CPU_VARIANT
}  // namespace collie
