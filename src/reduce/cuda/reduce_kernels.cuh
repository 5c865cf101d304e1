// The CUDA reduction kernel template, included by one .cu per dtype family so that each
// translation unit instantiates only a few kernels (compile time grows with instantiations x
// architectures).
//
// One kernel per (dtype, op): grid-stride over 16-byte packs when every pointer is 16-byte
// aligned (one ld.global.v4 per input and st.global.v4 per output), element by element
// otherwise and for the tail. An optional second output makes the "reduce then copy to peer"
// form without a second pass over the data.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "collie/collie.h"

namespace collie {
namespace cuda {

constexpr int kThreads = 512;
constexpr int kPackBytes = 16;

// Stored type T computed as Acc.
template <typename T, typename Acc>
struct Convert {
  __device__ static Acc in(T v) { return static_cast<Acc>(v); }
  __device__ static T out(Acc v) { return static_cast<T>(v); }
};

struct SumF {
  template <typename A>
  __device__ static A apply(A x, A y) {
    return static_cast<A>(x + y);
  }
};
struct ProdF {
  template <typename A>
  __device__ static A apply(A x, A y) {
    return static_cast<A>(x * y);
  }
};
// x != x is the NaN test; it folds away for integers.
struct MaxF {
  template <typename A>
  __device__ static A apply(A x, A y) {
    return (x > y || x != x) ? x : y;
  }
};
struct MinF {
  template <typename A>
  __device__ static A apply(A x, A y) {
    return (x < y || x != x) ? x : y;
  }
};

template <typename T>
struct alignas(kPackBytes) Pack {
  static constexpr int kN = kPackBytes / sizeof(T);
  T v[kN];
};

template <typename T, typename Acc, typename Op>
__device__ __forceinline__ T combine(T x, T y) {
  return Convert<T, Acc>::out(Op::apply(Convert<T, Acc>::in(x), Convert<T, Acc>::in(y)));
}

template <typename T, typename Acc, typename Op>
__global__ void reduceKernel(T* dst, T* peer, const T* a, const T* b, size_t count, bool packed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (packed) {
    using P = Pack<T>;
    const size_t npacks = count / P::kN;
    const P* pa = reinterpret_cast<const P*>(a);
    const P* pb = reinterpret_cast<const P*>(b);
    P* pd = reinterpret_cast<P*>(dst);
    P* pp = reinterpret_cast<P*>(peer);
    for (size_t i = tid; i < npacks; i += stride) {
      P x = pa[i], y = pb[i], r;
#pragma unroll
      for (int k = 0; k < P::kN; ++k) r.v[k] = combine<T, Acc, Op>(x.v[k], y.v[k]);
      pd[i] = r;
      if (pp != nullptr) pp[i] = r;
    }
    done = npacks * P::kN;
  }
  for (size_t i = done + tid; i < count; i += stride) {
    T r = combine<T, Acc, Op>(a[i], b[i]);
    dst[i] = r;
    if (peer != nullptr) peer[i] = r;
  }
}

template <typename T, typename Acc>
__global__ void scaleKernel(T* buf, size_t count, Acc inv, int divisor, bool isFloat) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    Acc v = Convert<T, Acc>::in(buf[i]);
    buf[i] =
        Convert<T, Acc>::out(isFloat ? static_cast<Acc>(v * inv) : static_cast<Acc>(v / divisor));
  }
}

// Blocks for n work items: enough to fill the device, few enough that each thread loops.
int gridFor(size_t n);

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, typename Acc, typename Op>
cudaError_t launchReduce(void* dst, void* peer, const void* a, const void* b, size_t count,
                         cudaStream_t stream) {
  const bool packed =
      aligned16(dst) && aligned16(a) && aligned16(b) && (peer == nullptr || aligned16(peer));
  const size_t work = packed ? count / Pack<T>::kN + Pack<T>::kN : count;
  reduceKernel<T, Acc, Op><<<gridFor(work), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<T*>(peer), static_cast<const T*>(a),
      static_cast<const T*>(b), count, packed);
  return cudaGetLastError();
}

// Sum and prod in Arith, max and min in Order (integers: wrap in the unsigned type, compare in
// the signed one; f16/bf16: f32 for both).
template <typename T, typename Arith, typename Order>
cudaError_t launchForOp(collieRedOp_t op, void* dst, void* peer, const void* a, const void* b,
                        size_t count, cudaStream_t stream) {
  switch (op) {
    case collieSum:
    case collieAvg:
      return launchReduce<T, Arith, SumF>(dst, peer, a, b, count, stream);
    case collieProd:
      return launchReduce<T, Arith, ProdF>(dst, peer, a, b, count, stream);
    case collieMax:
      return launchReduce<T, Order, MaxF>(dst, peer, a, b, count, stream);
    case collieMin:
      return launchReduce<T, Order, MinF>(dst, peer, a, b, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T, typename Acc>
cudaError_t launchScale(void* buf, size_t count, int divisor, bool isFloat, cudaStream_t stream) {
  const Acc inv = isFloat ? static_cast<Acc>(Acc(1) / static_cast<Acc>(divisor)) : Acc(0);
  scaleKernel<T, Acc>
      <<<gridFor(count), kThreads, 0, stream>>>(static_cast<T*>(buf), count, inv, divisor, isFloat);
  return cudaGetLastError();
}

// One family's entry points (defined in reduce_{int,float,half,fp8}.cu).
cudaError_t reduceIntFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                            const void* a, const void* b, size_t count, cudaStream_t stream);
cudaError_t reduceFloatFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                              const void* a, const void* b, size_t count, cudaStream_t stream);
cudaError_t reduceHalfFamily(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                             const void* a, const void* b, size_t count, cudaStream_t stream);
cudaError_t reduceFp8Family(collieDataType_t dtype, collieRedOp_t op, void* dst, void* peer,
                            const void* a, const void* b, size_t count, cudaStream_t stream);
cudaError_t scaleIntFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                           cudaStream_t stream);
cudaError_t scaleFloatFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                             cudaStream_t stream);
cudaError_t scaleHalfFamily(collieDataType_t dtype, void* buf, size_t count, int divisor,
                            cudaStream_t stream);
cudaError_t scaleFp8Family(collieDataType_t dtype, void* buf, size_t count, int divisor,
                           cudaStream_t stream);

}  // namespace cuda
}  // namespace collie
