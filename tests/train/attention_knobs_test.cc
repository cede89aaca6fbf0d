// The attention knobs: prune_heads (really fewer parameters, same function as a masked head),
// head_dim, rope/alibi attention patterns, head gates, and the analytic FLOPs formula.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/layers.h"
#include "agent/train/model.h"
#include "tests/train/rounding.h"

namespace tae::train {
namespace {

using torch::indexing::Slice;

constexpr int64_t kVocab = 18;
constexpr int64_t kMaxLen = 16;

ModelConfig SmallConfig() {
  ModelConfig config = DefaultTrainConfig().model;
  config.layers = 2;
  config.d_model = 32;
  config.heads = 4;
  config.ffn_mult = 2;
  config.prune_heads.assign(2, {});
  return config;
}

int64_t Params(const ModelConfig& config) {
  return TransformerLM(config, kVocab, kMaxLen)->ParameterCount();
}

torch::Tensor Logits(TransformerLM& model, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  model->eval();
  return model->forward(tokens);
}

torch::Tensor Tokens() {
  torch::manual_seed(7);
  return torch::randint(kVocab, {3, kMaxLen}, torch::kLong);
}

// Copies `full`'s weights into `pruned` (built from the same config plus prune_heads): identical
// tensors by name, except layer `layer`'s QKV rows and output columns, which are gathered for the
// heads `pruned` kept.
void CopyIntoPruned(TransformerLM& full, TransformerLM& pruned, int64_t layer, int64_t head_dim) {
  torch::NoGradGuard no_grad;
  auto source = full->named_parameters();
  const std::string prefix = "block" + std::to_string(layer) + ".attention.";
  Attention& attention = pruned->blocks()[static_cast<size_t>(layer)]->attention();
  const std::vector<int64_t>& kept = attention->kept_heads();
  const std::vector<int64_t>& kept_kv = attention->kept_kv_heads();
  const int64_t heads =
      full->blocks()[static_cast<size_t>(layer)]->attention()->kept_heads().size();
  const int64_t kv_heads =
      full->blocks()[static_cast<size_t>(layer)]->attention()->kept_kv_heads().size();
  std::vector<int64_t> qkv_rows;
  std::vector<int64_t> out_columns;
  auto add_rows = [&](int64_t first_head, int64_t h) {
    for (int64_t i = 0; i < head_dim; ++i) {
      qkv_rows.push_back((first_head + h) * head_dim + i);
    }
  };
  for (int64_t h : kept) {
    add_rows(0, h);
    for (int64_t i = 0; i < head_dim; ++i) {
      out_columns.push_back(h * head_dim + i);
    }
  }
  for (int64_t g : kept_kv) {
    add_rows(heads, g);
  }
  for (int64_t g : kept_kv) {
    add_rows(heads + kv_heads, g);
  }
  const torch::Tensor rows = torch::tensor(qkv_rows, torch::kLong);
  const torch::Tensor columns = torch::tensor(out_columns, torch::kLong);
  for (auto& named : pruned->named_parameters()) {
    const torch::Tensor& from = source[named.key()];
    if (named.key() == prefix + "qkv.weight" || named.key() == prefix + "qkv.bias") {
      named.value().copy_(from.index_select(0, rows));
    } else if (named.key() == prefix + "out.weight") {
      named.value().copy_(from.index_select(1, columns));
    } else {
      named.value().copy_(from);
    }
  }
}

TEST_CASE("a pruned head owns no parameters: its Q rows, output columns and lone K/V go",
          "[model][prune]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t hd = d / config.heads;
  const int64_t full = Params(config);
  config.prune_heads[0] = {1};
  // Q, K, V rows (weights + biases) and the output projection's columns.
  CHECK(Params(config) == full - (3 * (hd * d + hd) + hd * d));
  config.prune_heads[1] = {0, 2};
  CHECK(Params(config) == full - 3 * (3 * (hd * d + hd) + hd * d));

  config = SmallConfig();
  config.kv_heads = 2;  // heads 0,1 share K/V head 0; heads 2,3 share K/V head 1
  const int64_t gqa = Params(config);
  config.prune_heads[0] = {0};  // K/V head 0 still serves head 1
  CHECK(Params(config) == gqa - ((hd * d + hd) + hd * d));
  config.prune_heads[0] = {0, 1};  // its whole group is gone, so is K/V head 0
  CHECK(Params(config) == gqa - (2 * (hd * d + hd) + 2 * hd * d + 2 * (hd * d + hd)));
}

TEST_CASE("a head removed with prune_heads computes what masking that head at evaluation does",
          "[model][prune]") {
  for (int64_t kv_heads : {4, 2}) {
    for (const std::vector<int64_t>& pruned_heads :
         std::vector<std::vector<int64_t>>{{1}, {0, 3}, {0, 1}}) {
      ModelConfig config = SmallConfig();
      config.kv_heads = kv_heads;
      torch::manual_seed(1);
      TransformerLM full(config, kVocab, kMaxLen);
      ModelConfig pruned_config = config;
      pruned_config.prune_heads[1] = pruned_heads;
      TransformerLM pruned(pruned_config, kVocab, kMaxLen);
      CopyIntoPruned(full, pruned, 1, config.d_model / config.heads);

      torch::Tensor gate = torch::ones({config.heads});
      for (int64_t h : pruned_heads) {
        gate[h] = 0.0;
      }
      // In float64: the two models multiply matrices of different widths, whose float32 sums
      // round differently by sgemm kernel; in float64 they agree to rounding (rounding.h).
      full->to(torch::kDouble);
      pruned->to(torch::kDouble);
      full->SetHeadGates({torch::Tensor(), gate.to(torch::kDouble)});
      const torch::Tensor masked = Logits(full, Tokens());
      const torch::Tensor removed = Logits(pruned, Tokens());
      INFO("kv_heads " << kv_heads << ", pruned " << pruned_heads.size() << " head(s)");
      REQUIRE(masked.scalar_type() == torch::kDouble);
      CHECK(rounding::SameInFloat64(masked, removed));
      full->ClearHeadGates();
      CHECK_FALSE(torch::allclose(Logits(full, Tokens()), removed, 1e-3, 1e-3));
    }
  }
}

TEST_CASE("head_dim sets the head width independently of d_model", "[model]") {
  ModelConfig config = SmallConfig();
  config.heads = 3;
  config.head_dim = 16;  // 3 * 16 = 48 != d_model 32
  const int64_t d = config.d_model;
  ModelConfig reference = SmallConfig();
  const int64_t per_layer_delta =
      (d * 3 * 48 + 3 * 48 + 48 * d + d) - (d * 3 * d + 3 * d + d * d + d);
  CHECK(Params(config) == Params(reference) + 2 * per_layer_delta);
  TransformerLM model(config, kVocab, kMaxLen);
  CHECK(Logits(model, Tokens()).sizes() == torch::IntArrayRef({3, kMaxLen, kVocab}));
}

TEST_CASE("ALiBi slopes follow Press et al.", "[model][alibi]") {
  std::vector<double> eight = AlibiSlopes(8);
  REQUIRE(eight.size() == 8);
  for (int i = 0; i < 8; ++i) {
    CHECK(eight[static_cast<size_t>(i)] == Approx(std::pow(2.0, -(i + 1))));
  }
  // 6 heads: the 4 slopes of n = 4, then every other slope of n = 8.
  std::vector<double> six = AlibiSlopes(6);
  std::vector<double> expected = {std::pow(2.0, -2), std::pow(2.0, -4), std::pow(2.0, -6),
                                  std::pow(2.0, -8), std::pow(2.0, -1), std::pow(2.0, -3)};
  REQUIRE(six.size() == expected.size());
  for (size_t i = 0; i < six.size(); ++i) {
    CHECK(six[i] == Approx(expected[i]));
  }
}

// Attention of one layer over a sequence of identical vectors: every q.k is the same, so the
// pattern is whatever the positional mechanism makes of it. In float64, where "the same" holds to
// float64 rounding whatever order a kernel sums each q.k in (rounding.h).
torch::Tensor PatternOfIdenticalTokens(PosEncoding pos_encoding) {
  AttentionOptions options;
  options.d_model = 16;
  options.heads = 2;
  options.kv_heads = 2;
  options.head_dim = 8;
  options.pos_encoding = pos_encoding;
  options.max_len = 8;
  torch::manual_seed(3);
  Attention attention(options);
  attention->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({1, 1, 16}, torch::kDouble).expand({1, 8, 16}).contiguous();
  return attention->AttentionPattern(x)[0];  // [heads, 8, 8]
}

TEST_CASE("none, rope and alibi give different attention patterns", "[model][positions]") {
  const torch::Tensor none = PatternOfIdenticalTokens(PosEncoding::kNone);
  const torch::Tensor rope = PatternOfIdenticalTokens(PosEncoding::kRope);
  const torch::Tensor alibi = PatternOfIdenticalTokens(PosEncoding::kAlibi);
  // none: uniform over the visible prefix.
  for (int64_t i = 0; i < 8; ++i) {
    CHECK(rounding::SameInFloat64(
        none.index({Slice(), i, Slice(0, i + 1)}),
        torch::full({2, i + 1}, 1.0 / static_cast<double>(i + 1), torch::kDouble)));
  }
  // alibi: softmax over j <= i of -slope_h * (i - j), exactly.
  const std::vector<double> slopes = AlibiSlopes(2);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 8; ++i) {
      torch::Tensor distance = i - torch::arange(i + 1, torch::kDouble);
      torch::Tensor expected = torch::softmax(-slopes[static_cast<size_t>(h)] * distance, 0);
      CHECK(rounding::SameInFloat64(alibi.index({h, i, Slice(0, i + 1)}), expected));
    }
  }
  // rope: q.k depends on the relative position, so the pattern is not uniform.
  CHECK_FALSE(torch::allclose(rope, none, 1e-3, 1e-3));
  CHECK_FALSE(torch::allclose(rope, alibi, 1e-3, 1e-3));
  // All three keep the causal mask.
  for (const torch::Tensor& pattern : {none, rope, alibi}) {
    CHECK(pattern.triu(1).abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("rope scores depend on relative position only", "[model][positions]") {
  AttentionOptions options;
  options.d_model = 16;
  options.heads = 2;
  options.kv_heads = 2;
  options.head_dim = 8;
  options.pos_encoding = PosEncoding::kRope;
  options.causal = false;
  options.max_len = 12;
  torch::manual_seed(4);
  Attention attention(options);
  // In float64: the rotations at the two places round differently in float32 (rounding.h).
  attention->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  // The same two tokens at distance 3, placed at positions (1, 4) and (6, 9) of a padded sequence
  // of one repeated filler: the filler contributes equally, the pair's mutual score is identical.
  torch::Tensor a = torch::randn({16}, torch::kDouble);
  torch::Tensor b = torch::randn({16}, torch::kDouble);
  auto pattern_with_pair_at = [&](int64_t first) {
    torch::Tensor x = torch::zeros({1, 12, 16}, torch::kDouble);
    x[0][first] = a;
    x[0][first + 3] = b;
    return attention->AttentionPattern(x)[0];
  };
  torch::Tensor early = pattern_with_pair_at(1);
  torch::Tensor late = pattern_with_pair_at(6);
  // Logit differences are shift-invariant: p(a->b) / p(a->a) is the same at both places.
  torch::Tensor early_ratio = early.index({Slice(), 1, 4}) / early.index({Slice(), 1, 1});
  torch::Tensor late_ratio = late.index({Slice(), 6, 9}) / late.index({Slice(), 6, 6});
  // The rope tables are float32 buffers, so the rotations at the two places are exact to 2^-24
  // only: each cos and sin is off by at most 2^-25 of itself, each rotated component by at most
  // 2^-25 (|x1| + |x2|), so each score by at most 2^-24 scale |q|_1 |k|_1 (q and k rotated). The
  // log-ratio is a difference of two scores at each place: within 4 times that, plus float64's
  // own rounding.
  const torch::Tensor qkv_weight = attention->named_parameters()["qkv.weight"];
  const torch::Tensor qkv_bias = attention->named_parameters()["qkv.bias"];
  const int64_t width = options.heads * options.head_dim;
  double worst_score = 0.0;
  for (const torch::Tensor& token : {a, b}) {
    const torch::Tensor projected = torch::matmul(qkv_weight, token) + qkv_bias;
    for (int64_t h = 0; h < options.heads; ++h) {
      const double q = projected.slice(0, h * options.head_dim, (h + 1) * options.head_dim)
                           .abs()
                           .sum()
                           .item<double>();
      for (const torch::Tensor& other : {a, b}) {
        const torch::Tensor k =
            (torch::matmul(qkv_weight, other) + qkv_bias)
                .slice(0, width + h * options.head_dim, width + (h + 1) * options.head_dim);
        worst_score = std::max(worst_score, q * k.abs().sum().item<double>() /
                                                std::sqrt(static_cast<double>(options.head_dim)));
      }
    }
  }
  const double relative = std::expm1(4.0 * 0x1p-24 * worst_score) + rounding::kFloat64Agreement;
  INFO("ratios " << early_ratio << " and " << late_ratio << ", relative bound " << relative);
  CHECK(((early_ratio - late_ratio).abs() <= relative * late_ratio.abs()).all().item<bool>());
  // A score that depended on absolute position would move the ratio by far more.
  const torch::Tensor shifted = early.index({Slice(), 1, 5}) / early.index({Slice(), 1, 1});
  CHECK_FALSE(((early_ratio - shifted).abs() <= relative * shifted.abs()).all().item<bool>());
}

TEST_CASE("head gates carry a gradient for kept heads only", "[model][heads]") {
  ModelConfig config = SmallConfig();
  config.prune_heads[0] = {2};
  torch::manual_seed(5);
  TransformerLM model(config, kVocab, kMaxLen);
  std::vector<torch::Tensor> gates = {torch::ones({4}, torch::requires_grad()),
                                      torch::ones({4}, torch::requires_grad())};
  model->SetHeadGates(gates);
  model->forward(Tokens()).pow(2).mean().backward();
  REQUIRE(gates[0].grad().defined());
  CHECK(gates[0].grad()[2].item<float>() == 0.0f);  // pruned: not in the model
  for (int64_t h : {0, 1, 3}) {
    CHECK(gates[0].grad()[h].item<float>() != 0.0f);
  }
  CHECK(gates[1].grad().abs().min().item<float>() > 0.0f);
}

// FLOPs counted from the built model: 2 per weight of every Linear, the tied head, and attention's
// two T x T products per kept head.
double CountedFlops(TransformerLM& model, const ModelConfig& config, int64_t seq_len) {
  double flops = 0.0;
  for (auto& named : model->named_parameters()) {
    const std::string& name = named.key();
    if (named.value().dim() == 2 && name.find("embedding") == std::string::npos) {
      flops += 2.0 * static_cast<double>(named.value().numel());
    }
  }
  if (config.tie_embeddings) {
    flops += 2.0 * static_cast<double>(config.d_model * kVocab);
  }
  for (Block& block : model->blocks()) {
    if (!block->attention().is_empty()) {
      flops += 4.0 * static_cast<double>(seq_len) *
               static_cast<double>(block->attention()->kept_heads().size()) *
               static_cast<double>(HeadDim(config));
    }
  }
  return flops;
}

TEST_CASE("the analytic FLOPs formula matches the weights the model really has", "[model][flops]") {
  std::vector<ModelConfig> configs;
  configs.push_back(SmallConfig());
  ModelConfig c = SmallConfig();
  c.kv_heads = 2;
  c.prune_heads[1] = {0, 1, 3};
  configs.push_back(c);
  c = SmallConfig();
  c.activation = Activation::kSwiGlu;
  c.drop_attention_layers = {0};
  c.tie_embeddings = false;
  configs.push_back(c);
  c = SmallConfig();
  c.heads = 3;
  c.head_dim = 12;
  c.drop_ffn_layers = {1};
  configs.push_back(c);
  for (const ModelConfig& config : configs) {
    TransformerLM model(config, kVocab, kMaxLen);
    CHECK(ForwardFlopsPerToken(config, kVocab, kMaxLen) ==
          Approx(CountedFlops(model, config, kMaxLen)));
  }
  // Worked example (docs/engine.md): d 32, 4 heads, ffn_mult 2, 2 layers, vocab 18, T 16:
  // per layer 2*32*96 + 4*16*32 + 2*32*32 + 2*2*32*64 = 6144 + 2048 + 2048 + 8192; head 1152.
  CHECK(ForwardFlopsPerToken(SmallConfig(), kVocab, kMaxLen) == 2 * 18432.0 + 1152.0);
}

TEST_CASE("non-embedding parameters leave out token and position embeddings and the head",
          "[model]") {
  ModelConfig config = SmallConfig();
  config.tie_embeddings = true;
  TransformerLM model(config, kVocab, kMaxLen);
  CHECK(model->NonEmbeddingParameterCount() ==
        model->ParameterCount() - kVocab * config.d_model - kMaxLen * config.d_model);
  config.tie_embeddings = false;
  config.pos_encoding = PosEncoding::kRope;
  TransformerLM untied(config, kVocab, kMaxLen);
  CHECK(untied->NonEmbeddingParameterCount() ==
        untied->ParameterCount() - 2 * kVocab * config.d_model);
}

}  // namespace
}  // namespace tae::train
