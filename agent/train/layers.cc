#include "agent/train/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "agent/train/kernels.h"

namespace tae::train {

namespace {
thread_local const LinearOverride* g_linear_override = nullptr;
}  // namespace

torch::Tensor LinearWeights(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  torch::Tensor y = FastLinear(x, weight, bias);
  return y.defined() ? y : torch::linear(x, weight, bias);
}

torch::Tensor Linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  if (g_linear_override != nullptr) {
    torch::Tensor y = g_linear_override->Apply(x, layer->weight);
    if (y.defined()) {
      return layer->bias.defined() ? y + layer->bias : y;
    }
  }
  return LinearWeights(x, layer->weight, layer->bias);
}

ScopedLinearOverride::ScopedLinearOverride(const LinearOverride* override)
    : previous_(g_linear_override) {
  g_linear_override = override;
}

ScopedLinearOverride::~ScopedLinearOverride() { g_linear_override = previous_; }
namespace {

constexpr double kLayerNormEps = 1e-5;
constexpr double kRmsNormEps = 1e-6;
constexpr double kScaleNormEps = 1e-5;
constexpr double kRopeBase = 10000.0;

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

std::vector<double> AlibiSlopes(int64_t heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> slopes;
    for (int64_t i = 1; i <= n; ++i) {
      slopes.push_back(std::pow(2.0, -8.0 * static_cast<double>(i) / static_cast<double>(n)));
    }
    return slopes;
  };
  int64_t closest = 1;
  while (closest * 2 <= heads) {
    closest *= 2;
  }
  std::vector<double> slopes = power_of_two_slopes(closest);
  std::vector<double> extra = power_of_two_slopes(2 * closest);
  for (size_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) {
    slopes.push_back(extra[i]);
  }
  return slopes;
}

AttentionImpl::AttentionImpl(const AttentionOptions& options) : options_(options) {
  if (options_.head_dim == 0) {
    options_.head_dim = options_.d_model / options_.heads;
  }
  const int64_t d = options_.d_model;
  const int64_t hd = options_.head_dim;
  const int64_t group = options_.heads / options_.kv_heads;
  kept_ = options_.kept_heads;
  if (kept_.empty()) {
    for (int64_t h = 0; h < options_.heads; ++h) {
      kept_.push_back(h);
    }
  }
  kept_kv_ = KvHeadsFor(kept_, group);
  std::vector<int64_t> kv_of_query;  // per kept query head, the position of its K/V head
  for (int64_t h : kept_) {
    kv_of_query.push_back(std::lower_bound(kept_kv_.begin(), kept_kv_.end(), h / group) -
                          kept_kv_.begin());
  }
  const auto n_q = static_cast<int64_t>(kept_.size());
  const auto n_kv = static_cast<int64_t>(kept_kv_.size());
  if (n_kv != n_q) {
    kv_of_query_ = torch::tensor(kv_of_query, torch::kLong);
  }
  kept_index_ = torch::tensor(kept_, torch::kLong);
  qkv_ = register_module(
      "qkv",
      torch::nn::Linear(torch::nn::LinearOptions(d, (n_q + 2 * n_kv) * hd).bias(options_.bias)));
  out_ = register_module(
      "out", torch::nn::Linear(torch::nn::LinearOptions(n_q * hd, d).bias(options_.bias)));
  attn_dropout_ = register_module("attn_dropout", torch::nn::Dropout(options_.dropout));
  out_dropout_ = register_module("out_dropout", torch::nn::Dropout(options_.dropout));
  if (options_.pos_encoding == PosEncoding::kRope) {
    // theta_i = 10000^(-2i / head_dim), pairs (x_i, x_{i + hd/2}) rotated by position * theta_i.
    torch::Tensor inv_freq =
        torch::exp(torch::arange(0, hd / 2, torch::kDouble) * (-2.0 * std::log(kRopeBase) / hd));
    torch::Tensor angle = torch::outer(torch::arange(options_.max_len, torch::kDouble), inv_freq);
    rope_cos_ = register_buffer("rope_cos", torch::cos(angle).to(torch::kFloat));
    rope_sin_ = register_buffer("rope_sin", torch::sin(angle).to(torch::kFloat));
  } else if (options_.pos_encoding == PosEncoding::kAlibi) {
    std::vector<double> all = AlibiSlopes(options_.heads);
    std::vector<float> slopes;
    for (int64_t h : kept_) {
      slopes.push_back(static_cast<float>(all[static_cast<size_t>(h)]));
    }
    alibi_slopes_ = register_buffer("alibi_slopes", torch::tensor(slopes).view({n_q, 1, 1}));
    fused_.alibi_slopes = slopes;
  }
  fused_.heads = n_q;
  fused_.kv_heads = n_kv;
  fused_.kv_of_query = kv_of_query;
  fused_.causal = options_.causal;
  fused_.scale = 1.0 / std::sqrt(static_cast<double>(hd));
}

