// Whatever `taectl submit` accepts, tae-train must accept too: otherwise a study passes
// validation and then fails on every run. Checked at the edges of every numeric range, and for
// the combinations of keys (spec::CheckConfig), which both refuse alike.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/model.h"
#include "common/spec/checks.h"
#include "common/spec/schema.h"

namespace tae::train {
namespace {

nlohmann::json RunConfig() {
  nlohmann::json config = spec::DefaultConfig();
  config.erase("name");
  config.erase("description");
  config.erase("train.seeds");
  config["train.seed"] = 0;
  return config;
}

// The extreme values of a key that the schema accepts (closed bounds only; open bounds are
// nudged inside).
std::vector<double> Edges(const spec::KeyInfo& key) {
  std::vector<double> out;
  for (auto [bound, open, inward] :
       {std::tuple{key.min, key.min_open, 1.0}, std::tuple{key.max, key.max_open, -1.0}}) {
    if (!std::isfinite(bound) || std::fabs(bound) > 1e12) {
      continue;
    }
    out.push_back(open ? bound + inward * (key.type == spec::ValueType::kInt ? 1 : 1e-9) : bound);
  }
  return out;
}

}  // namespace

TEST_CASE("the trainer accepts the default config the spec schema produces") {
  auto config = ParseTrainConfig(RunConfig());
  INFO(config.status().ToString());
  CHECK(config.ok());
}

// The initial weights tae-train builds for `spec` (seeded by its train.seed, as a run does).
std::vector<torch::Tensor> InitialWeights(const nlohmann::json& spec) {
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  torch::manual_seed(0);
  TransformerLM model(config->model, 19, 32);
  std::vector<torch::Tensor> weights;
  for (const torch::Tensor& p : model->parameters()) {
    weights.push_back(p.detach().clone());
  }
  return weights;
}

bool SameWeights(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) {
      return false;
    }
  }
  return true;
}

TEST_CASE("new runs start from the schema's init, runs stored without model.init from gpt2") {
  nlohmann::json fresh = RunConfig();
  REQUIRE(fresh["model.init"] == "torch");
  auto config = ParseTrainConfig(fresh);
  REQUIRE(config.ok());
  CHECK(config->model.init == InitScheme::kTorch);
  CHECK(DefaultTrainConfig().model.init == InitScheme::kTorch);

  // A run spec stored before model.init existed: every such run started from gpt2, and retried
  // from scratch (no checkpoint yet) it must start from gpt2 again, beside its other seeds.
  nlohmann::json stored = RunConfig();
  stored.erase("model.init");
  config = ParseTrainConfig(stored);
  REQUIRE(config.ok());
  CHECK(config->model.init == InitScheme::kGpt2);
  nlohmann::json gpt2 = RunConfig();
  gpt2["model.init"] = "gpt2";
  CHECK(SameWeights(InitialWeights(stored), InitialWeights(gpt2)));
  CHECK_FALSE(SameWeights(InitialWeights(stored), InitialWeights(fresh)));
  // Its checkpoints keep matching: the fingerprint is of the spec as stored, not of the default.
  CHECK(ConfigFingerprint(stored).find("model.init") == std::string::npos);
}

TEST_CASE("the trainer accepts every numeric key at the edges of the schema's range") {
  for (const spec::KeyInfo& key : spec::Schema()) {
    bool numeric = key.type == spec::ValueType::kInt || key.type == spec::ValueType::kFloat;
    if (!numeric || key.scope != spec::KeyScope::kRun || key.name.rfind("resources.", 0) == 0) {
      continue;
    }
    for (double edge : Edges(key)) {
      nlohmann::json config = RunConfig();
      std::string name(key.name);
      if (key.type == spec::ValueType::kInt) {
        config[name] = static_cast<int64_t>(edge);
      } else {
        config[name] = edge;
      }
      // warmup > steps is a combination both refuse: keep the other key out of its way.
      if (name == "train.warmup") {
        int64_t warmup = config[name].get<int64_t>();
        config["train.steps"] = std::max(config["train.steps"].get<int64_t>(), warmup);
      }
      if (name == "train.steps") {
        int64_t steps = config[name].get<int64_t>();
        config["train.warmup"] = std::min(config["train.warmup"].get<int64_t>(), steps);
      }
      if (name == "model.heads" || name == "model.d_model") {
        continue;  // tied by divisibility; covered by the spec's own cross-key checks
      }
      auto parsed = ParseTrainConfig(config);
      INFO(name << " = " << config[name].dump() << ": " << parsed.status().ToString());
      CHECK(parsed.ok());
    }
  }
}

TEST_CASE("tae-train refuses exactly the combinations submit refuses, naming the same key") {
  int refused = 0;
  for (int64_t heads : {1, 3, 4, 5}) {
    for (int64_t d_model : {12, 16, 30}) {
      for (int64_t head_dim : {0, 7, 8}) {
        for (int64_t kv_heads : {0, 2, 3}) {
          for (const char* pos_encoding : {"learned", "rope"}) {
            for (int64_t warmup : {500, 501}) {
              nlohmann::json config = RunConfig();
              config["model.heads"] = heads;
              config["model.d_model"] = d_model;
              config["model.head_dim"] = head_dim;
              config["model.kv_heads"] = kv_heads;
              config["model.pos_encoding"] = pos_encoding;
              config["train.warmup"] = warmup;
              std::optional<spec::CrossProblem> problem = spec::CheckConfig(config);
              absl::StatusOr<TrainConfig> parsed = ParseTrainConfig(config);
              INFO(config.dump() << ": " << parsed.status().ToString());
              REQUIRE(problem.has_value() == !parsed.ok());
              if (problem.has_value()) {
                // taed says "KEY: why", tae-train `run spec: key "KEY": why`.
                const std::string key(problem->keys.front());
                REQUIRE(problem->what.rfind(key + ": ", 0) == 0);
                CHECK("run spec: key \"" + key + "\": " + problem->what.substr(key.size() + 2) ==
                      std::string(parsed.status().message()));
                refused += 1;
              }
            }
          }
        }
      }
    }
  }
  CHECK(refused > 0);
}

}  // namespace tae::train
