#pragma once

// The building blocks of the ablation Transformer: norm (layernorm / rmsnorm / scalenorm /
// identity), multi-head or grouped-query self-attention (manual scaled dot-product, optional causal
// mask) and the FFN (plain or gated).

#include <torch/torch.h>

#include <cstdint>

#include "agent/train/config.h"

namespace tae::train {

// LayerNorm, RMSNorm, ScaleNorm (x * g / ||x||, one learned scalar g initialised to sqrt(dim);
// Nguyen & Salazar 2019) or the identity (which owns no parameters).
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(NormKind kind, int64_t dim, bool bias);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  NormKind kind_;
  int64_t dim_;
  torch::Tensor weight_;  // [dim] gain; [1] for scalenorm
  torch::Tensor bias_;    // undefined unless layernorm with bias
};
TORCH_MODULE(Norm);

struct AttentionOptions {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t kv_heads = 4;  // must divide heads; each K/V head serves heads / kv_heads query heads
  bool causal = true;
  bool bias = true;
  double dropout = 0.0;
};

// Multi-head self-attention over [batch, time, d_model]. With kv_heads < heads it is grouped-query
// attention: the fused projection makes heads query heads but only kv_heads key and value heads
// (d_model + 2 * kv_heads * head_dim outputs), and each K/V head is repeated for its group of
// heads / kv_heads consecutive query heads.
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

// Position-wise FFN with d_ff = ffn_mult * d:
//   relu|gelu:    down(act(up(x)))                      2 matrices
//   swiglu|geglu: down(silu|gelu(gate(x)) * up(x))      3 matrices (Shazeer 2020)
// then dropout. d_ff is NOT scaled down for the gated variants (LLaMA uses 2/3 * d_ff to match the
// parameter count): a gated FFN has 1.5x the parameters of a plain one at the same ffn_mult, and
// model/params reports that honestly; lower ffn_mult to compare at equal size.
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::Linear gate_{nullptr};  // gated activations only
  torch::nn::Linear up_{nullptr};
  torch::nn::Linear down_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(FeedForward);

}  // namespace tae::train
