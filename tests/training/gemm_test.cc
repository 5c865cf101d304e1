// The blocked GEMM against the triple loop (every transpose, edge tiles, k blocks, alpha and
// beta), and the property the equivalence of data parallelism leans on: an element of C does
// not depend on how many rows are computed with it.
#include "training_demo/gemm.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "training_demo/rng.h"

namespace collie {
namespace train {
namespace {

template <typename T>
std::vector<T> randomMatrix(size_t n, Rng& rng) {
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(2 * rng.uniform() - 1);
  return v;
}

template <typename T>
void checkShape(Trans ta, Trans tb, int m, int n, int k, T alpha, T beta, double tol) {
  Rng rng(m * 1000003 + n * 1009 + k);
  const int lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
  const std::vector<T> a = randomMatrix<T>(static_cast<size_t>(m) * k, rng);
  const std::vector<T> b = randomMatrix<T>(static_cast<size_t>(k) * n, rng);
  std::vector<T> c = randomMatrix<T>(static_cast<size_t>(m) * n, rng), ref = c;
  gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), n);
  gemmReference(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(), n);
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_NEAR(c[i], ref[i], tol * (1 + std::sqrt(static_cast<double>(k))))
        << "m " << m << " n " << n << " k " << k << " element " << i;
  }
}

TEST(Gemm, MatchesReferenceForEveryTransposeAndShape) {
  const int shapes[][3] = {{1, 1, 1},      {3, 5, 7},     {8, 32, 16},    {9, 33, 17},
                           {64, 256, 784}, {17, 31, 300}, {130, 40, 520}, {5, 1100, 3}};
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      for (const auto& s : shapes) {
        checkShape<float>(ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, 1e-5);
        checkShape<double>(ta, tb, s[0], s[1], s[2], 1.0, 0.0, 1e-12);
      }
    }
  }
}

TEST(Gemm, AlphaAndBeta) {
  checkShape<float>(Trans::kNo, Trans::kYes, 37, 45, 300, 0.5f, 2.0f, 1e-5);
  checkShape<double>(Trans::kYes, Trans::kNo, 37, 45, 300, -1.5, 0.25, 1e-12);
}

TEST(Gemm, BetaZeroDoesNotReadC) {
  const int m = 9, n = 20, k = 4;
  std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  for (float x : c) EXPECT_EQ(x, 4.0f);
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  std::vector<float> c(6, 3.0f);
  gemm<float>(Trans::kNo, Trans::kNo, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.0f, c.data(), 3);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

// A row of C computed alone equals the same row computed among many, bit for bit.
TEST(Gemm, RowsDoNotDependOnTheirNeighbours) {
  Rng rng(3);
  const int m = 100, n = 70, k = 600;
  const std::vector<float> a = randomMatrix<float>(m * k, rng), b = randomMatrix<float>(n * k, rng);
  std::vector<float> all(m * n), one(n);
  gemm(Trans::kNo, Trans::kYes, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, all.data(), n);
  for (int i : {0, 7, 8, 63, 99}) {
    gemm(Trans::kNo, Trans::kYes, 1, n, k, 1.0f, a.data() + i * k, k, b.data(), k, 0.0f, one.data(),
         n);
    for (int j = 0; j < n; ++j) ASSERT_EQ(one[j], all[i * n + j]) << "row " << i << " col " << j;
  }
}

}  // namespace
}  // namespace train
}  // namespace collie
