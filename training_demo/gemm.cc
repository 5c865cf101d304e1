// Blocked GEMM in the GotoBLAS layout: B is packed into k x NR column panels, A into MR x k row
// panels, and a micro-kernel keeps an MR x NR tile of C in vector registers for the whole k
// block. The tile's shape follows the widest vectors the CPU has (AVX-512, AVX2, SSE; with FMA),
// chosen once at run time; only the micro-kernel is compiled for those instructions.
#include "training_demo/gemm.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace collie {
namespace train {
namespace {

// A tile shape: the vector width, and the rows of C the micro-kernel keeps in registers.
template <int kBytes, int kRows>
struct Shape {
  static constexpr int kVecBytes = kBytes;
  static constexpr int kRowsPerTile = kRows;
};
using SseShape = Shape<16, 4>;
using Avx2Shape = Shape<32, 6>;
using Avx512Shape = Shape<64, 8>;

// Block sizes: a k block of B panels (kKc x kNc) stays in L2, an A block (kMc x kKc) in L1/L2.
constexpr int kKc = 256;
constexpr int kNc = 1024;

template <typename T, typename S>
struct Tile {
  typedef T V __attribute__((vector_size(S::kVecBytes)));
  static constexpr int kLanes = S::kVecBytes / sizeof(T);
  static constexpr int kMr = S::kRowsPerTile;
  static constexpr int kNr = 2 * kLanes;  // two vectors per row of the tile
  static constexpr int kMc = kMr * 16;
};

// A strided view: element (i, j) of op(X) is p[i * rs + j * cs].
template <typename T>
struct Strided {
  const T* p;
  ptrdiff_t rs, cs;
  T at(int i, int j) const { return p[i * rs + j * cs]; }
};

template <typename T>
Strided<T> view(Trans t, const T* p, int ld) {
  return t == Trans::kNo ? Strided<T>{p, ld, 1} : Strided<T>{p, 1, ld};
}

// Packs x[i0:i0+mc, p0:p0+kc] as panels of kW rows, p-major inside a panel, zero-padded.
// Each source row (or column) is read front to back, so the prefetcher can follow it.
template <int kW, typename T>
void packPanels(const Strided<T>& x, int i0, int mc, int p0, int kc, T* out) {
  for (int ir = 0; ir < mc; ir += kW, out += kW * kc) {
    const int w = std::min(kW, mc - ir);
    if (w < kW) std::fill(out, out + kW * kc, T(0));
    if (x.rs == 1) {  // x's columns are contiguous: one copy per p
      for (int p = 0; p < kc; ++p) {
        std::memcpy(out + p * kW, x.p + (p0 + p) * x.cs + (i0 + ir), w * sizeof(T));
      }
    } else {  // e.g. a transposed weight matrix: walk each row front to back
      for (int i = 0; i < w; ++i) {
        const T* row = x.p + (i0 + ir + i) * x.rs + p0 * x.cs;
        for (int p = 0; p < kc; ++p) out[p * kW + i] = row[p * x.cs];
      }
    }
  }
}

// op(A)[i0:i0+mc, p0:p0+kc] as MR-row panels.
template <typename T, typename S>
void packA(const Strided<T>& a, int i0, int mc, int p0, int kc, T* out) {
  packPanels<Tile<T, S>::kMr>(a, i0, mc, p0, kc, out);
}

// op(B)[p0:p0+kc, j0:j0+nc] as NR-column panels: the row panels of op(B) transposed.
template <typename T, typename S>
void packB(const Strided<T>& b, int p0, int kc, int j0, int nc, T* out) {
  packPanels<Tile<T, S>::kNr>(Strided<T>{b.p, b.cs, b.rs}, j0, nc, p0, kc, out);
}

// C[0:mr, 0:nr] = alpha * (Ap * Bp) + beta * C for one packed panel pair. Always inlined into
// a wrapper compiled for the shape's instructions (microKernel).
template <typename T, typename S>
[[gnu::always_inline]] inline void microKernelBody(int kc, const T* __restrict ap,
                                                   const T* __restrict bp, T* __restrict c, int ldc,
                                                   int mr, int nr, T alpha, T beta) {
  using V = typename Tile<T, S>::V;
  constexpr int kMr = Tile<T, S>::kMr, kNr = Tile<T, S>::kNr, kLanes = Tile<T, S>::kLanes;
  V acc[kMr][2] = {};
  for (int p = 0; p < kc; ++p) {
    V b0, b1;
    std::memcpy(&b0, bp, sizeof(V));
    std::memcpy(&b1, bp + kLanes, sizeof(V));
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      acc[i][0] += ap[i] * b0;
      acc[i][1] += ap[i] * b1;
    }
    ap += kMr;
    bp += kNr;
  }
  T tile[kMr][kNr];
  std::memcpy(tile, acc, sizeof(tile));
  for (int i = 0; i < mr; ++i) {
    T* row = c + static_cast<ptrdiff_t>(i) * ldc;
    if (beta == T(0)) {
      for (int j = 0; j < nr; ++j) row[j] = alpha * tile[i][j];
    } else {
      for (int j = 0; j < nr; ++j) row[j] = alpha * tile[i][j] + beta * row[j];
    }
  }
}

template <typename T, typename S>
struct MicroKernel;
template <typename T>
struct MicroKernel<T, SseShape> {
  static void run(int kc, const T* ap, const T* bp, T* c, int ldc, int mr, int nr, T alpha,
                  T beta) {
    microKernelBody<T, SseShape>(kc, ap, bp, c, ldc, mr, nr, alpha, beta);
  }
};
template <typename T>
struct MicroKernel<T, Avx2Shape> {
  __attribute__((target("avx2,fma"))) static void run(int kc, const T* ap, const T* bp, T* c,
                                                      int ldc, int mr, int nr, T alpha, T beta) {
    microKernelBody<T, Avx2Shape>(kc, ap, bp, c, ldc, mr, nr, alpha, beta);
  }
};
template <typename T>
struct MicroKernel<T, Avx512Shape> {
  __attribute__((target("avx512f,fma"))) static void run(int kc, const T* ap, const T* bp, T* c,
                                                         int ldc, int mr, int nr, T alpha, T beta) {
    microKernelBody<T, Avx512Shape>(kc, ap, bp, c, ldc, mr, nr, alpha, beta);
  }
};

// Packing buffers live for the thread: allocating them per call would cost more than small
// products take. Whole cache lines keep the panels' vectors aligned.
struct alignas(64) Line {
  char bytes[64];
};
template <typename T>
T* scratch(std::vector<Line>& buf, size_t elems) {
  const size_t lines = (elems * sizeof(T) + sizeof(Line) - 1) / sizeof(Line);
  if (buf.size() < lines) buf.resize(lines);
  return reinterpret_cast<T*>(buf.data());
}

// gemm with the tile shape S, for k > 0.
template <typename T, typename S>
void gemmShaped(const Strided<T>& va, const Strided<T>& vb, int m, int n, int k, T alpha, T beta,
                T* c, int ldc) {
  constexpr int kMr = Tile<T, S>::kMr, kNr = Tile<T, S>::kNr, kMc = Tile<T, S>::kMc;
  thread_local std::vector<Line> bufA, bufB;
  T* packedA = scratch<T>(bufA, static_cast<size_t>(kMc) * kKc);
  T* packedB = scratch<T>(bufB, static_cast<size_t>(kKc) * (kNc + kNr));
  for (int jc = 0; jc < n; jc += kNc) {
    const int nc = std::min(kNc, n - jc);
    for (int pc = 0; pc < k; pc += kKc) {
      const int kc = std::min(kKc, k - pc);
      const T betaBlock = pc == 0 ? beta : T(1);  // later k blocks accumulate
      packB<T, S>(vb, pc, kc, jc, nc, packedB);
      for (int ic = 0; ic < m; ic += kMc) {
        const int mc = std::min(kMc, m - ic);
        packA<T, S>(va, ic, mc, pc, kc, packedA);
        for (int jr = 0; jr < nc; jr += kNr) {
          const T* bp = packedB + static_cast<ptrdiff_t>(jr / kNr) * kc * kNr;
          for (int ir = 0; ir < mc; ir += kMr) {
            const T* ap = packedA + static_cast<ptrdiff_t>(ir / kMr) * kc * kMr;
            T* cp = c + static_cast<ptrdiff_t>(ic + ir) * ldc + (jc + jr);
            MicroKernel<T, S>::run(kc, ap, bp, cp, ldc, std::min(kMr, mc - ir),
                                   std::min(kNr, nc - jr), alpha, betaBlock);
          }
        }
      }
    }
  }
}

enum class GemmIsa { kSse, kAvx2, kAvx512 };

GemmIsa widestGemmIsa() {
#if defined(__x86_64__)
  // FMA as the native build has it: a * b + c contracts to one rounding there too.
  if (!__builtin_cpu_supports("fma")) return GemmIsa::kSse;
  if (__builtin_cpu_supports("avx512f")) return GemmIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return GemmIsa::kAvx2;
#endif
  return GemmIsa::kSse;
}

}  // namespace