void AttentionImpl::SetHeadGate(torch::Tensor gate) { gate_ = std::move(gate); }

torch::Tensor AttentionImpl::Rotate(const torch::Tensor& x, int64_t time, int64_t time_dim) const {
  const int64_t half = options_.head_dim / 2;
  torch::Tensor cos = rope_cos_.slice(0, 0, time);  // [time, half]
  torch::Tensor sin = rope_sin_.slice(0, 0, time);
  if (time_dim == 1) {  // [batch, time, heads, head_dim]: broadcast over the heads
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
  }
  torch::Tensor x1 = x.slice(-1, 0, half);
  torch::Tensor x2 = x.slice(-1, half, 2 * half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

AttentionImpl::Projected AttentionImpl::Project(const torch::Tensor& x) const {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const auto n_q = static_cast<int64_t>(kept_.size());
  const auto n_kv = static_cast<int64_t>(kept_kv_.size());
  // [batch, time, (n_q + 2*n_kv) * hd] -> [batch, n_q + 2*n_kv, time, hd], split in one op (its
  // backward is one cat, where three slices would each zero-fill a full-size gradient).
  std::vector<torch::Tensor> qkv = Linear(x, qkv_)
                                       .view({batch, time, n_q + 2 * n_kv, options_.head_dim})
                                       .permute({0, 2, 1, 3})
                                       .split_with_sizes({n_q, n_kv, n_kv}, 1);
  Projected p{qkv[0], qkv[1], qkv[2]};
  if (options_.pos_encoding == PosEncoding::kRope) {
    p.q = Rotate(p.q, time, /*time_dim=*/2);
    p.k = Rotate(p.k, time, /*time_dim=*/2);
  }
  if (kv_of_query_.defined()) {  // query head i reads K/V head kv_of_query_[i]
    p.k = p.k.index_select(1, kv_of_query_);
    p.v = p.v.index_select(1, kv_of_query_);
  }
  return p;
}

namespace {

// The additive causal mask [time, time]: 0 on and below the diagonal, -inf above; zeros when not
// causal; in the scores' dtype (float32 in training; float64 where a test evaluates the model
// exactly). Cached per thread for the last shape and dtype: every layer and step of a run asks
// for the same one. Not a module buffer, so it is in no checkpoint.
const torch::Tensor& MaskBias(int64_t time, bool causal, torch::ScalarType dtype) {
  thread_local torch::Tensor cached[2];
  torch::Tensor& bias = cached[causal ? 1 : 0];
  if (!bias.defined() || bias.size(0) != time || bias.scalar_type() != dtype) {
    const auto options = torch::TensorOptions().dtype(dtype);
    bias =
        causal
            ? torch::full({time, time}, -std::numeric_limits<double>::infinity(), options).triu(1)
            : torch::zeros({time, time}, options);
  }
  return bias;
}

}  // namespace

// Scores as one batched matmul over [batch * heads] with the scale and the additive mask fused in
// (baddbmm: bias + scale * q k^T); ALiBi adds its per-head distance bias on top.
torch::Tensor AttentionImpl::Probabilities(const torch::Tensor& q, const torch::Tensor& k) const {
  const int64_t batch = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t time = q.size(2);
  const int64_t hd = options_.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  torch::Tensor scores =
      torch::baddbmm(MaskBias(time, options_.causal, q.scalar_type()),
                     q.reshape({batch * heads, time, hd}),
                     k.reshape({batch * heads, time, hd}).transpose(1, 2), /*beta=*/1.0,
                     /*alpha=*/scale)
          .view({batch, heads, time, time});
  if (alibi_slopes_.defined()) {
    torch::Tensor position = torch::arange(time, scores.options());
    torch::Tensor distance = (position.unsqueeze(1) - position.unsqueeze(0)).abs_();
    scores = scores - alibi_slopes_ * distance;
  }
  return torch::softmax(scores, -1);
}

torch::Tensor AttentionImpl::AttentionPattern(const torch::Tensor& x) const {
  Projected p = Project(x);
  return Probabilities(p.q, p.k);
}

// The fast path (kernels.h) computes the same maths as MixHeads when the fast kernels are there,
// on float32 CPU input, unless dropout on the probabilities is active (training with
// model.dropout > 0): that, evaluation of a model with dropout, and attention patterns
// (AttentionPattern) stay on libtorch's ops.
bool AttentionImpl::UseFusedAttention(const torch::Tensor& x) const {
  return FastKernelsEnabled() && x.scalar_type() == torch::kFloat && x.device().is_cpu() &&
         !(options_.dropout > 0.0 && is_training());
}

torch::Tensor AttentionImpl::PackedQkv(const torch::Tensor& x) const {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const auto n_q = static_cast<int64_t>(kept_.size());
  const auto n_kv = static_cast<int64_t>(kept_kv_.size());
  torch::Tensor qkv = Linear(x, qkv_).view({batch, time, n_q + 2 * n_kv, options_.head_dim});
  if (options_.pos_encoding == PosEncoding::kRope) {
    std::vector<torch::Tensor> parts = qkv.split_with_sizes({n_q, n_kv, n_kv}, 2);
    qkv = torch::cat({Rotate(parts[0], time, /*time_dim=*/1), Rotate(parts[1], time, 1), parts[2]},
                     2);
  }
  return qkv.contiguous();
}

torch::Tensor AttentionImpl::MixHeads(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const auto n_q = static_cast<int64_t>(kept_.size());
  const int64_t hd = options_.head_dim;
  Projected p = Project(x);
  torch::Tensor probs = Probabilities(p.q, p.k);
  if (options_.dropout > 0.0) {
    probs = attn_dropout_(probs);
  }
  return torch::bmm(probs.view({batch * n_q, time, time}), p.v.reshape({batch * n_q, time, hd}))
      .view({batch, n_q, time, hd})
      .transpose(1, 2);
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const auto n_q = static_cast<int64_t>(kept_.size());
  // [batch, time, kept heads, head_dim]
  torch::Tensor mixed = UseFusedAttention(x) ? FusedAttention(PackedQkv(x), fused_) : MixHeads(x);
  if (gate_.defined()) {
    mixed = mixed * gate_.index_select(0, kept_index_).view({1, 1, n_q, 1});
  }
  torch::Tensor y = Linear(mixed.reshape({batch, time, n_q * options_.head_dim}), out_);
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
  torch::Tensor h = Linear(x, up_);
  switch (activation_) {
    case Activation::kRelu:
      h = torch::relu(h);
      break;
    case Activation::kGelu:
      h = torch::gelu(h);
      break;
    case Activation::kSwiGlu:
      h = torch::silu(Linear(x, gate_)) * h;
      break;
    case Activation::kGeGlu:
      h = torch::gelu(Linear(x, gate_)) * h;
      break;
  }
  h = Linear(h, down_);
  return dropout_->options.p() > 0.0 ? dropout_(h) : h;
}

}  // namespace tae::train
