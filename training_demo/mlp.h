// The model: a multi-layer perceptron (ReLU hidden layers, softmax cross-entropy on the
// logits) with its forward pass, a hand-written backward pass and seeded initialisation.
// Templated on the scalar so that the gradient check can run the same code in double.
//
// All parameters live in one flat array laid out last layer first, weights before biases:
// [W_L, b_L, W_L-1, b_L-1, ..., W_1, b_1], W_l stored out x in, row-major. That is the order
// the backward pass finishes them in, so gradients become final front to back and a bucket of
// the flat gradient array can be reduced as soon as backward has passed its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "training_demo/rng.h"

namespace collie {
namespace train {

// The activations of one batch, kept by forward for backward to use.
template <typename T>
struct Workspace {
  int batch = 0;
  const T* input = nullptr;         // batch x sizes[0], owned by the caller
  std::vector<std::vector<T>> act;  // act[l]: batch x sizes[l+1]; ReLU output, logits last
  std::vector<T> dz, dzPrev;        // gradient w.r.t. a layer's pre-activation
};

template <typename T>
class Mlp {
 public:
  // sizes: input width, hidden widths..., number of classes (at least two entries).
  explicit Mlp(std::vector<int> sizes);

  const std::vector<int>& sizes() const { return sizes_; }
  int numLayers() const { return static_cast<int>(sizes_.size()) - 1; }
  int inputs() const { return sizes_.front(); }
  int classes() const { return sizes_.back(); }
  size_t numParams() const { return numParams_; }
  // Offsets into the flat array of layer l's weights and biases (l = 0 is the first layer).
  size_t weightOffset(int l) const { return weightOffset_[l]; }
  size_t biasOffset(int l) const { return weightOffset_[l] + weightCount(l); }
  size_t weightCount(int l) const { return static_cast<size_t>(sizes_[l]) * sizes_[l + 1]; }

  // He-normal weights for the ReLU layers, Xavier-uniform for the output layer, zero biases.
  void init(T* params, Rng& rng) const;

  // Runs the batch (batch x inputs(), row-major) through the network into ws.
  void forward(const T* params, const T* input, int batch, Workspace<T>& ws) const;
  const T* logits(const Workspace<T>& ws) const { return ws.act.back().data(); }

  // Softmax cross-entropy of the logits in ws: returns the summed loss over the batch, counts
  // correct predictions, and stores d(loss)/d(logits) * gradScale for backward. gradScale is
  // 1 / global batch so that gradients summed over ranks are the global batch mean.
  double lossAndGradient(Workspace<T>& ws, const uint8_t* labels, T gradScale, int* correct) const;

  // Back-propagates ws.dz into grads (the flat layout). ready(n) is called whenever the
  // first n gradient elements are final; weight gradients are produced in row blocks of
  // about blockElems elements so that ready() comes often enough to overlap communication.
  void backward(const T* params, Workspace<T>& ws, T* grads, size_t blockElems,
                const std::function<void(size_t)>& ready) const;

 private:
  void backwardLayer(int l, const T* params, Workspace<T>& ws, T* grads, size_t blockElems,
                     const std::function<void(size_t)>& ready) const;

  std::vector<int> sizes_;
  std::vector<size_t> weightOffset_;
  size_t numParams_ = 0;
};

// Index of the largest of n values (the first on ties).
template <typename T>
int argmax(const T* v, int n);

}  // namespace train
}  // namespace collie
