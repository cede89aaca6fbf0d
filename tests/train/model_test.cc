#include "agent/train/model.h"

#include <catch2/catch.hpp>
#include <cstdint>

#include "agent/train/config.h"

namespace tae::train {
namespace {

constexpr int64_t kVocab = 18;
constexpr int64_t kMaxLen = 16;

ModelConfig SmallConfig() {
  ModelConfig config;
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
  const ModelConfig config = SmallConfig();
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

}  // namespace
}  // namespace tae::train
