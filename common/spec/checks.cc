#include "common/spec/checks.h"

#include <cstdint>
#include <string>

#include "common/spec/task_checks.h"
#include "common/spec/text.h"

namespace tae::spec {
namespace {

using Result = std::optional<CrossProblem>;

int64_t Int(const nlohmann::json& config, const char* key) { return config.at(key).get<int64_t>(); }

// With model.head_dim = 0 every head is d_model / heads wide, so heads must divide d_model.
Result CheckHeads(const nlohmann::json& config) {
  int64_t heads = Int(config, "model.heads");
  int64_t d_model = Int(config, "model.d_model");
  int64_t head_dim = Int(config, "model.head_dim");
  if (head_dim == 0 && d_model % heads != 0) {
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

// RoPE rotates pairs of dimensions within a head.
Result CheckRope(const nlohmann::json& config) {
  if (config.at("model.pos_encoding") != "rope") {
    return std::nullopt;
  }
  int64_t head_dim = Int(config, "model.head_dim");
  if (head_dim == 0) {
    head_dim = Int(config, "model.d_model") / Int(config, "model.heads");
  }
  if (head_dim % 2 != 0) {
    return CrossProblem{Cat("model.pos_encoding: rope needs an even head width, got ", head_dim,
                            " (set model.head_dim or change model.heads)"),
                        {"model.pos_encoding", "model.head_dim", "model.heads"}};
  }
  return std::nullopt;
}

bool Contains(const nlohmann::json& list, int64_t value) {
  for (const nlohmann::json& item : list) {
    if (item.get<int64_t>() == value) {
      return true;
    }
  }
  return false;
}

// Pruned layers and heads must exist, and a layer that keeps its attention keeps a head.
Result CheckPrunedHeads(const nlohmann::json& config) {
  constexpr std::string_view key = "model.prune_heads";
  int64_t layers = Int(config, "model.layers");
  int64_t heads = Int(config, "model.heads");
  for (const auto& [layer_text, pruned] : config.at(std::string(key)).items()) {
    int64_t layer = std::stoll(layer_text);
    if (layer >= layers) {
      return CrossProblem{
          Cat(key, ": layer ", layer, " does not exist (model.layers is ", layers, ")"),
          {key, "model.layers"}};
    }
    for (const nlohmann::json& head : pruned) {
      if (head.get<int64_t>() >= heads) {
        return CrossProblem{Cat(key, ": layer ", layer, ": head ", head.get<int64_t>(),
                                " does not exist (model.heads is ", heads, ")"),
                            {key, "model.heads"}};
      }
    }
    if (static_cast<int64_t>(pruned.size()) == heads &&
        !Contains(config.at("model.drop_attention_layers"), layer)) {
      return CrossProblem{Cat(key, ": layer ", layer, ": all ", heads,
                              " heads are pruned but the layer keeps its attention (add ", layer,
                              " to model.drop_attention_layers to remove the sublayer)"),
                          {key, "model.drop_attention_layers"}};
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
  if (Result problem = CheckRope(config)) {
    return problem;
  }
  if (Result problem = CheckPrunedHeads(config)) {
    return problem;
  }
  if (Result problem = CheckDroppedLayers(config, "model.drop_attention_layers")) {
    return problem;
  }
  if (Result problem = CheckDroppedLayers(config, "model.drop_ffn_layers")) {
    return problem;
  }
  if (Result problem = CheckTask(config)) {
    return problem;
  }
  return CheckWarmup(config);
}

}  // namespace tae::spec
