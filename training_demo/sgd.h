// Stochastic gradient descent with optional momentum and weight decay over the flat parameter
// array, in PyTorch's formulation so that hyper-parameters mean the same thing there and here:
//   g = grad + weight_decay * p;  v = momentum * v + g;  p -= lr * v   (v = g when momentum 0).
#pragma once

#include <cstddef>
#include <vector>

namespace collie {
namespace train {

struct SgdConfig {
  double lr = 0.1;
  double momentum = 0.0;
  double weightDecay = 0.0;
};

class Sgd {
 public:
  Sgd(SgdConfig config, size_t numParams)
      : config_(config), lr_(config.lr), velocity_(config.momentum != 0 ? numParams : 0, 0.0f) {}

  // One update of params from the (already averaged) gradients.
  void step(float* params, const float* grads, size_t n);

  // The learning rate of the next steps (a schedule changes it; config().lr is the base).
  void setLearningRate(double lr) { lr_ = lr; }
  double learningRate() const { return lr_; }

  const SgdConfig& config() const { return config_; }
  // Momentum buffer (empty without momentum); checkpoints save and restore it.
  std::vector<float>& velocity() { return velocity_; }
  const std::vector<float>& velocity() const { return velocity_; }

 private:
  SgdConfig config_;
  double lr_;
  std::vector<float> velocity_;
};

}  // namespace train
}  // namespace collie