template <typename T>
void gemm(Trans transA, Trans transB, int m, int n, int k, T alpha, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // C = beta * C
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const Strided<T> va = view(transA, a, lda), vb = view(transB, b, ldb);
  static const GemmIsa isa = widestGemmIsa();
  switch (isa) {
    case GemmIsa::kAvx512:
      return gemmShaped<T, Avx512Shape>(va, vb, m, n, k, alpha, beta, c, ldc);
    case GemmIsa::kAvx2:
      return gemmShaped<T, Avx2Shape>(va, vb, m, n, k, alpha, beta, c, ldc);
    case GemmIsa::kSse:
      return gemmShaped<T, SseShape>(va, vb, m, n, k, alpha, beta, c, ldc);
  }
}

template <typename T>
void gemmReference(Trans transA, Trans transB, int m, int n, int k, T alpha, const T* a, int lda,
                   const T* b, int ldb, T beta, T* c, int ldc) {
  const Strided<T> va = view(transA, a, lda), vb = view(transB, b, ldb);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += static_cast<double>(va.at(i, p)) * vb.at(p, j);
      T& out = c[i * ldc + j];
      out = static_cast<T>(alpha * sum + (beta == T(0) ? 0.0 : static_cast<double>(beta) * out));
    }
  }
}

template void gemm<float>(Trans, Trans, int, int, int, float, const float*, int, const float*, int,
                          float, float*, int);
template void gemm<double>(Trans, Trans, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int);
template void gemmReference<float>(Trans, Trans, int, int, int, float, const float*, int,
                                   const float*, int, float, float*, int);
template void gemmReference<double>(Trans, Trans, int, int, int, double, const double*, int,
                                    const double*, int, double, double*, int);

}  // namespace train
}  // namespace collie
