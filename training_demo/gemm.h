// The matrix product the MLP spends its time in: C = alpha * op(A) * op(B) + beta * C over
// row-major matrices, cache-blocked and vectorised (packed panels and a register-tiled
// micro-kernel). Single-threaded on purpose: one compute thread per rank.
//
// Each element of C sums over k in the same order whatever m and n are, so a sample's forward
// activations are bitwise the same in a batch of 1 or of 1000; only sums over the batch (the
// weight gradients) depend on how the batch is split.
#pragma once

namespace collie {
namespace train {

enum class Trans { kNo, kYes };

// op(A) is m x k, op(B) is k x n, C is m x n; lda/ldb/ldc are the row strides of A, B and C as
// stored. With beta == 0, C is not read (it may hold garbage).
template <typename T>
void gemm(Trans transA, Trans transB, int m, int n, int k, T alpha, const T* a, int lda, const T* b,
          int ldb, T beta, T* c, int ldc);

// The plain triple loop, for tests to compare against.
template <typename T>
void gemmReference(Trans transA, Trans transB, int m, int n, int k, T alpha, const T* a, int lda,
                   const T* b, int ldb, T beta, T* c, int ldc);

}  // namespace train
}  // namespace collie
