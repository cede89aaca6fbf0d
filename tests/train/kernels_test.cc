// The fast CPU paths (agent/train/kernels.h) against libtorch's ops: the same outputs and
// gradients, to float32 rounding, for the linear layers and for attention with every knob that
// takes the fast path (causal or not, MHA/GQA/MQA, pruned heads, head_dim, rope, alibi, gates).

#include "agent/train/kernels.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/layers.h"
#include "tests/skip.h"

namespace tae::train {
namespace {

// Restores the fast paths when a test leaves, whatever happened in it.
class FastKernelsOff {
 public:
  FastKernelsOff() { SetFastKernelsEnabledForTest(false); }
  ~FastKernelsOff() { SetFastKernelsEnabledForTest(true); }
  FastKernelsOff(const FastKernelsOff&) = delete;
  FastKernelsOff& operator=(const FastKernelsOff&) = delete;
};

void CheckClose(const torch::Tensor& fast, const torch::Tensor& reference,
                const std::string& what) {
  INFO(what << ": max |difference| " << (fast - reference).abs().max().item<float>()
            << ", max |reference| " << reference.abs().max().item<float>());
  REQUIRE(fast.sizes() == reference.sizes());
  // Float32 rounding of sums in another order: relative to the tensor's scale, since an element
  // near zero that sums large terms (a bias gradient) keeps their absolute rounding.
  const double scale = reference.abs().max().item<double>();
  CHECK((fast - reference).abs().max().item<double>() <= 1e-5 * scale + 1e-6);
}

// Output and the gradients of x and of every parameter for a loss that weighs each output.
struct Pass {
  torch::Tensor y;
  torch::Tensor dx;
  std::vector<torch::Tensor> dparams;
};

template <typename Module>
Pass Run(Module& module, const torch::Tensor& x_in, const torch::Tensor& weights) {
  for (torch::Tensor& p : module->parameters()) {
    p.mutable_grad() = torch::Tensor();
  }
  torch::Tensor x = x_in.clone().requires_grad_(true);
  Pass pass;
  pass.y = module->forward(x);
  (pass.y * weights).sum().backward();
  pass.dx = x.grad();
  for (const torch::Tensor& p : module->parameters()) {
    pass.dparams.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  }
  return pass;
}

template <typename Module>
void CheckFastMatchesReference(Module& module, const torch::Tensor& x) {
  REQUIRE(FastKernelsEnabled());  // libtorch links oneDNN: the fast path must be there to test
  torch::manual_seed(11);
  Pass fast = Run(module, x, torch::randn_like(module->forward(x)));
  torch::manual_seed(11);
  Pass reference;
  {
    FastKernelsOff off;
    reference = Run(module, x, torch::randn_like(module->forward(x)));
  }
  CheckClose(fast.y, reference.y, "output");
  CheckClose(fast.dx, reference.dx, "input gradient");
  const auto named = module->named_parameters();
  for (size_t i = 0; i < fast.dparams.size(); ++i) {
    CheckClose(fast.dparams[i], reference.dparams[i], "gradient of " + named[i].key());
  }
}

// A module around Linear, so the generic checks can run it.
struct LinearModule : torch::nn::Module {
  explicit LinearModule(bool bias)
      : layer(register_module("layer",
                              torch::nn::Linear(torch::nn::LinearOptions(24, 40).bias(bias)))) {}
  torch::Tensor forward(const torch::Tensor& x) { return Linear(x, layer); }
  torch::nn::Linear layer;
};

TEST_CASE("fast linear matches torch::linear, with and without bias", "[kernels]") {
  if (FastKernelsTurnedOff()) {
    TAE_SKIP("TAE_FAST_KERNELS turned the fast paths off in this environment: nothing to compare");
  }
  for (bool bias : {true, false}) {
    torch::manual_seed(1);
    auto module = std::make_shared<LinearModule>(bias);
    CheckFastMatchesReference(module, torch::randn({3, 7, 24}));
    CheckFastMatchesReference(module, torch::randn({5, 24}));
  }
}

struct Case {
  std::string name;
  AttentionOptions options;
  bool gate = false;
};

std::vector<Case> AttentionCases() {
  AttentionOptions base;
  base.d_model = 32;
  base.heads = 4;
  base.kv_heads = 4;
  base.max_len = 16;
  base.pos_encoding = PosEncoding::kLearned;
  std::vector<Case> cases;
  cases.push_back({"causal MHA", base});
  Case bidirectional{"bidirectional", base};
  bidirectional.options.causal = false;
  cases.push_back(bidirectional);
  Case gqa{"GQA, 2 K/V heads", base};
  gqa.options.kv_heads = 2;
  cases.push_back(gqa);
  Case mqa{"MQA, bidirectional", base};
  mqa.options.kv_heads = 1;
  mqa.options.causal = false;
  cases.push_back(mqa);
  Case pruned{"GQA with only head 2 kept (one K/V head gone)", base};
  pruned.options.kv_heads = 2;
  pruned.options.kept_heads = {2};
  cases.push_back(pruned);
  Case uneven{"GQA with head 2 pruned (K/V groups of 2 and 1)", base};
  uneven.options.kv_heads = 2;
  uneven.options.kept_heads = {0, 1, 3};
  cases.push_back(uneven);
  Case pruned_mha{"MHA with head 1 pruned, gated", base};
  pruned_mha.options.kept_heads = {0, 2, 3};
  pruned_mha.gate = true;
  cases.push_back(pruned_mha);
  Case head_dim{"head_dim 6, no bias", base};
  head_dim.options.head_dim = 6;
  head_dim.options.bias = false;
  cases.push_back(head_dim);
  Case rope{"rope, GQA", base};
  rope.options.pos_encoding = PosEncoding::kRope;
  rope.options.kv_heads = 2;
  cases.push_back(rope);
  Case alibi{"alibi, 3 heads", base};
  alibi.options.pos_encoding = PosEncoding::kAlibi;
  alibi.options.d_model = 24;
  alibi.options.heads = 3;
  alibi.options.kv_heads = 3;
  cases.push_back(alibi);
  Case alibi_bi{"alibi, bidirectional", base};
  alibi_bi.options.pos_encoding = PosEncoding::kAlibi;
  alibi_bi.options.causal = false;
  cases.push_back(alibi_bi);
  Case dropout_eval{"dropout 0.1, evaluation (no dropout applied)", base};
  dropout_eval.options.dropout = 0.1;
  cases.push_back(dropout_eval);
  return cases;
}

TEST_CASE("fused attention matches libtorch's ops for every attention knob",
          "[kernels][attention]") {
  if (FastKernelsTurnedOff()) {
    TAE_SKIP("TAE_FAST_KERNELS turned the fast paths off in this environment: nothing to compare");
  }
  for (const Case& c : AttentionCases()) {
    SECTION(c.name) {
      torch::manual_seed(2);
      Attention attention(c.options);
      if (c.options.dropout > 0.0) {
        attention->eval();
      }
      if (c.gate) {
        attention->SetHeadGate(torch::tensor({0.5F, 0.0F, 2.0F, -1.0F}));
      }
      CheckFastMatchesReference(attention, torch::randn({3, 13, c.options.d_model}));
    }
  }
}

TEST_CASE("attention dropout in training takes libtorch's path", "[kernels][attention]") {
  if (FastKernelsTurnedOff()) {
    TAE_SKIP("TAE_FAST_KERNELS turned the fast paths off in this environment: nothing to compare");
  }
  AttentionOptions options;
  options.d_model = 16;
  options.heads = 2;
  options.kv_heads = 2;
  options.dropout = 0.5;
  torch::manual_seed(3);
  Attention attention(options);
  torch::Tensor x = torch::randn({2, 8, 16});
  torch::manual_seed(9);
  torch::Tensor fast = attention->forward(x);
  torch::manual_seed(9);
  FastKernelsOff off;
  torch::Tensor reference = attention->forward(x);
  // The same dropout draws (the linear layers still take the fast path): the fused path, which
  // has no dropout, would differ by far more than rounding.
  CheckClose(fast, reference, "output with dropout");
}

}  // namespace
}  // namespace tae::train
