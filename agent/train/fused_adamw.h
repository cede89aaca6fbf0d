#pragma once

// AdamW over one flat buffer: every parameter and every gradient of the model is a view into one
// contiguous float tensor each, so the update is one pass over all weights (instead of ~10 tensor
// ops per parameter with temporaries) and the gradient norm is one reduction. Same algorithm as
// torch::optim::AdamW (decoupled weight decay, bias correction, no amsgrad); the last bits of a
// weight can differ from it because the denominator is computed as sqrt(v) * (1 / sqrt(1 - b2^t)).

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace tae::train {

class FusedAdamW final : public torch::optim::Optimizer {
 public:
  // Each group is a list of float CPU parameters with AdamWOptions (lr, betas, eps and
  // weight_decay are read from them at every step; only lr and weight_decay may differ between
  // groups). The parameters are moved into the flat buffer here: their values are kept, their
  // storage changes.
  explicit FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups);

  // Zeroes every gradient (in the flat buffer).
  void ZeroGrad();
  // Scales the gradients so that their global L2 norm is at most max_norm (like
  // torch::nn::utils::clip_grad_norm_, with its 1e-6) and returns the norm before scaling.
  double ClipGradNorm(double max_norm);
  // The flat gradient buffer every parameter's gradient is a view into (after EnsureFlat): one
  // tensor to all-reduce in a data-parallel run.
  torch::Tensor FlatGrad();

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  struct Slot {
    torch::Tensor param;  // the model's parameter (a view into flat_param_ once flat)
    int64_t offset;
    size_t group;
  };

  // Puts back into the flat buffers any parameter or gradient whose storage was replaced (e.g. by
  // loading a checkpoint, which swaps the tensor's storage, or by Module::zero_grad(), which
  // drops the gradient).
  void EnsureFlat();

  std::vector<Slot> slots_;
  std::vector<std::pair<int64_t, int64_t>> group_ranges_;  // [begin, end) per group
  torch::Tensor flat_param_;
  torch::Tensor flat_grad_;
  torch::Tensor exp_avg_;
  torch::Tensor exp_avg_sq_;
  int64_t steps_ = 0;
};

}  // namespace tae::train
