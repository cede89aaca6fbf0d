#include "agent/train/layers.h"

#include <cmath>
#include <limits>

namespace tae::train {
namespace {

constexpr double kLayerNormEps = 1e-5;
constexpr double kRmsNormEps = 1e-6;
constexpr double kScaleNormEps = 1e-5;

bool IsGated(Activation activation) {
  return activation == Activation::kSwiGlu || activation == Activation::kGeGlu;
}

}  // namespace

NormImpl::NormImpl(NormKind kind, int64_t dim, bool bias) : kind_(kind), dim_(dim) {
  if (kind_ == NormKind::kNone) {
    return;
  }
  if (kind_ == NormKind::kScaleNorm) {
    weight_ = register_parameter("weight", torch::full({1}, std::sqrt(static_cast<double>(dim_))));
    return;
  }
  weight_ = register_parameter("weight", torch::ones({dim_}));
  if (kind_ == NormKind::kLayerNorm && bias) {
    bias_ = register_parameter("bias", torch::zeros({dim_}));
  }
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  switch (kind_) {
    case NormKind::kNone:
      return x;
    case NormKind::kLayerNorm:
      return torch::layer_norm(x, {dim_}, weight_, bias_, kLayerNormEps);
    case NormKind::kRmsNorm:
      return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kRmsNormEps) * weight_;
    case NormKind::kScaleNorm:
      return x * (weight_ / x.norm(2, -1, /*keepdim=*/true).clamp_min(kScaleNormEps));
  }
  return x;
}

AttentionImpl::AttentionImpl(const AttentionOptions& options) : options_(options) {
  const int64_t d = options_.d_model;
  const int64_t kv_width = options_.kv_heads * (d / options_.heads);
  qkv_ = register_module(
      "qkv", torch::nn::Linear(torch::nn::LinearOptions(d, d + 2 * kv_width).bias(options_.bias)));
  out_ =
      register_module("out", torch::nn::Linear(torch::nn::LinearOptions(d, d).bias(options_.bias)));
  attn_dropout_ = register_module("attn_dropout", torch::nn::Dropout(options_.dropout));
  out_dropout_ = register_module("out_dropout", torch::nn::Dropout(options_.dropout));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const int64_t heads = options_.heads;
  const int64_t kv_heads = options_.kv_heads;
  const int64_t head_dim = options_.d_model / heads;
  // [batch, time, (heads + 2*kv_heads) * head_dim] -> [batch, heads + 2*kv_heads, time, head_dim]
  torch::Tensor qkv =
      qkv_(x).view({batch, time, heads + 2 * kv_heads, head_dim}).permute({0, 2, 1, 3});
  torch::Tensor q = qkv.slice(1, 0, heads);
  torch::Tensor k = qkv.slice(1, heads, heads + kv_heads);
  torch::Tensor v = qkv.slice(1, heads + kv_heads, heads + 2 * kv_heads);
  if (kv_heads != heads) {  // query head h reads K/V head h / (heads / kv_heads)
    k = k.repeat_interleave(heads / kv_heads, 1);
    v = v.repeat_interleave(heads / kv_heads, 1);
  }
  torch::Tensor scores =
      torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
  if (options_.causal) {
    torch::Tensor future =
        torch::ones({time, time}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(scores, -1);
  if (options_.dropout > 0.0) {
    probs = attn_dropout_(probs);
  }
  torch::Tensor mixed =
      torch::matmul(probs, v).transpose(1, 2).reshape({batch, time, options_.d_model});
  torch::Tensor y = out_(mixed);
  return options_.dropout > 0.0 ? out_dropout_(y) : y;
}

FeedForwardImpl::FeedForwardImpl(const ModelConfig& config) : activation_(config.activation) {
  const int64_t d = config.d_model;
  const int64_t d_ff = config.ffn_mult * d;  // not scaled for gated activations (see layers.h)
  if (IsGated(activation_)) {
    gate_ = register_module("gate",
                            torch::nn::Linear(torch::nn::LinearOptions(d, d_ff).bias(config.bias)));
  }
  up_ =
      register_module("up", torch::nn::Linear(torch::nn::LinearOptions(d, d_ff).bias(config.bias)));
  down_ = register_module("down",
                          torch::nn::Linear(torch::nn::LinearOptions(d_ff, d).bias(config.bias)));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = up_(x);
  switch (activation_) {
    case Activation::kRelu:
      h = torch::relu(h);
      break;
    case Activation::kGelu:
      h = torch::gelu(h);
      break;
    case Activation::kSwiGlu:
      h = torch::silu(gate_(x)) * h;
      break;
    case Activation::kGeGlu:
      h = torch::gelu(gate_(x)) * h;
      break;
  }
  h = down_(h);
  return dropout_->options.p() > 0.0 ? dropout_(h) : h;
}

}  // namespace tae::train
