#include "agent/train/config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/spec/run_spec.h"
#include "common/spec/schema.h"
#include "tests/train/spec_fixture.h"

namespace tae::train {
namespace {

using testing::DefaultSpec;

std::string ErrorOf(const nlohmann::json& spec) {
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  CHECK(message.find('\n') == std::string::npos);
  return message;
}

TEST_CASE("the default spec parses into the documented defaults", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["model.drop_attention_layers"] = {1, 0};
  spec["model.norm"] = "rmsnorm";
  spec["train.optimizer"] = "sgd";
  spec["train.lr"] = 1;  // an integer is a number too
  spec["train.seed"] = 7;
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(config->model.layers == 2);
  CHECK(config->model.d_model == 64);
  CHECK(config->model.norm == NormKind::kRmsNorm);
  CHECK(config->model.pos_encoding == PosEncoding::kLearned);
  CHECK(config->model.drop_attention_layers == std::vector<int64_t>{0, 1});
  CHECK(config->model.tie_embeddings);
  CHECK(config->train.task == TaskKind::kCopy);
  CHECK(config->train.optimizer == OptimizerKind::kSgd);
  CHECK(config->train.lr == 1.0);
  CHECK(config->train.schedule == Schedule::kCosine);
  CHECK(config->train.seed == 7u);
  CHECK(config->train.eval_batches == 8);
}

TEST_CASE("a missing key is an error naming it", "[config]") {
  for (const char* key : {"model.heads", "model.residual", "train.steps", "train.data"}) {
    nlohmann::json spec = DefaultSpec();
    spec.erase(key);
    const std::string message = ErrorOf(spec);
    CHECK(message.find(key) != std::string::npos);
    CHECK(message.find("missing") != std::string::npos);
  }
}

TEST_CASE("a bad enum value is an error naming the key and the choices", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["model.norm"] = "batchnorm";
  const std::string message = ErrorOf(spec);
  CHECK(message.find("model.norm") != std::string::npos);
  CHECK(message.find("layernorm|rmsnorm|scalenorm|none") != std::string::npos);
  CHECK(message.find("batchnorm") != std::string::npos);

  spec = DefaultSpec();
  spec["train.schedule"] = "step";
  CHECK(ErrorOf(spec).find("train.schedule") != std::string::npos);
}

TEST_CASE("wrongly typed and out-of-range values name the key", "[config]") {
  struct Case {
    const char* key;
    nlohmann::json value;
  };
  for (const Case& c :
       {Case{"model.layers", "2"}, Case{"model.layers", 2.5}, Case{"model.causal", 1},
        Case{"train.lr", "fast"}, Case{"train.lr", 0.0}, Case{"train.batch_size", 0},
        Case{"train.seed", -1}, Case{"model.dropout", 1.5},
        Case{"model.drop_ffn_layers", nlohmann::json::array({2})},
        Case{"model.drop_ffn_layers", "0"}, Case{"train.data", nullptr}}) {
    nlohmann::json spec = DefaultSpec();
    spec[c.key] = c.value;
    INFO(c.key << " = " << c.value.dump());
    CHECK(ErrorOf(spec).find(c.key) != std::string::npos);
  }
}

TEST_CASE("heads must divide d_model", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["model.heads"] = 5;
  CHECK(ErrorOf(spec) == "run spec: key \"model.heads\": 5 does not divide model.d_model 64");
}

TEST_CASE("warmup past the steps is refused naming train.warmup, as taed refuses it", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["train.steps"] = 40;
  spec["train.warmup"] = 41;
  CHECK(ErrorOf(spec) == "run spec: key \"train.warmup\": 41 is more than train.steps 40");
  spec["train.warmup"] = 40;
  CHECK(ParseTrainConfig(spec).ok());
}

TEST_CASE("a task its shape cannot fill is refused naming the key", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["train.task"] = "assoc_recall";
  spec["train.seq_len"] = 7;
  CHECK(ErrorOf(spec) ==
        "run spec: key \"train.seq_len\": task assoc_recall needs at least 8 positions (2 "
        "key-value pairs, SEP and 2 queries with their answers), got 7");
  spec["train.seq_len"] = 8;
  CHECK(ParseTrainConfig(spec).ok());
}

TEST_CASE("kv_heads, norm_position and the new enum values parse", "[config]") {
  nlohmann::json spec = DefaultSpec();
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(KvHeads(config->model) == 4);  // 0 = heads
  CHECK(config->model.norm_position == NormPosition::kPre);
  spec["model.kv_heads"] = 2;
  spec["model.norm_position"] = "sandwich";
  spec["model.activation"] = "swiglu";
  spec["model.norm"] = "scalenorm";
  config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(KvHeads(config->model) == 2);
  CHECK(config->model.norm_position == NormPosition::kSandwich);
  CHECK(config->model.activation == Activation::kSwiGlu);
  CHECK(config->model.norm == NormKind::kScaleNorm);
  spec["model.activation"] = "geglu";
  spec["model.norm_position"] = "post";
  config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(config->model.activation == Activation::kGeGlu);
  CHECK(config->model.norm_position == NormPosition::kPost);

  spec["model.kv_heads"] = 3;
  CHECK(ErrorOf(spec) == "run spec: key \"model.kv_heads\": 3 does not divide model.heads 4");
  spec["model.kv_heads"] = 8;
  CHECK(ErrorOf(spec).find("model.kv_heads") != std::string::npos);
  spec["model.kv_heads"] = -1;
  CHECK(ErrorOf(spec).find("model.kv_heads") != std::string::npos);
  spec = DefaultSpec();
  spec["model.norm_position"] = "middle";
  CHECK(ErrorOf(spec).find("pre|post|sandwich") != std::string::npos);
}

TEST_CASE("resources and foreign keys are ignored, unknown model/train keys are not", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["resources.hosts"] = 1;
  spec["name"] = "pos-encoding";
  CHECK(ParseTrainConfig(spec).ok());

  spec["train.seeds"] = {0, 1, 2};
  CHECK(ParseTrainConfig(spec).ok());

  spec = DefaultSpec();
  spec["model.layerz"] = 3;
  CHECK(ErrorOf(spec).find("model.layerz") != std::string::npos);
}

TEST_CASE("prune_heads parses per layer and refuses missing layers, heads and empty layers",
          "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["model.prune_heads"] = {{"1", {3, 0}}};
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  REQUIRE(config->model.prune_heads.size() == 2);
  CHECK(config->model.prune_heads[0].empty());
  CHECK(config->model.prune_heads[1] == std::vector<int64_t>{0, 3});
  CHECK(KeptHeads(config->model, 0) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(KeptHeads(config->model, 1) == std::vector<int64_t>{1, 2});

  spec["model.prune_heads"] = {{"2", {0}}};
  CHECK(ErrorOf(spec) ==
        "run spec: key \"model.prune_heads\": layer 2 does not exist (model.layers is 2)");
  spec["model.prune_heads"] = {{"0", {4}}};
  CHECK(ErrorOf(spec) ==
        "run spec: key \"model.prune_heads\": layer 0: head 4 does not exist (model.heads is 4)");
  spec["model.prune_heads"] = {{"0", {0, 1, 2, 3}}};
  CHECK(ErrorOf(spec) ==
        "run spec: key \"model.prune_heads\": layer 0: all 4 heads are pruned but the layer "
        "keeps its attention (add 0 to model.drop_attention_layers to remove the sublayer)");
  spec["model.drop_attention_layers"] = {0};
  config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(KeptHeads(config->model, 0).empty());
  spec["model.drop_ffn_layers"] = {1, 2};
  CHECK(ErrorOf(spec) ==
        "run spec: key \"model.drop_ffn_layers\": layer 2 does not exist (model.layers is 2)");
}

TEST_CASE("head_dim decouples head width from d_model, rope needs it even", "[config]") {
  nlohmann::json spec = DefaultSpec();
  spec["model.heads"] = 3;  // does not divide 64
  CHECK(ErrorOf(spec).find("model.heads") != std::string::npos);
  spec["model.head_dim"] = 16;
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(HeadDim(config->model) == 16);
  spec["model.pos_encoding"] = "rope";
  CHECK(ParseTrainConfig(spec).ok());
  spec["model.head_dim"] = 15;
  CHECK(ErrorOf(spec) ==
        "run spec: key \"model.pos_encoding\": rope needs an even head width, got 15 (set "
        "model.head_dim or change model.heads)");
}

TEST_CASE("LoadTrainConfig reports unreadable files and bad JSON", "[config]") {
  CHECK_FALSE(LoadTrainConfig("/nonexistent/run.json").ok());
  char path[] = "/tmp/tae_train_config_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << "{\"model.layers\": ";
  absl::StatusOr<TrainConfig> bad = LoadTrainConfig(path);
  CHECK_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("not valid JSON") != std::string::npos);
  std::ofstream(path) << DefaultSpec().dump();
  CHECK(LoadTrainConfig(path).ok());
  std::remove(path);
}

TEST_CASE("log_every, precision and sharding: optional, bf16 and fsdp only for the torch engine",
          "[config]") {
  nlohmann::json spec = DefaultSpec();
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(config->train.log_every == 10);
  CHECK(config->train.precision == Precision::kFp32);
  CHECK(config->train.sharding == Sharding::kNone);

  spec["train.log_every"] = 25;
  config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(config->train.log_every == 25);
  // It changes what is reported, not what is trained.
  CHECK(ConfigFingerprint(spec) == ConfigFingerprint(DefaultSpec()));

  spec["train.precision"] = "bf16";
  CHECK(ErrorOf(spec).find("train.precision") != std::string::npos);
  spec["train.precision"] = "fp32";
  spec["train.sharding"] = "fsdp";
  CHECK(ErrorOf(spec).find("train.sharding") != std::string::npos);

  spec["train.engine"] = "torch";
  spec["train.precision"] = "bf16";
  config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  CHECK(config->train.precision == Precision::kBf16);
  CHECK(config->train.sharding == Sharding::kFsdp);
}

TEST_CASE("values are checked by the schema: ranges, lists, listed twice", "[config]") {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* why;
  };
  const auto json = [](const char* text) { return nlohmann::json::parse(text); };
  for (const Case& c : {
           Case{"model.layers", json("65"), "must be 0..64, got 65"},
           Case{"train.lr", json("0.0"), "must be > 0 and <= 1000, got 0.0"},
           Case{"model.drop_attention_layers", json("[1, 1]"), "1 is listed twice"},
           Case{"model.drop_attention_layers", json("[-1]"),
                "entries must be integers >= 0, got -1"},
           Case{"model.prune_heads", json(R"({"x": [0]})"), "\"x\" is not a layer index"},
           Case{"model.prune_heads", json(R"({"0": [1, 1]})"), "layer 0: 1 is listed twice"},
           Case{"train.seed", json("9223372036854775808"), "must be >= 0, got"},
           Case{"train.profile_at", json("[0]"), "entries must be integers >= 1, got 0"},
           Case{"eval.prune_heads_by_importance", json("[1.0]"),
                "entries must be numbers > 0 and < 1"},
       }) {
    nlohmann::json spec = DefaultSpec();
    spec[c.key] = c.value;
    const std::string message = ErrorOf(spec);
    INFO(c.key << " = " << c.value.dump() << ": " << message);
    CHECK(message.find(std::string("key \"") + c.key + "\": ") != std::string::npos);
    CHECK(message.find(c.why) != std::string::npos);
  }
}

TEST_CASE("every value the schema allows for an enum key parses, and names round-trip",
          "[config]") {
  for (const spec::KeyInfo& key : spec::RunSpecKeys()) {
    if (key.type != spec::ValueType::kEnum) {
      continue;
    }
    for (const std::string& value : spec::AllowedValues(key)) {
      nlohmann::json spec = DefaultSpec();
      spec["train.engine"] = "torch";  // bf16 and fsdp are the torch engine's
      spec[std::string(key.name)] = value;
      absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
      INFO(key.name << " = " << value << ": " << config.status().ToString());
      REQUIRE(config.ok());
      if (key.name == "model.activation") {
        CHECK(ActivationName(config->model.activation) == value);
      } else if (key.name == "model.norm") {
        CHECK(NormName(config->model.norm) == value);
      } else if (key.name == "model.norm_position") {
        CHECK(NormPositionName(config->model.norm_position) == value);
      } else if (key.name == "model.pos_encoding") {
        CHECK(PosEncodingName(config->model.pos_encoding) == value);
      } else if (key.name == "model.init") {
        CHECK(InitSchemeName(config->model.init) == value);
      } else if (key.name == "train.task") {
        CHECK(TaskName(config->train.task) == value);
      } else if (key.name == "train.engine") {
        CHECK(EngineName(config->train.engine) == value);
      }
    }
  }
}

TEST_CASE("the default config is the schema's defaults, and keys added later may be absent",
          "[config]") {
  const TrainConfig defaults = DefaultTrainConfig();
  CHECK(defaults.model.layers == spec::DefaultRunSpec()["model.layers"].get<int64_t>());
  CHECK(defaults.model.init == InitScheme::kTorch);
  CHECK(KvHeads(defaults.model) == defaults.model.heads);
  CHECK(defaults.train.eval_every == spec::DefaultRunSpec()["train.eval_every"].get<int64_t>());

  // DefaultSpec() has none of the keys added later: each stands for its absent value.
  absl::StatusOr<TrainConfig> old = ParseTrainConfig(DefaultSpec());
  REQUIRE(old.ok());
  CHECK(old->model.init == InitScheme::kGpt2);
  CHECK(old->train.engine == Engine::kLibtorch);
  CHECK(old->train.profile_at.empty());
  CHECK(old->eval.quantize == Quantize::kNone);
}

TEST_CASE("the fingerprint keeps the keys on the training trajectory", "[config]") {
  nlohmann::json spec = DefaultSpec();
  const std::string base = ConfigFingerprint(spec);
  CHECK(base.find("\"model.layers\":2") != std::string::npos);
  CHECK(base.find("train.threads") == std::string::npos);
  CHECK(base.find("resources.") == std::string::npos);
  for (const char* off : {"train.threads", "train.eval_every", "train.checkpoint_every"}) {
    nlohmann::json changed = spec;
    changed[off] = 3;
    CHECK(ConfigFingerprint(changed) == base);
  }
  spec["train.lr"] = 0.01;
  CHECK(ConfigFingerprint(spec) != base);
}

}  // namespace
}  // namespace tae::train
