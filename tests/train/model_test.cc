#include "agent/train/model.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/config.h"
#include "tests/train/rounding.h"

namespace tae::train {
namespace {

constexpr int64_t kVocab = 18;
constexpr int64_t kMaxLen = 16;

ModelConfig SmallConfig() {
  ModelConfig config = DefaultTrainConfig().model;
  config.layers = 2;
  config.d_model = 32;
  config.heads = 4;
  config.ffn_mult = 4;
  return config;
}

int64_t Params(const ModelConfig& config) {
  return TransformerLM(config, kVocab, kMaxLen)->ParameterCount();
}

TEST_CASE("parameter count matches the architecture", "[model]") {
  ModelConfig config = SmallConfig();
  config.tie_embeddings = true;  // the head is the token embedding
  const int64_t d = config.d_model;
  const int64_t d_ff = config.ffn_mult * d;
  const int64_t norm = 2 * d;  // layernorm gain + bias
  const int64_t attention = norm + (d * 3 * d + 3 * d) + (d * d + d);
  const int64_t ffn = norm + (d * d_ff + d_ff) + (d_ff * d + d);
  const int64_t embeddings = kVocab * d + kMaxLen * d;  // tokens + learned positions
  CHECK(Params(config) == embeddings + config.layers * (attention + ffn) + norm);
}

TEST_CASE("dropping attention layers removes exactly their parameters", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t attention = 2 * d + (3 * d * d + 3 * d) + (d * d + d);
  const int64_t full = Params(config);
  config.drop_attention_layers = {0};
  CHECK(Params(config) == full - attention);
  config.drop_attention_layers = {0, 1};
  CHECK(Params(config) == full - 2 * attention);
  config.drop_attention_layers = {};
  config.drop_ffn_layers = {1};
  CHECK(Params(config) == full - (2 * d + 8 * d * d + 4 * d + d));
}

TEST_CASE("untying the embeddings adds one vocab x d_model head", "[model]") {
  ModelConfig config = SmallConfig();
  config.tie_embeddings = true;
  const int64_t tied = Params(config);
  config.tie_embeddings = false;
  CHECK(Params(config) == tied + kVocab * config.d_model);
}

TEST_CASE("bias, norm and position knobs change the parameter count as documented", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t full = Params(config);
  config.pos_encoding = PosEncoding::kSinusoidal;  // a buffer, not parameters
  CHECK(Params(config) == full - kMaxLen * d);
  config.pos_encoding = PosEncoding::kNone;
  CHECK(Params(config) == full - kMaxLen * d);
  config = SmallConfig();
  config.norm = NormKind::kRmsNorm;  // gain only: 5 norms lose their bias
  CHECK(Params(config) == full - 5 * d);
  config.norm = NormKind::kNone;
  CHECK(Params(config) == full - 5 * 2 * d);
}

torch::Tensor Logits(TransformerLM& model, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  model->eval();
  return model->forward(tokens);
}

TEST_CASE("the causal mask hides the future", "[model]") {
  torch::manual_seed(1);
  for (PosEncoding pos : {PosEncoding::kLearned, PosEncoding::kSinusoidal, PosEncoding::kNone}) {
    ModelConfig config = SmallConfig();
    config.pos_encoding = pos;
    TransformerLM model(config, kVocab, kMaxLen);
    torch::Tensor tokens = torch::randint(kVocab, {2, kMaxLen}, torch::kLong);
    torch::Tensor changed = tokens.clone();
    const int64_t t = 9;
    changed.slice(1, t + 1, kMaxLen).fill_(0);
    tokens.slice(1, t + 1, kMaxLen).fill_(kVocab - 1);
    torch::Tensor a = Logits(model, tokens);
    torch::Tensor b = Logits(model, changed);
    CHECK(torch::allclose(a.slice(1, 0, t + 1), b.slice(1, 0, t + 1), 1e-5, 1e-6));
    CHECK_FALSE(torch::allclose(a.slice(1, t + 1, kMaxLen), b.slice(1, t + 1, kMaxLen)));
  }
}

TEST_CASE("a bidirectional model sees the future", "[model]") {
  torch::manual_seed(2);
  ModelConfig config = SmallConfig();
  config.causal = false;
  TransformerLM model(config, kVocab, kMaxLen);
  torch::Tensor tokens = torch::randint(kVocab, {2, kMaxLen}, torch::kLong);
  torch::Tensor changed = tokens.clone();
  changed.select(1, kMaxLen - 1).fill_(0);
  tokens.select(1, kMaxLen - 1).fill_(kVocab - 1);
  CHECK_FALSE(
      torch::allclose(Logits(model, tokens).select(1, 0), Logits(model, changed).select(1, 0)));
}

TEST_CASE("every knob combination runs forward and backward", "[model]") {
  torch::manual_seed(3);
  ModelConfig config = SmallConfig();
  config.activation = Activation::kRelu;
  config.norm = NormKind::kRmsNorm;
  config.residual = false;
  config.bias = false;
  config.tie_embeddings = false;
  config.dropout = 0.1;
  config.drop_ffn_layers = {0};
  TransformerLM model(config, kVocab, kMaxLen);
  torch::Tensor tokens = torch::randint(kVocab, {3, 7}, torch::kLong);
  torch::Tensor logits = model->forward(tokens);
  CHECK(logits.sizes() == torch::IntArrayRef({3, 7, kVocab}));
  logits.sum().backward();
  for (const torch::Tensor& p : model->parameters()) {
    REQUIRE(p.grad().defined());
  }
  CHECK_THROWS(model->forward(torch::zeros({1, kMaxLen + 1}, torch::kLong)));
}

TEST_CASE("rmsnorm normalises the root mean square", "[model]") {
  Norm norm(NormKind::kRmsNorm, 8, /*bias=*/true);
  torch::Tensor x = torch::arange(16, torch::kFloat).reshape({2, 8}) - 3.0;
  torch::Tensor y = norm(x);
  CHECK(torch::allclose(y.pow(2).mean(-1), torch::ones({2}), 1e-4, 1e-4));
  Norm identity(NormKind::kNone, 8, true);
  CHECK(torch::equal(identity(x), x));
  CHECK(identity->parameters().empty());
}

// --- gated FFN, scalenorm, norm position, grouped-query attention ---------------------------

TEST_CASE("gated activations add a third d_model x d_ff matrix (d_ff is not scaled)", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t d_ff = config.ffn_mult * d;
  const int64_t plain = Params(config);
  for (Activation gated : {Activation::kSwiGlu, Activation::kGeGlu}) {
    config.activation = gated;
    CHECK(Params(config) == plain + config.layers * (d * d_ff + d_ff));
    config.bias = false;
    const int64_t no_bias = Params(config);
    config.activation = Activation::kGelu;
    CHECK(no_bias == Params(config) + config.layers * d * d_ff);
    config.bias = true;
  }
}

TEST_CASE("swiglu and geglu compute down(act(gate(x)) * up(x))", "[model]") {
  torch::manual_seed(4);
  for (Activation gated : {Activation::kSwiGlu, Activation::kGeGlu}) {
    ModelConfig config = SmallConfig();
    config.activation = gated;
    FeedForward ffn(config);
    auto p = ffn->named_parameters();
    for (auto& named : p) {
      torch::NoGradGuard no_grad;
      named.value().normal_(0.0, 0.5);
    }
    torch::Tensor x = torch::randn({2, 5, config.d_model});
    // The formula in float64, with a bound on any float32 evaluation's rounding (rounding.h):
    // the layer's own float32 products, whichever sgemm runs them, must land within it.
    namespace r = rounding;
    const r::Bounded in = r::Exact(x);
    r::Bounded gate = r::Linear(in, p["gate.weight"], p["gate.bias"]);
    gate =
        gated == Activation::kSwiGlu
            ? r::Map(
                  gate, [](const torch::Tensor& v) { return torch::silu(v); }, r::kSiluLipschitz)
            : r::Map(
                  gate, [](const torch::Tensor& v) { return torch::gelu(v); }, r::kGeluLipschitz);
    const r::Bounded up = r::Linear(in, p["up.weight"], p["up.bias"]);
    const r::Bounded expected = r::Linear(r::Mul(gate, up), p["down.weight"], p["down.bias"]);
    torch::Tensor y = ffn(x);
    CHECK(y.sizes() == torch::IntArrayRef({2, 5, config.d_model}));
    std::string why;
    const bool within = r::Within(y, expected, &why);
    INFO(why);
    CHECK(within);
    // A formula with the activation on the other branch is far outside the bound.
    const r::Bounded swapped = r::Linear(
        r::Mul(r::Linear(in, p["gate.weight"], p["gate.bias"]),
               r::Map(
                   up, [](const torch::Tensor& v) { return torch::silu(v); }, r::kSiluLipschitz)),
        p["down.weight"], p["down.bias"]);
    CHECK_FALSE(r::Within(y, swapped, &why));
  }
}

TEST_CASE("scalenorm has one scalar gain sqrt(d) and rescales x to norm g", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t layernorm = Params(config);
  config.norm = NormKind::kScaleNorm;
  CHECK(Params(config) == layernorm - 5 * 2 * d + 5);  // 5 norms, each now 1 scalar

  Norm norm(NormKind::kScaleNorm, 8, /*bias=*/true);
  REQUIRE(norm->parameters().size() == 1);
  CHECK(norm->parameters()[0].numel() == 1);
  CHECK(norm->parameters()[0].item<float>() == Approx(std::sqrt(8.0)));
  torch::Tensor x = torch::arange(16, torch::kFloat).reshape({2, 8}) - 3.0;
  torch::Tensor y = norm(x);
  CHECK(torch::allclose(y.norm(2, -1), torch::full({2}, std::sqrt(8.0)), 1e-4, 1e-4));
  CHECK(torch::allclose(y / y.norm(2, -1, true), x / x.norm(2, -1, true), 1e-5, 1e-6));
  {
    torch::NoGradGuard no_grad;
    norm->parameters()[0].fill_(2.0);
  }
  CHECK(torch::allclose(norm(x).norm(2, -1), torch::full({2}, 2.0), 1e-4, 1e-4));
  CHECK_FALSE(norm(torch::zeros({1, 8})).isnan().any().item<bool>());
}

TEST_CASE("norm position: post drops the final norm, sandwich adds one per sublayer", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t norm = 2 * config.d_model;
  const int64_t pre = Params(config);
  config.norm_position = NormPosition::kPost;
  CHECK(Params(config) == pre - norm);
  config.norm_position = NormPosition::kSandwich;
  CHECK(Params(config) == pre + 2 * config.layers * norm);
  config.drop_ffn_layers = {1};  // a removed sublayer takes both of its norms with it
  config.norm_position = NormPosition::kPre;
  const int64_t pre_dropped = Params(config);
  config.norm_position = NormPosition::kSandwich;
  CHECK(Params(config) == pre_dropped + 3 * norm);
}

// Per-position mean and standard deviation of a block's output.
std::pair<float, float> OutputStats(const ModelConfig& config) {
  torch::manual_seed(5);
  Block block(config, /*has_attention=*/true, /*has_ffn=*/true);
  torch::NoGradGuard no_grad;
  for (auto& named : block->named_parameters()) {
    if (named.value().dim() >= 2) {
      named.value().normal_(0.0, 0.02);
    }
  }
  torch::Tensor y = block(3.0 * torch::randn({2, 6, config.d_model}) + 1.0);
  return {y.mean(-1).abs().max().item<float>(), y.std(-1, false).mean().item<float>()};
}

TEST_CASE("norm position decides where the block output is normalised", "[model]") {
  ModelConfig config = SmallConfig();
  config.norm_position = NormPosition::kPost;  // Norm(x + f(x)): mean 0, std 1
  auto [post_mean, post_std] = OutputStats(config);
  CHECK(post_mean < 1e-4);
  CHECK(post_std == Approx(1.0).margin(1e-2));
  config.norm_position = NormPosition::kPre;  // x + f(Norm(x)): the input's scale survives
  auto [pre_mean, pre_std] = OutputStats(config);
  CHECK(pre_mean > 0.5);
  CHECK(pre_std > 2.0);
  config.residual = false;  // f(Norm(x)) with 0.02-std weights: small, not normalised
  CHECK(OutputStats(config).second < 0.5);
  config.norm_position = NormPosition::kSandwich;  // Norm2(f(Norm1(x))): normalised
  auto [sandwich_mean, sandwich_std] = OutputStats(config);
  CHECK(sandwich_mean < 1e-4);
  CHECK(sandwich_std == Approx(1.0).margin(1e-2));
}

TEST_CASE("grouped-query attention shrinks K/V projections by heads / kv_heads", "[model]") {
  ModelConfig config = SmallConfig();
  const int64_t d = config.d_model;
  const int64_t kv_mha = 2 * (d * d + d);  // K and V projections (weights + biases) of MHA
  const int64_t mha = Params(config);
  for (int64_t kv_heads : {4, 2, 1}) {
    config.kv_heads = kv_heads;
    INFO("kv_heads = " << kv_heads);
    const int64_t kv_gqa = kv_mha * kv_heads / config.heads;
    CHECK(Params(config) == mha - config.layers * (kv_mha - kv_gqa));
    AttentionOptions options;
    options.d_model = d;
    options.heads = config.heads;
    options.kv_heads = kv_heads;
    Attention attention(options);
    int64_t count = 0;
    for (const torch::Tensor& p : attention->parameters()) {
      count += p.numel();
    }
    CHECK(count - 2 * (d * d + d) == kv_gqa);  // minus the Q and output projections
    torch::Tensor y = attention(torch::randn({3, 7, d}));
    CHECK(y.sizes() == torch::IntArrayRef({3, 7, d}));
  }
  config.kv_heads = 0;  // "= heads"
  CHECK(Params(config) == mha);
}

// Multi-head attention written from its formula in float64, with the bound on any float32
// evaluation: softmax(q k^T / sqrt(head_dim) + mask) v per head, then the output projection.
// `params` are an Attention's with as many K/V heads as query heads (qkv rows: Q, K, V).
rounding::Bounded ReferenceAttention(const torch::Tensor& x,
                                     const torch::OrderedDict<std::string, torch::Tensor>& params,
                                     int64_t heads, bool causal) {
  namespace r = rounding;
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const int64_t hd = x.size(2) / heads;
  const r::Bounded qkv = r::Linear(r::Exact(x), params["qkv.weight"], params["qkv.bias"]);
  auto part = [&](int64_t which) {  // [batch, heads, time, hd]
    auto pick = [&](const torch::Tensor& t) {
      return t.view({batch, time, 3, heads, hd}).select(2, which).permute({0, 2, 1, 3});
    };
    return r::Bounded{pick(qkv.value), pick(qkv.error)};
  };
  const r::Bounded q = r::Scale(part(0), 1.0 / std::sqrt(static_cast<double>(hd)));
  const r::Bounded k = part(1);
  r::Bounded scores = r::MatMul(q, {k.value.transpose(-1, -2), k.error.transpose(-1, -2)});
  if (causal) {
    const torch::Tensor future = torch::ones({time, time}, torch::kBool).triu(1);
    scores.value = scores.value.masked_fill(future, -std::numeric_limits<double>::infinity());
    scores.error = scores.error.masked_fill(future, 0.0);
  }
  const r::Bounded mixed = r::MatMul(r::Softmax(scores), part(2));
  auto merge = [&](const torch::Tensor& t) {
    return t.permute({0, 2, 1, 3}).reshape({batch, time, heads * hd});
  };
  return r::Linear({merge(mixed.value), merge(mixed.error)}, params["out.weight"],
                   params["out.bias"]);
}

TEST_CASE("grouped-query attention equals MHA with each K/V head repeated", "[model]") {
  torch::manual_seed(6);
  AttentionOptions options;
  options.d_model = 32;
  options.heads = 4;
  options.kv_heads = 2;
  const int64_t d = options.d_model;
  const int64_t hd = d / options.heads;
  const int64_t group = options.heads / options.kv_heads;
  Attention gqa(options);
  options.kv_heads = options.heads;
  Attention mha(options);
  torch::NoGradGuard no_grad;
  for (const char* name : {"qkv.weight", "qkv.bias", "out.weight", "out.bias"}) {
    torch::Tensor p = gqa->named_parameters()[name];
    p.normal_(0.0, 0.3);
    if (std::string(name).rfind("qkv", 0) != 0) {
      mha->named_parameters()[name].copy_(p);
      continue;
    }
    // rows: Q (heads*hd), K (kv_heads*hd), V (kv_heads*hd); K/V head g serves query heads
    // g*group .. g*group+group-1.
    torch::Tensor q = p.slice(0, 0, d);
    auto expand = [&](const torch::Tensor& rows) {  // [kv_heads*hd, ...] -> [heads*hd, ...]
      std::vector<int64_t> shape = rows.sizes().vec();
      shape[0] = d;
      return rows.reshape({-1, hd, rows.dim() == 1 ? 1 : d})
          .repeat_interleave(group, 0)
          .reshape(shape);
    };
    torch::Tensor k = expand(p.slice(0, d, d + 2 * hd));
    torch::Tensor v = expand(p.slice(0, d + 2 * hd, d + 4 * hd));
    mha->named_parameters()[name].copy_(torch::cat({q, k, v}, 0));
  }
  torch::Tensor x = torch::randn({2, 9, d});
  // Both against causal MHA written out in float64 from the MHA weights, each within the bound
  // on float32 rounding (rounding.h): equal maths, whatever kernels each path takes.
  const rounding::Bounded expected =
      ReferenceAttention(x, mha->named_parameters(), options.heads, /*causal=*/true);
  std::string why;
  const bool gqa_within = rounding::Within(gqa(x), expected, &why);
  INFO("gqa: " << why);
  CHECK(gqa_within);
  const bool mha_within = rounding::Within(mha(x), expected, &why);
  INFO("mha: " << why);
  CHECK(mha_within);
  // Without the causal mask it is another function, far outside the bound.
  CHECK_FALSE(rounding::Within(
      mha(x), ReferenceAttention(x, mha->named_parameters(), options.heads, /*causal=*/false),
      &why));
}

TEST_CASE("the new knobs keep the causal mask and train end to end", "[model]") {
  torch::manual_seed(7);
  for (NormPosition position : {NormPosition::kPre, NormPosition::kPost, NormPosition::kSandwich}) {
    ModelConfig config = SmallConfig();
    config.norm_position = position;
    config.kv_heads = 1;
    config.activation = Activation::kSwiGlu;
    config.norm = NormKind::kScaleNorm;
    TransformerLM model(config, kVocab, kMaxLen);
    torch::Tensor tokens = torch::randint(kVocab, {2, kMaxLen}, torch::kLong);
    torch::Tensor changed = tokens.clone();
    changed.slice(1, 9, kMaxLen).fill_(0);
    tokens.slice(1, 9, kMaxLen).fill_(kVocab - 1);
    CHECK(torch::allclose(Logits(model, tokens).slice(1, 0, 9),
                          Logits(model, changed).slice(1, 0, 9), 1e-5, 1e-6));
    model->train();
    torch::Tensor logits = model->forward(tokens);
    CHECK(logits.sizes() == torch::IntArrayRef({2, kMaxLen, kVocab}));
    logits.pow(2).sum().backward();
    for (const auto& named : model->named_parameters()) {
      INFO(named.key());
      REQUIRE(named.value().grad().defined());
    }
  }
}

}  // namespace
}  // namespace tae::train
