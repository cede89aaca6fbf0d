// FusedAdamW (agent/train/fused_adamw.h) against libtorch's AdamW on the same weights and
// gradients: the same trajectory up to float rounding, weight decay per group, clipping, and
// state that survives save/load and the model's parameters being replaced.

#include "agent/train/fused_adamw.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

#include "tests/train/rounding.h"

namespace tae::train {
namespace {

struct Net {
  torch::nn::Linear a{torch::nn::LinearOptions(6, 5)};
  torch::nn::Linear b{torch::nn::LinearOptions(5, 3)};
  std::vector<torch::Tensor> Matrices() const { return {a->weight, b->weight}; }
  std::vector<torch::Tensor> Vectors() const { return {a->bias, b->bias}; }
  std::vector<torch::Tensor> All() const { return {a->weight, a->bias, b->weight, b->bias}; }
  torch::Tensor Loss(const torch::Tensor& x) { return b(torch::tanh(a(x))).pow(2).sum(); }
};

Net MakeNet(uint64_t seed) {
  torch::manual_seed(seed);
  return Net{};
}

std::vector<torch::optim::OptimizerParamGroup> Groups(const Net& net, double lr, double wd) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net.Matrices(), std::make_unique<torch::optim::AdamWOptions>(
                                          torch::optim::AdamWOptions(lr).weight_decay(wd)));
  groups.emplace_back(net.Vectors(), std::make_unique<torch::optim::AdamWOptions>(
                                         torch::optim::AdamWOptions(lr).weight_decay(0.0)));
  return groups;
}

double MaxDifference(const Net& x, const Net& y) {
  double worst = 0.0;
  std::vector<torch::Tensor> px = x.All();
  std::vector<torch::Tensor> py = y.All();
  for (size_t i = 0; i < px.size(); ++i) {
    worst = std::max(worst, (px[i] - py[i]).abs().max().item<double>());
  }
  return worst;
}

TEST_CASE("FusedAdamW follows libtorch's AdamW, weight decay per group", "[optimizer]") {
  Net reference = MakeNet(3);
  Net fused_net = MakeNet(3);
  REQUIRE(MaxDifference(reference, fused_net) == 0.0);
  constexpr double kLr = 0.05;
  torch::optim::AdamW adamw(Groups(reference, kLr, 0.1), torch::optim::AdamWOptions(kLr));
  FusedAdamW fused(Groups(fused_net, kLr, 0.1));
  REQUIRE(MaxDifference(reference, fused_net) == 0.0);  // flattening kept the values
  const torch::Tensor x = torch::randn({8, 6});
  const std::vector<torch::Tensor> pr = reference.All();
  const std::vector<torch::Tensor> pf = fused_net.All();
  const Net start = MakeNet(3);
  double worst_ratio = 0.0;
  for (int step = 1; step <= 30; ++step) {
    // Each step from the reference's weights, so both optimisers see the same gradient and only
    // their own arithmetic differs; compared over a trajectory, the two nets would feed their
    // rounding back through the loss, and the difference would grow with no bound to state.
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < pr.size(); ++i) {
        pf[i].copy_(pr[i]);
      }
    }
    std::vector<torch::Tensor> before;
    for (const torch::Tensor& p : pr) {
      before.push_back(p.detach().clone());
    }
    adamw.zero_grad();
    reference.Loss(x).backward();
    adamw.step();
    fused.ZeroGrad();
    fused_net.Loss(x).backward();
    fused.step();
    // The update is lr (m^ / (sqrt(v^) + eps) + wd w). m and v are recurrences over the steps so
    // far (two roundings a step each), so each is within gamma(2 step + 4) of the magnitude of
    // its terms; by Cauchy-Schwarz that magnitude over sqrt(v^) is at most 8 for betas (0.9,
    // 0.999). With the float32 rounding of w - update itself: rounding.h's gamma throughout.
    const double update_rounding = kLr * 16.0 * rounding::Gamma(2 * step + 4);
    for (size_t i = 0; i < pr.size(); ++i) {
      const torch::Tensor bound =
          4.0 * rounding::kFloat32Unit * (before[i].abs() + (pr[i] - before[i]).abs()) +
          update_rounding;
      const torch::Tensor off = (pf[i] - pr[i]).abs();
      worst_ratio = std::max(worst_ratio, (off / bound).max().item<double>());
    }
  }
  INFO("worst difference / bound over 30 steps: " << worst_ratio);
  CHECK(worst_ratio <= 1.0);
  const double moved = (reference.a->weight - start.a->weight).abs().max().item<double>();
  CHECK(moved > 0.1);  // 30 steps of lr 0.05 really moved the weights
}

TEST_CASE("FusedAdamW clips the global gradient norm like clip_grad_norm_", "[optimizer]") {
  Net reference = MakeNet(4);
  Net fused_net = MakeNet(4);
  FusedAdamW fused(Groups(fused_net, 0.01, 0.0));
  const torch::Tensor x = torch::randn({8, 6}) * 10;
  reference.Loss(x).backward();
  const double expected = torch::nn::utils::clip_grad_norm_(reference.All(), 0.5);
  fused.ZeroGrad();
  fused_net.Loss(x).backward();
  const double norm = fused.ClipGradNorm(0.5);
  CHECK(norm == Approx(expected).epsilon(1e-5));
  CHECK(norm > 0.5);  // the case really clips
  // The same gradients times 0.5 / norm, each norm a sum of n squares (within gamma(n), halved
  // by the square root) and the division and product rounded: within (gamma(n) + 4u) |g|.
  const std::vector<torch::Tensor> pr = reference.All();
  const std::vector<torch::Tensor> pf = fused_net.All();
  int64_t n = 0;
  for (const torch::Tensor& p : pr) {
    n += p.numel();
  }
  for (size_t i = 0; i < pr.size(); ++i) {
    const torch::Tensor bound =
        (rounding::Gamma(n) + 4.0 * rounding::kFloat32Unit) * pr[i].grad().abs() + 1e-30;
    CHECK(((pr[i].grad() - pf[i].grad()).abs() <= bound).all().item<bool>());
  }
}

TEST_CASE("FusedAdamW state survives save/load and replaced parameter storage", "[optimizer]") {
  const torch::Tensor x = torch::randn({8, 6});
  auto train = [&x](Net& net, FusedAdamW& optimizer, int steps) {
    for (int i = 0; i < steps; ++i) {
      optimizer.ZeroGrad();
      net.Loss(x).backward();
      optimizer.step();
    }
  };
  Net straight = MakeNet(5);
  FusedAdamW straight_opt(Groups(straight, 0.02, 0.1));
  train(straight, straight_opt, 20);

  Net first = MakeNet(5);
  FusedAdamW first_opt(Groups(first, 0.02, 0.1));
  train(first, first_opt, 8);
  torch::serialize::OutputArchive saved;
  first_opt.save(saved);
  std::vector<torch::Tensor> weights;
  for (const torch::Tensor& p : first.All()) {
    weights.push_back(p.detach().clone());
  }

  // A fresh model and optimiser; the weights come back the way a checkpoint load does it
  // (Tensor::set_, which swaps the parameter's storage out of the flat buffer).
  Net second = MakeNet(6);
  FusedAdamW second_opt(Groups(second, 0.02, 0.1));
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> params = second.All();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].set_(weights[i].clone());
    }
  }
  std::stringstream buffer;
  saved.save_to(buffer);
  torch::serialize::InputArchive loaded;
  loaded.load_from(buffer);
  second_opt.load(loaded);
  train(second, second_opt, 12);
  CHECK(MaxDifference(straight, second) == 0.0);
}

}  // namespace
}  // namespace tae::train
