// The hand-written backward pass against central finite differences, in double precision,
// for every parameter of a small MLP; plus the order backward finishes gradients in, and the
// SGD update rule.
#include <cmath>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "training_demo/mlp.h"
#include "training_demo/rng.h"
#include "training_demo/sgd.h"

namespace collie {
namespace train {
namespace {

struct Problem {
  Mlp<double> model{{6, 7, 5, 4}};
  std::vector<double> params, input;
  std::vector<uint8_t> labels;
  int batch = 5;
  Problem() {
    Rng rng(11);
    params.resize(model.numParams());
    model.init(params.data(), rng);
    for (double& b : params) b += 0.05 * rng.normal();  // non-zero biases too
    input.resize(batch * model.inputs());
    for (double& x : input) x = rng.normal();
    for (int i = 0; i < batch; ++i) labels.push_back(static_cast<uint8_t>(rng.below(4)));
  }
  double meanLoss(const std::vector<double>& p) const {
    Workspace<double> ws;
    model.forward(p.data(), input.data(), batch, ws);
    return model.lossAndGradient(ws, labels.data(), 1.0 / batch, nullptr) / batch;
  }
};

TEST(GradientCheck, BackwardMatchesFiniteDifferences) {
  Problem pr;
  Workspace<double> ws;
  pr.model.forward(pr.params.data(), pr.input.data(), pr.batch, ws);
  pr.model.lossAndGradient(ws, pr.labels.data(), 1.0 / pr.batch, nullptr);
  std::vector<double> grads(pr.model.numParams(), NAN);
  pr.model.backward(pr.params.data(), ws, grads.data(), 8, nullptr);
  const double h = 1e-6;
  double worst = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    std::vector<double> plus = pr.params, minus = pr.params;
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (pr.meanLoss(plus) - pr.meanLoss(minus)) / (2 * h);
    const double err =
        std::fabs(numeric - grads[i]) / std::max(1e-6, std::fabs(numeric) + std::fabs(grads[i]));
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-5) << "parameter " << i << ": analytic " << grads[i] << " numeric "
                         << numeric;
  }
  char text[32];
  snprintf(text, sizeof(text), "%.3g", worst);
  RecordProperty("worst_relative_error", text);
}

TEST(GradientCheck, GradientsBecomeFinalFrontToBack) {
  Problem pr;
  Workspace<double> ws;
  pr.model.forward(pr.params.data(), pr.input.data(), pr.batch, ws);
  pr.model.lossAndGradient(ws, pr.labels.data(), 1.0 / pr.batch, nullptr);
  std::vector<double> grads(pr.model.numParams(), NAN);
  size_t last = 0;
  pr.model.backward(pr.params.data(), ws, grads.data(), 8, [&](size_t done) {
    EXPECT_GE(done, last);
    for (size_t i = 0; i < done; ++i) ASSERT_FALSE(std::isnan(grads[i])) << i;
    last = done;
  });
  EXPECT_EQ(last, pr.model.numParams());
}

TEST(GradientCheck, LayoutIsLastLayerFirst) {
  Mlp<float> m({784, 256, 128, 10});
  EXPECT_EQ(m.numParams(), 784u * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(m.weightOffset(2), 0u);
  EXPECT_EQ(m.biasOffset(2), 1280u);
  EXPECT_EQ(m.weightOffset(1), 1290u);
  EXPECT_EQ(m.biasOffset(0) + 256, m.numParams());
}

TEST(Sgd, MomentumAndWeightDecayFollowTheFormula) {
  Sgd sgd({0.5, 0.9, 0.1}, 2);
  std::vector<float> p{1.0f, -2.0f}, g{0.2f, 0.4f};
  sgd.step(p.data(), g.data(), 2);  // v = g + wd p; p -= lr v
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.5f * (0.2f + 0.1f * 1.0f));
  EXPECT_FLOAT_EQ(p[1], -2.0f - 0.5f * (0.4f + 0.1f * -2.0f));
  const float v0 = 0.2f + 0.1f * 1.0f, p0 = p[0];
  sgd.step(p.data(), g.data(), 2);
  EXPECT_FLOAT_EQ(p[0], p0 - 0.5f * (0.9f * v0 + (0.2f + 0.1f * p0)));
  Sgd plain({0.1, 0, 0}, 2);
  EXPECT_TRUE(plain.velocity().empty());
  std::vector<float> q{1.0f, 1.0f};
  plain.step(q.data(), g.data(), 2);
  EXPECT_FLOAT_EQ(q[0], 1.0f - 0.1f * 0.2f);
}

}  // namespace
}  // namespace train
}  // namespace collie
