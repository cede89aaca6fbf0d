#pragma once

// A decoder-only Transformer LM whose every component is a knob (docs/design.md §6): token
// embedding, positional encoding none|sinusoidal|learned, pre-/post-/sandwich-norm blocks whose
// attention / FFN sublayers can be removed per layer (no parameters are created for a removed
// sublayer, including its norms), residual adds on/off, final norm (except with post-norm, whose
// blocks already end in a norm), LM head tied to the embedding or separate.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/layers.h"

namespace tae::train {

// One block of an attention sublayer then an FFN sublayer f (either may be absent), each wrapped
// according to model.norm_position (without residual, drop the "x +"):
//   pre:      x + f(Norm(x))
//   post:     Norm(x + f(x))
//   sandwich: x + Norm2(f(Norm1(x)))   (two norms per sublayer)
class BlockImpl : public torch::nn::Module {
 public:
  // Block `layer` (0-based) of `config`, for sequences of at most `max_len` positions.
  BlockImpl(const ModelConfig& config, int64_t layer, int64_t max_len);
  torch::Tensor forward(torch::Tensor x);

  // The attention sublayer, or an empty holder when the layer's attention is removed.
  Attention& attention() { return attention_; }

 private:
  // One sublayer with its norms; `out_norm` is only defined for sandwich.
  torch::Tensor Sublayer(const torch::Tensor& x, Norm& in_norm, Norm& out_norm,
                         const std::function<torch::Tensor(const torch::Tensor&)>& f);

  bool residual_;
  NormPosition norm_position_;
  Norm attention_norm_{nullptr};
  Norm attention_out_norm_{nullptr};  // sandwich only
  Attention attention_{nullptr};
  Norm ffn_norm_{nullptr};
  Norm ffn_out_norm_{nullptr};  // sandwich only
  FeedForward ffn_{nullptr};
};
TORCH_MODULE(Block);

class TransformerLMImpl : public torch::nn::Module {
 public:
  // `vocab_size` tokens in and out; sequences of at most `max_len` positions.
  TransformerLMImpl(const ModelConfig& config, int64_t vocab_size, int64_t max_len);

  // tokens [batch, time] (int64) -> logits [batch, time, vocab_size].
  torch::Tensor forward(const torch::Tensor& tokens);

  // Number of trainable scalars (a tied head is counted once).
  int64_t ParameterCount() const;
  // ParameterCount() without the token embedding, the learned position embedding and an untied
  // output head (Kaplan et al. 2020's N).
  int64_t NonEmbeddingParameterCount() const;

  // Per-layer head gates (see AttentionImpl::SetHeadGate): gates[l] is a [heads] tensor or
  // undefined; layers past gates.size() and layers without attention are left ungated.
  void SetHeadGates(const std::vector<torch::Tensor>& gates);
  void ClearHeadGates() { SetHeadGates({}); }
  std::vector<Block>& blocks() { return blocks_; }

 private:
  void InitWeights();

  ModelConfig config_;
  int64_t max_len_;
  torch::nn::Embedding token_embedding_{nullptr};
  torch::nn::Embedding position_embedding_{nullptr};  // learned positions only
  torch::Tensor sinusoid_table_;                      // sinusoidal positions only (a buffer)
  torch::nn::Dropout embedding_dropout_{nullptr};
  std::vector<Block> blocks_;
  Norm final_norm_{nullptr};         // absent with post-norm
  torch::nn::Linear head_{nullptr};  // untied head only
};
TORCH_MODULE(TransformerLM);

// Analytic forward FLOPs per token (multiply-adds count 2) of `config` with `vocab_size` outputs
// at context `seq_len`, as docs/engine.md derives it: every weight matrix in use (the fused QKV of
// the kept heads and their K/V heads, the output projection, the FFN's 2 or 3 matrices, the LM
// head) costs 2 * rows * cols, and attention's scores and weighted values cost
// 2 * 2 * seq_len * kept_heads * head_dim per layer (the full T x T product is computed; the
// causal mask does not halve it). Embedding lookups, norms, softmax and biases are not counted.
// Training costs about 3x this (backward = 2x forward).
double ForwardFlopsPerToken(const ModelConfig& config, int64_t vocab_size, int64_t seq_len);

// The [max_len, d_model] table of the original Transformer's sinusoidal encoding.
torch::Tensor SinusoidTable(int64_t max_len, int64_t d_model);

}  // namespace tae::train
