// The MLP's maths: forward (GEMM, bias, ReLU), softmax cross-entropy, and backward by the chain
// rule layer by layer (dW = dZ^T A, db = column sums of dZ, dA = dZ W, then the ReLU mask).
#include "training_demo/mlp.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "training_demo/gemm.h"

namespace collie {
namespace train {

template <typename T>
Mlp<T>::Mlp(std::vector<int> sizes) : sizes_(std::move(sizes)) {
  weightOffset_.assign(numLayers(), 0);
  size_t offset = 0;
  for (int l = numLayers() - 1; l >= 0; --l) {  // last layer first: see the header
    weightOffset_[l] = offset;
    offset += weightCount(l) + sizes_[l + 1];
  }
  numParams_ = offset;
}

template <typename T>
void Mlp<T>::init(T* params, Rng& rng) const {
  for (int l = 0; l < numLayers(); ++l) {
    const int in = sizes_[l], out = sizes_[l + 1];
    T* w = params + weightOffset(l);
    if (l + 1 < numLayers()) {
      const double stddev = std::sqrt(2.0 / in);  // He: keeps ReLU activations' variance
      for (size_t i = 0; i < weightCount(l); ++i) w[i] = static_cast<T>(stddev * rng.normal());
    } else {
      const double limit = std::sqrt(6.0 / (in + out));  // Xavier for the linear output layer
      for (size_t i = 0; i < weightCount(l); ++i) {
        w[i] = static_cast<T>(limit * (2.0 * rng.uniform() - 1.0));
      }
    }
    std::fill(params + biasOffset(l), params + biasOffset(l) + out, T(0));
  }
}

template <typename T>
void Mlp<T>::forward(const T* params, const T* input, int batch, Workspace<T>& ws) const {
  ws.batch = batch;
  ws.input = input;
  ws.act.resize(numLayers());
  const T* a = input;
  for (int l = 0; l < numLayers(); ++l) {
    const int in = sizes_[l], out = sizes_[l + 1];
    std::vector<T>& z = ws.act[l];
    z.resize(static_cast<size_t>(batch) * out);
    gemm(Trans::kNo, Trans::kYes, batch, out, in, T(1), a, in, params + weightOffset(l), in, T(0),
         z.data(), out);
    const T* bias = params + biasOffset(l);
    const bool relu = l + 1 < numLayers();
    for (int i = 0; i < batch; ++i) {
      T* row = z.data() + static_cast<size_t>(i) * out;
      for (int j = 0; j < out; ++j) {
        const T v = row[j] + bias[j];
        row[j] = relu ? std::max(v, T(0)) : v;
      }
    }
    a = z.data();
  }
}

template <typename T>
double Mlp<T>::lossAndGradient(Workspace<T>& ws, const uint8_t* labels, T gradScale,
                               int* correct) const {
  const int n = classes();
  const T* logit = ws.act.back().data();
  ws.dz.resize(static_cast<size_t>(ws.batch) * n);
  double loss = 0;
  int right = 0;
  for (int i = 0; i < ws.batch; ++i) {
    const T* z = logit + static_cast<size_t>(i) * n;
    T* dz = ws.dz.data() + static_cast<size_t>(i) * n;
    const int top = argmax(z, n);
    right += top == labels[i];
    const T zmax = z[top];  // subtracting the max keeps exp() finite
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    const double logSum = std::log(sum);
    loss += logSum - static_cast<double>(z[labels[i]] - zmax);
    for (int j = 0; j < n; ++j) {
      const double p = std::exp(static_cast<double>(z[j] - zmax) - logSum);
      dz[j] = static_cast<T>((p - (j == labels[i] ? 1.0 : 0.0)) * gradScale);
    }
  }
  if (correct) *correct = right;
  return loss;
}

template <typename T>
void Mlp<T>::backward(const T* params, Workspace<T>& ws, T* grads, size_t blockElems,
                      const std::function<void(size_t)>& ready) const {
  for (int l = numLayers() - 1; l >= 0; --l) {
    backwardLayer(l, params, ws, grads, blockElems, ready);
    std::swap(ws.dz, ws.dzPrev);
  }
}

template <typename T>
void Mlp<T>::backwardLayer(int l, const T* params, Workspace<T>& ws, T* grads, size_t blockElems,
                           const std::function<void(size_t)>& ready) const {
  const int in = sizes_[l], out = sizes_[l + 1], batch = ws.batch;
  const T* a = l == 0 ? ws.input : ws.act[l - 1].data();
  const T* dz = ws.dz.data();
  // Weight gradient first, in row blocks, so its communication can start while the rest of
  // backward runs. Splitting rows does not change any element's sum.
  T* dw = grads + weightOffset(l);
  const int rowsPerBlock = std::max<int>(8, static_cast<int>(blockElems / in) / 8 * 8);
  for (int r = 0; r < out; r += rowsPerBlock) {
    const int rows = std::min(rowsPerBlock, out - r);
    gemm(Trans::kYes, Trans::kNo, rows, in, batch, T(1), dz + r, out, a, in, T(0),
         dw + static_cast<size_t>(r) * in, in);
    if (ready) ready(weightOffset(l) + static_cast<size_t>(r + rows) * in);
  }
  T* db = grads + biasOffset(l);
  std::fill(db, db + out, T(0));
  for (int i = 0; i < batch; ++i) {
    const T* row = dz + static_cast<size_t>(i) * out;
    for (int j = 0; j < out; ++j) db[j] += row[j];
  }
  if (ready) ready(biasOffset(l) + out);
  if (l == 0) return;  // the input needs no gradient
  // dA = dZ W, then through the ReLU: its output was positive exactly where it passed.
  ws.dzPrev.resize(static_cast<size_t>(batch) * in);
  gemm(Trans::kNo, Trans::kNo, batch, in, out, T(1), dz, out, params + weightOffset(l), in, T(0),
       ws.dzPrev.data(), in);
  for (size_t i = 0; i < ws.dzPrev.size(); ++i) {
    if (!(a[i] > T(0))) ws.dzPrev[i] = T(0);
  }
}

template <typename T>
int argmax(const T* v, int n) {
  int best = 0;
  for (int j = 1; j < n; ++j) {
    if (v[j] > v[best]) best = j;
  }
  return best;
}

template class Mlp<float>;
template class Mlp<double>;
template int argmax<float>(const float*, int);
template int argmax<double>(const double*, int);

}  // namespace train
}  // namespace collie
