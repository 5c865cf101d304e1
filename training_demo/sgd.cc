// The SGD update, one pass over the parameters.
#include "training_demo/sgd.h"

namespace collie {
namespace train {

void Sgd::step(float* params, const float* grads, size_t n) {
  const float lr = static_cast<float>(lr_);
  const float wd = static_cast<float>(config_.weightDecay);
  const float mu = static_cast<float>(config_.momentum);
  if (velocity_.empty()) {
    for (size_t i = 0; i < n; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
    return;
  }
  float* v = velocity_.data();
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + (grads[i] + wd * params[i]);
    params[i] -= lr * v[i];
  }
}

}  // namespace train
}  // namespace collie
