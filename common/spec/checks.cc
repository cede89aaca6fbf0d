#include "common/spec/checks.h"

#include "common/spec/text.h"

namespace tae::spec {
namespace {

using Result = std::optional<CrossProblem>;

Result CheckHeads(const nlohmann::json& config) {
  int64_t heads = config.at("model.heads").get<int64_t>();
  int64_t d_model = config.at("model.d_model").get<int64_t>();
  if (d_model % heads != 0) {
    return CrossProblem{Cat("model.heads: ", heads, " does not divide model.d_model ", d_model),
                        {"model.heads", "model.d_model"}};
  }
  return std::nullopt;
}

// model.kv_heads = 0 means "= model.heads" and always divides.
Result CheckKvHeads(const nlohmann::json& config) {
  int64_t kv_heads = config.at("model.kv_heads").get<int64_t>();
  int64_t heads = config.at("model.heads").get<int64_t>();
  if (kv_heads != 0 && heads % kv_heads != 0) {
    return CrossProblem{Cat("model.kv_heads: ", kv_heads, " does not divide model.heads ", heads),
                        {"model.kv_heads", "model.heads"}};
  }
  return std::nullopt;
}

Result CheckDroppedLayers(const nlohmann::json& config, std::string_view key) {
  int64_t layers = config.at("model.layers").get<int64_t>();
  for (const nlohmann::json& value : config.at(std::string(key))) {
    int64_t layer = value.get<int64_t>();
    if (layer >= layers) {
      return CrossProblem{
          Cat(key, ": layer ", layer, " does not exist (model.layers is ", layers, ")"),
          {key, "model.layers"}};
    }
  }
  return std::nullopt;
}

Result CheckWarmup(const nlohmann::json& config) {
  int64_t warmup = config.at("train.warmup").get<int64_t>();
  int64_t steps = config.at("train.steps").get<int64_t>();
  if (warmup > steps) {
    return CrossProblem{Cat("train.warmup: ", warmup, " is more than train.steps ", steps),
                        {"train.warmup", "train.steps"}};
  }
  return std::nullopt;
}

}  // namespace

std::optional<CrossProblem> CheckConfig(const nlohmann::json& config) {
  if (Result problem = CheckHeads(config)) {
    return problem;
  }
  if (Result problem = CheckKvHeads(config)) {
    return problem;
  }
  if (Result problem = CheckDroppedLayers(config, "model.drop_attention_layers")) {
    return problem;
  }
  if (Result problem = CheckDroppedLayers(config, "model.drop_ffn_layers")) {
    return problem;
  }
  return CheckWarmup(config);
}

}  // namespace tae::spec
