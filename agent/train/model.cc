#include "agent/train/model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tae::train {
namespace {

constexpr double kInitStd = 0.02;

bool Contains(const std::vector<int64_t>& list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

BlockImpl::BlockImpl(const ModelConfig& config, int64_t layer, int64_t max_len)
    : residual_(config.residual), norm_position_(config.norm_position) {
  const bool sandwich = norm_position_ == NormPosition::kSandwich;
  const bool has_attention = !Contains(config.drop_attention_layers, layer);
  const bool has_ffn = !Contains(config.drop_ffn_layers, layer);
  if (has_attention) {
    attention_norm_ =
        register_module("attention_norm", Norm(config.norm, config.d_model, config.bias));
    if (sandwich) {
      attention_out_norm_ =
          register_module("attention_out_norm", Norm(config.norm, config.d_model, config.bias));
    }
    AttentionOptions options;
    options.d_model = config.d_model;
    options.heads = config.heads;
    options.kv_heads = KvHeads(config);
    options.head_dim = HeadDim(config);
    options.kept_heads = KeptHeads(config, layer);
    options.pos_encoding = config.pos_encoding;
    options.max_len = max_len;
    options.causal = config.causal;
    options.bias = config.bias;
    options.dropout = config.dropout;
    attention_ = register_module("attention", Attention(options));
  }
  if (has_ffn) {
    ffn_norm_ = register_module("ffn_norm", Norm(config.norm, config.d_model, config.bias));
    if (sandwich) {
      ffn_out_norm_ =
          register_module("ffn_out_norm", Norm(config.norm, config.d_model, config.bias));
    }
    ffn_ = register_module("ffn", FeedForward(config));
  }
}

torch::Tensor BlockImpl::Sublayer(const torch::Tensor& x, Norm& in_norm, Norm& out_norm,
                                  const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  switch (norm_position_) {
    case NormPosition::kPre:
      break;
    case NormPosition::kPost: {
      torch::Tensor sum = residual_ ? x + f(x) : f(x);
      return in_norm->forward(sum);
    }
    case NormPosition::kSandwich: {
      torch::Tensor update = out_norm->forward(f(in_norm->forward(x)));
      return residual_ ? x + update : update;
    }
  }
  torch::Tensor update = f(in_norm->forward(x));
  return residual_ ? x + update : update;
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  if (!attention_.is_empty()) {
    x = Sublayer(x, attention_norm_, attention_out_norm_,
                 [this](const torch::Tensor& h) { return attention_->forward(h); });
  }
  if (!ffn_.is_empty()) {
    x = Sublayer(x, ffn_norm_, ffn_out_norm_,
                 [this](const torch::Tensor& h) { return ffn_->forward(h); });
  }
  return x;
}

TransformerLMImpl::TransformerLMImpl(const ModelConfig& config, int64_t vocab_size, int64_t max_len)
    : config_(config), max_len_(max_len) {
  token_embedding_ =
      register_module("token_embedding", torch::nn::Embedding(vocab_size, config.d_model));
  if (config.pos_encoding == PosEncoding::kLearned) {
    position_embedding_ =
        register_module("position_embedding", torch::nn::Embedding(max_len, config.d_model));
  } else if (config.pos_encoding == PosEncoding::kSinusoidal) {
    // Vaswani et al. add the table to embeddings scaled up by sqrt(d_model); with GPT-style
    // N(0, 0.02) embeddings the same ratio means scaling the table down by sqrt(d_model). At full
    // amplitude it drowned the tokens: the default copy run stayed at chance for 500 steps.
    sinusoid_table_ =
        register_buffer("sinusoid_table", SinusoidTable(max_len, config.d_model) /
                                              std::sqrt(static_cast<double>(config.d_model)));
  }
  embedding_dropout_ = register_module("embedding_dropout", torch::nn::Dropout(config.dropout));
  for (int64_t i = 0; i < config.layers; ++i) {
    blocks_.push_back(register_module("block" + std::to_string(i), Block(config, i, max_len)));
  }
  if (config.norm_position != NormPosition::kPost) {
    final_norm_ = register_module("final_norm", Norm(config.norm, config.d_model, config.bias));
  }
  if (!config.tie_embeddings) {
    head_ = register_module(
        "head",
        torch::nn::Linear(torch::nn::LinearOptions(config.d_model, vocab_size).bias(false)));
  }
  if (config.init == InitScheme::kGpt2) {
    InitWeights();
  }  // kTorch: the values the modules' constructors drew (PyTorch's defaults)
}

// GPT-2 style: N(0, 0.02) for matrices, zero biases, unit norm gains.
void TransformerLMImpl::InitWeights() {
  torch::NoGradGuard no_grad;
  for (auto& named : named_parameters()) {
    torch::Tensor& p = named.value();
    if (p.dim() >= 2) {
      p.copy_(torch::randn(p.sizes()) * kInitStd);
    } else if (named.key().size() >= 4 && named.key().substr(named.key().size() - 4) == "bias") {
      p.zero_();
    }
  }
}

torch::Tensor TransformerLMImpl::forward(const torch::Tensor& tokens) {
  const int64_t time = tokens.size(1);
  TORCH_CHECK(time <= max_len_, "sequence of ", time, " tokens exceeds max_len ", max_len_);
  torch::Tensor x = token_embedding_(tokens);
  if (config_.pos_encoding == PosEncoding::kLearned) {
    x = x + position_embedding_->weight.slice(0, 0, time);  // rows 0..time-1, no gather
  } else if (config_.pos_encoding == PosEncoding::kSinusoidal) {
    x = x + sinusoid_table_.slice(0, 0, time);
  }
  if (config_.dropout > 0.0) {
    x = embedding_dropout_(x);
  }
  for (Block& block : blocks_) {
    x = block(x);
  }
  if (!final_norm_.is_empty()) {
    x = final_norm_(x);
  }
  if (config_.tie_embeddings) {
    return LinearWeights(x, token_embedding_->weight, torch::Tensor());
  }
  return Linear(x, head_);
}

int64_t TransformerLMImpl::ParameterCount() const {
  int64_t count = 0;
  for (const torch::Tensor& p : parameters()) {
    count += p.numel();
  }
  return count;
}

int64_t TransformerLMImpl::NonEmbeddingParameterCount() const {
  int64_t count = ParameterCount() - token_embedding_->weight.numel();
  if (!position_embedding_.is_empty()) {
    count -= position_embedding_->weight.numel();
  }
  if (!head_.is_empty()) {
    count -= head_->weight.numel();
  }
  return count;
}

void TransformerLMImpl::SetHeadGates(const std::vector<torch::Tensor>& gates) {
  for (size_t l = 0; l < blocks_.size(); ++l) {
    Attention& attention = blocks_[l]->attention();
    if (!attention.is_empty()) {
      attention->SetHeadGate(l < gates.size() ? gates[l] : torch::Tensor());
    }
  }
}

double ForwardFlopsPerToken(const ModelConfig& config, int64_t vocab_size, int64_t seq_len) {
  const auto d = static_cast<double>(config.d_model);
  const auto hd = static_cast<double>(HeadDim(config));
  const double d_ff = static_cast<double>(config.ffn_mult) * d;
  const bool gated =
      config.activation == Activation::kSwiGlu || config.activation == Activation::kGeGlu;
  const int64_t group = config.heads / KvHeads(config);
  double flops = 2.0 * d * static_cast<double>(vocab_size);  // LM head
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    if (!Contains(config.drop_attention_layers, layer)) {
      const std::vector<int64_t> kept = KeptHeads(config, layer);
      const std::vector<int64_t> kv = KvHeadsFor(kept, group);
      const auto n_q = static_cast<double>(kept.size());
      const auto n_kv = static_cast<double>(kv.size());
      flops += 2.0 * d * (n_q + 2.0 * n_kv) * hd;                    // fused QKV
      flops += 2.0 * 2.0 * static_cast<double>(seq_len) * n_q * hd;  // scores and values
      flops += 2.0 * n_q * hd * d;                                   // output projection
    }
    if (!Contains(config.drop_ffn_layers, layer)) {
      flops += (gated ? 3.0 : 2.0) * 2.0 * d * d_ff;
    }
  }
  return flops;
}

torch::Tensor SinusoidTable(int64_t max_len, int64_t d_model) {
  torch::Tensor table = torch::zeros({max_len, d_model});
  torch::Tensor position = torch::arange(max_len, torch::kFloat).unsqueeze(1);
  torch::Tensor even = torch::arange(0, d_model, 2, torch::kFloat);
  torch::Tensor angle = position * torch::exp(even * (-std::log(10000.0) / d_model));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                   torch::sin(angle));
  const int64_t odd_count = d_model / 2;
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   torch::cos(angle.slice(1, 0, odd_count)));
  return table;
}

}  // namespace tae::train
