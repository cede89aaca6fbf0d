#include "agent/train/fused_adamw.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace tae::train {
namespace {

constexpr int64_t kGrain = 32768;  // floats per parallel chunk

struct Hyper {
  float decay;  // 1 - lr * weight_decay
  float beta1, beta2;
  // 1 - beta, computed in double then rounded, as libtorch's AdamW passes it (a Scalar): 1.0f -
  // float(0.999) is 1.3e-5 off 0.001, which bias correction (in double) does not cancel, and every
  // update was 6e-6 off AdamW's.
  float one_minus_beta1, one_minus_beta2;
  float step_size;     // lr / (1 - beta1^t)
  float inv_bc2_sqrt;  // 1 / sqrt(1 - beta2^t)
  float eps;
};

// One pass over [begin, end): the update of torch::optim::AdamW, element by element.
void Update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
            const Hyper& h) {
  at::parallel_for(begin, end, kGrain, [&](int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
      const float gi = g[i];
      const float mi = h.beta1 * m[i] + h.one_minus_beta1 * gi;
      const float vi = h.beta2 * v[i] + h.one_minus_beta2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * h.decay - h.step_size * mi / (std::sqrt(vi) * h.inv_bc2_sqrt + h.eps);
    }
  });
}

}  // namespace

FusedAdamW::FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<torch::optim::AdamWOptions>()) {
  int64_t total = 0;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const int64_t begin = total;
    for (const torch::Tensor& p : param_groups_[g].params()) {
      TORCH_CHECK(p.scalar_type() == torch::kFloat && p.device().is_cpu(),
                  "FusedAdamW takes float CPU parameters");
      slots_.push_back({p, total, g});
      total += p.numel();
    }
    group_ranges_.emplace_back(begin, total);
  }
  flat_param_ = torch::empty({total});
  flat_grad_ = torch::zeros({total});
  exp_avg_ = torch::zeros({total});
  exp_avg_sq_ = torch::zeros({total});
  EnsureFlat();
}

void FusedAdamW::EnsureFlat() {
  torch::NoGradGuard no_grad;
  float* params = flat_param_.data_ptr<float>();
  float* grads = flat_grad_.data_ptr<float>();
  for (Slot& slot : slots_) {
    torch::Tensor& p = slot.param;
    const int64_t n = p.numel();
    if (p.data_ptr<float>() != params + slot.offset || !p.is_contiguous()) {
      flat_param_.narrow(0, slot.offset, n).copy_(p.reshape({-1}));
      p.set_(flat_param_.storage(), slot.offset, p.sizes(), c10::contiguous_strides(p.sizes()));
    }
    const torch::Tensor& grad = p.grad();
    if (!grad.defined() || grad.data_ptr<float>() != grads + slot.offset || !grad.is_contiguous()) {
      torch::Tensor view = flat_grad_.narrow(0, slot.offset, n).view(p.sizes());
      if (grad.defined()) {
        view.copy_(grad);
      } else {
        view.zero_();
      }
      p.mutable_grad() = view;
    }
  }
}

void FusedAdamW::ZeroGrad() {
  EnsureFlat();
  flat_grad_.zero_();
}

torch::Tensor FusedAdamW::FlatGrad() {
  EnsureFlat();
  return flat_grad_;
}

double FusedAdamW::ClipGradNorm(double max_norm) {
  EnsureFlat();
  const double norm = flat_grad_.norm().item<double>();
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    flat_grad_.mul_(coef);
  }
  return norm;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  EnsureFlat();
  ++steps_;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const auto& options =
        static_cast<const torch::optim::AdamWOptions&>(param_groups_[g].options());
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    const double t = static_cast<double>(steps_);
    Hyper h;
    h.decay = static_cast<float>(1.0 - options.lr() * options.weight_decay());
    h.beta1 = static_cast<float>(beta1);
    h.beta2 = static_cast<float>(beta2);
    h.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    h.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    h.step_size = static_cast<float>(options.lr() / (1.0 - std::pow(beta1, t)));
    h.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
    h.eps = static_cast<float>(options.eps());
    Update(flat_param_.data_ptr<float>(), flat_grad_.data_ptr<float>(), exp_avg_.data_ptr<float>(),
           exp_avg_sq_.data_ptr<float>(), group_ranges_[g].first, group_ranges_[g].second, h);
  }
  return loss;
}

void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  archive.write("fused_adamw.steps", c10::IValue(steps_));
  archive.write("fused_adamw.exp_avg", exp_avg_, /*is_buffer=*/true);
  archive.write("fused_adamw.exp_avg_sq", exp_avg_sq_, /*is_buffer=*/true);
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  c10::IValue steps;
  archive.read("fused_adamw.steps", steps);
  torch::Tensor exp_avg;
  torch::Tensor exp_avg_sq;
  archive.read("fused_adamw.exp_avg", exp_avg, /*is_buffer=*/true);
  archive.read("fused_adamw.exp_avg_sq", exp_avg_sq, /*is_buffer=*/true);
  TORCH_CHECK(exp_avg.numel() == exp_avg_.numel() && exp_avg_sq.numel() == exp_avg_sq_.numel(),
              "optimizer state of ", exp_avg.numel(), " weights, the model has ", exp_avg_.numel());
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(exp_avg);
  exp_avg_sq_.copy_(exp_avg_sq);
  steps_ = steps.toInt();
}

}  // namespace tae::train
