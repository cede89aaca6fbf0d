#pragma once

// The building blocks of the ablation Transformer: norm (layernorm / rmsnorm / identity),
// multi-head self-attention (manual scaled dot-product, optional causal mask) and the FFN.

#include <torch/torch.h>

#include <cstdint>

#include "agent/train/config.h"

namespace tae::train {

// LayerNorm, RMSNorm or the identity (which owns no parameters).
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(NormKind kind, int64_t dim, bool bias);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  NormKind kind_;
  int64_t dim_;
  torch::Tensor weight_;
  torch::Tensor bias_;  // undefined unless layernorm with bias
};
TORCH_MODULE(Norm);

struct AttentionOptions {
  int64_t d_model = 64;
  int64_t heads = 4;
  bool causal = true;
  bool bias = true;
  double dropout = 0.0;
};

// Multi-head self-attention over [batch, time, d_model].
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  AttentionOptions options_;
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear out_{nullptr};
  torch::nn::Dropout attn_dropout_{nullptr};
  torch::nn::Dropout out_dropout_{nullptr};
};
TORCH_MODULE(Attention);

// Position-wise FFN: Linear(d, ffn_mult*d) -> relu|gelu -> Linear(ffn_mult*d, d) -> dropout.
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::Linear up_{nullptr};
  torch::nn::Linear down_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(FeedForward);

}  // namespace tae::train
