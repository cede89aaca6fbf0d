#pragma once

// The building blocks of the ablation Transformer: norm (layernorm / rmsnorm / scalenorm /
// identity), multi-head or grouped-query self-attention (manual scaled dot-product, optional causal
// mask) and the FFN (plain or gated).

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/kernels.h"

namespace tae::train {

// Every linear layer's product goes through Linear: LinearWeights, unless a LinearOverride is
// installed on this thread (int8 evaluation, compression.h) and takes that weight.
class LinearOverride {
 public:
  virtual ~LinearOverride() = default;
  // x @ weight^T + bias by other means, or an undefined tensor to leave it to torch::linear.
  virtual torch::Tensor Apply(const torch::Tensor& x, const torch::Tensor& weight) const = 0;
};
torch::Tensor Linear(const torch::Tensor& x, const torch::nn::Linear& layer);
// x @ weight^T + bias (bias may be undefined): kernels.h's FastLinear where it applies, else
// torch::linear. No override (the tied output head uses it directly).
torch::Tensor LinearWeights(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias);
// Installs `override` on this thread until the guard goes (guards nest).
class ScopedLinearOverride {
 public:
  explicit ScopedLinearOverride(const LinearOverride* override);
  ~ScopedLinearOverride();
  ScopedLinearOverride(const ScopedLinearOverride&) = delete;
  ScopedLinearOverride& operator=(const ScopedLinearOverride&) = delete;

 private:
  const LinearOverride* previous_;
};

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
  int64_t heads = 4;     // query heads of the unpruned layer
  int64_t kv_heads = 4;  // must divide heads; each K/V head serves heads / kv_heads query heads
  int64_t head_dim = 0;  // 0: d_model / heads
  // The query heads this layer has (original indices, ascending); empty: all of them. A pruned
  // head owns no parameters: its Q rows and output columns are absent, and a K/V head whose whole
  // group is pruned is absent too.
  std::vector<int64_t> kept_heads;
  bool causal = true;
  bool bias = true;
  double dropout = 0.0;
  // rope rotates q and k; alibi adds -slope_h * distance to the scores (slopes by original head
  // index, so pruning a head leaves the others' slopes unchanged). Others: nothing here.
  PosEncoding pos_encoding = PosEncoding::kLearned;
  int64_t max_len = 1024;
};

// Self-attention over [batch, time, d_model]: fused projection to the kept query heads and their
// K/V heads (kept * head_dim + 2 * kv * head_dim outputs), scaled dot-product scores with the
// causal mask and ALiBi bias, softmax, values, then an optional per-head gate and the output
// projection (kept * head_dim -> d_model).
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x);

  // Multiplies head h's output by gate[h] before the output projection (gate: [heads], indexed by
  // ORIGINAL head; entries of pruned heads are ignored). Undefined: no gate. Used to mask heads at
  // evaluation and for gradient head-importance scores.
  void SetHeadGate(torch::Tensor gate);

  // The attention probabilities [batch, kept heads, time, time] for x (no dropout).
  torch::Tensor AttentionPattern(const torch::Tensor& x) const;

  const std::vector<int64_t>& kept_heads() const { return kept_; }
  // The K/V heads this layer has (original indices) and, per kept query head, the position of its
  // K/V head in that list.
  const std::vector<int64_t>& kept_kv_heads() const { return kept_kv_; }

 private:
  struct Projected {
    torch::Tensor q, k, v;  // [batch, kept heads, time, head_dim]; K/V already per query head
  };
  Projected Project(const torch::Tensor& x) const;
  torch::Tensor Probabilities(const torch::Tensor& q, const torch::Tensor& k) const;
  // Rotate-half RoPE on x, whose dimension `time_dim` is time (1 or 2) and last is head_dim.
  torch::Tensor Rotate(const torch::Tensor& x, int64_t time, int64_t time_dim) const;
  bool UseFusedAttention(const torch::Tensor& x) const;
  // The fused projection as [batch, time, kept + 2 * kv, head_dim] with RoPE applied (fast path).
  torch::Tensor PackedQkv(const torch::Tensor& x) const;
  // The heads' outputs [batch, time, kept, head_dim] by libtorch's ops (the reference path).
  torch::Tensor MixHeads(const torch::Tensor& x);

  AttentionOptions options_;
  std::vector<int64_t> kept_;
  std::vector<int64_t> kept_kv_;
  torch::Tensor kv_of_query_;  // [kept] int64: K/V position per query head; undefined if 1:1
  torch::Tensor kept_index_;   // [kept] int64: original index per query head
  torch::Tensor rope_cos_;     // [max_len, head_dim / 2] (rope only)
  torch::Tensor rope_sin_;
  torch::Tensor alibi_slopes_;  // [kept, 1, 1] (alibi only)
  torch::Tensor gate_;
  FusedAttentionOptions fused_;  // the fast path's description of this layer
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear out_{nullptr};
  torch::nn::Dropout attn_dropout_{nullptr};
  torch::nn::Dropout out_dropout_{nullptr};
};
TORCH_MODULE(Attention);

// The ALiBi slopes of `heads` heads (Press et al. 2022): 2^(-8 i / n) for i = 1..n when n is a
// power of two; otherwise those of the closest smaller power of two followed by every other slope
// of twice that.
std::vector<double> AlibiSlopes(int64_t heads);

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
