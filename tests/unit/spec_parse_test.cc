// Parsing and validation of the experiment file (common/spec): good files, and every class of
// bad file with its exact message.
#include "tests/unit/spec_parse.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/spec/schema.h"
#include "common/spec/spec.h"
#include "common/spec/value.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

TEST_CASE("a minimal file gets every default", "[spec]") {
  Spec spec = MustParse(R"(name = "minimal")");
  CHECK(spec.name == "minimal");
  CHECK(spec.description.empty());
  CHECK(spec.seeds == std::vector<int64_t>{0, 1, 2});
  CHECK(spec.ablations.empty());
  CHECK(spec.base == DefaultConfig());
  CHECK(spec.base.at("model.layers") == 2);
  CHECK(spec.base.at("model.norm") == "layernorm");
  CHECK(spec.base.at("train.lr").get<double>() == 3e-3);
  CHECK(spec.base.at("train.lr").is_number_float());
  CHECK(spec.base.at("model.drop_ffn_layers") == nlohmann::json::array());
  CHECK(spec.base.at("resources.labels") == nlohmann::json::object());
  CHECK_FALSE(spec.base.contains("train.seeds"));
  CHECK_FALSE(spec.base.contains("name"));
}

TEST_CASE("a full file is read into the baseline and the ablations", "[spec]") {
  Spec spec = MustParse(R"(
name = "pos-encoding"
description = "does order matter?"

[model]
layers = 4
d_model = 128
heads = 8
norm = "rmsnorm"
causal = false
drop_ffn_layers = [3, 1]
dropout = 0.1

[train]
task = "lm"
data = "kjv.txt"
lr = 1            # float keys take integers
weight_decay = 0.01
seeds = [7, 3]

[resources]
slots = 2
labels = { accelerator = "v4-8", slice = "a" }
priority = -5

[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"

[[ablation]]
name = "wide.ffn_2"
"model.ffn_mult" = 8
"train.lr" = 1e-3
)");
  CHECK(spec.name == "pos-encoding");
  CHECK(spec.description == "does order matter?");
  CHECK(spec.base.at("model.layers") == 4);
  CHECK(spec.base.at("model.norm") == "rmsnorm");
  CHECK(spec.base.at("model.causal") == false);
  CHECK(spec.base.at("model.drop_ffn_layers") == nlohmann::json({3, 1}));
  CHECK(spec.base.at("train.lr").is_number_float());
  CHECK(spec.base.at("train.lr").get<double>() == 1.0);
  CHECK(spec.base.at("train.task") == "lm");
  CHECK(spec.base.at("resources.labels") ==
        nlohmann::json({{"accelerator", "v4-8"}, {"slice", "a"}}));
  CHECK(spec.base.at("resources.priority") == -5);
  CHECK(spec.seeds == std::vector<int64_t>{7, 3});
  REQUIRE(spec.ablations.size() == 2);
  CHECK(spec.ablations[0].name == "no-pos");
  CHECK(spec.ablations[0].overrides == nlohmann::json({{"model.pos_encoding", "none"}}));
  CHECK(spec.ablations[1].name == "wide.ffn_2");
  CHECK(spec.ablations[1].overrides == nlohmann::json({{"model.ffn_mult", 8}, {"train.lr", 1e-3}}));
}

TEST_CASE("ablation overrides may also be written as nested or dotted tables", "[spec]") {
  Spec spec = MustParse(R"(
name = "x"
[[ablation]]
name = "a"
model.layers = 3
train = { lr = 0.5 }
"resources.labels" = { accelerator = "cpu" }
)");
  REQUIRE(spec.ablations.size() == 1);
  CHECK(spec.ablations[0].overrides ==
        nlohmann::json({{"model.layers", 3},
                        {"train.lr", 0.5},
                        {"resources.labels", {{"accelerator", "cpu"}}}}));
}

TEST_CASE("resources.hosts asks for a gang of hosts", "[spec]") {
  Spec spec = MustParse("name = \"x\"\n[resources]\nhosts = 2\n");
  CHECK(spec.base.at("resources.hosts") == 2);
  CHECK(MustParse("name = \"x\"", {"resources.hosts=2"}).base == spec.base);
}

TEST_CASE("resources.max_disk takes bytes or a size with its unit", "[spec]") {
  CHECK(MustParse("name = \"x\"").base.at("resources.max_disk") == 0);
  CHECK(
      MustParse("name = \"x\"\n[resources]\nmax_disk = \"20GB\"\n").base.at("resources.max_disk") ==
      int64_t{20'000'000'000});
  CHECK(MustParse("name = \"x\"\n[resources]\nmax_disk = \"1.5 GiB\"\n")
            .base.at("resources.max_disk") == int64_t{1'610'612'736});
  CHECK(MustParse("name = \"x\"\n[resources]\nmax_disk = 4096\n").base.at("resources.max_disk") ==
        4096);
  CHECK(MustParse("name = \"x\"", {"resources.max_disk=2MB"}).base.at("resources.max_disk") ==
        2'000'000);
  CHECK(MustParse("name = \"x\"", {"resources.max_disk=512"}).base.at("resources.max_disk") == 512);
  for (const char* bad : {"\"20 parsecs\"", "\"-1GB\"", "-5", "\"GB\"", "true"}) {
    INFO(bad);
    absl::StatusOr<Spec> spec =
        ParseSpec(std::string("name = \"x\"\n[resources]\nmax_disk = ") + bad + "\n", "x.toml", {});
    REQUIRE_FALSE(spec.ok());
    CHECK(std::string(spec.status().message()).find("x.toml:3:") == 0);
    CHECK(std::string(spec.status().message()).find("resources.max_disk") != std::string::npos);
  }
  CHECK(ParseByteSize("10 kib") == 10240);
  CHECK(ParseByteSize("1e3") == std::nullopt);
  CHECK(ParseByteSize("") == std::nullopt);
  CHECK(ParseByteSize("99999999999TB") == std::nullopt);
}

TEST_CASE("[job.metrics] and job.tensorboard: patterns checked, paths kept inside the run",
          "[spec]") {
  const std::string head = "name = \"x\"\n[job]\ncommand = \"sh run.sh\"\n";
  Spec spec = MustParse(head +
                        "tensorboard = \"logs/tb\"\n[job.metrics]\n"
                        "pattern = 'loss (?P<loss>\\S+)'\nnames = { loss = \"train/loss\" }\n");
  CHECK(spec.base.at("job.metrics.pattern") == nlohmann::json::array({"loss (?P<loss>\\S+)"}));
  CHECK(spec.base.at("job.metrics.names").at("loss") == "train/loss");
  CHECK(spec.base.at("job.metrics.stream") == "both");
  CHECK(spec.base.at("job.tensorboard") == "logs/tb");
  CHECK(MustParse(head + "tensorboard = \".\"\n").base.at("job.tensorboard") == ".");
  for (const char* bad : {"\"../up\"", "\"/abs\"", "\"a/../../b\""}) {
    INFO(bad);
    absl::StatusOr<Spec> refused = ParseSpec(head + "tensorboard = " + bad + "\n", "x.toml", {});
    REQUIRE_FALSE(refused.ok());
    CHECK(std::string(refused.status().message()).find("x.toml:4:") == 0);
    CHECK(std::string(refused.status().message()).find("inside the run directory") !=
          std::string::npos);
  }
  absl::StatusOr<Spec> stream =
      ParseSpec(head + "[job.metrics]\nstream = \"stdin\"\n", "x.toml", {});
  REQUIRE_FALSE(stream.ok());
  CHECK(std::string(stream.status().message()).find("x.toml:5:") == 0);
}

TEST_CASE("KnownKeys lists the whole schema", "[spec]") {
  std::vector<std::string> keys = KnownKeys();
  // 48 + [report] metrics and goal + train.profile_* and [eval] + train.log_every, precision,
  // sharding + resources.retry_on + report.floor + [search] (10) + resources.max_disk +
  // [job.metrics] (3) and job.tensorboard + report.correction
  CHECK(keys.size() == 79);
  CHECK(keys.front() == "name");
  CHECK(keys[1] == "description");
  for (const char* key :
       {"model.layers", "model.tie_embeddings", "model.init", "train.engine", "train.seeds",
        "train.threads", "resources.labels", "resources.priority", "report.metrics", "report.goal",
        "train.profile_at", "eval.prune_heads_by_importance", "eval.quantize", "resources.retry_on",
        "resources.max_disk"}) {
    CHECK(std::find(keys.begin(), keys.end(), key) != keys.end());
  }
  for (const KeyInfo& key : Schema()) {
    CHECK_FALSE(key.doc.empty());
  }
}

TEST_CASE("TOML syntax errors carry toml++'s description and position", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[model\n") ==
        "study.toml:2:7: Error while parsing table header: expected ']', saw '\\n'");
  CHECK(ErrorOf("name = \"x\"\nname = \"y\"\n") ==
        "study.toml:2:8: Error while parsing key-value pair: cannot redefine existing string "
        "'name'");
}

TEST_CASE("unknown keys and tables get a did-you-mean", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[model]\nlayres = 3\n") ==
        "study.toml:3:1: unknown key 'model.layres' (did you mean 'model.layers'?)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nlr = 0.1\n") ==
        "study.toml:3:1: unknown key 'model.lr' (did you mean 'train.lr'?)");
  CHECK(ErrorOf("name = \"x\"\n[model]\npos = \"none\"\n") ==
        "study.toml:3:1: unknown key 'model.pos' (did you mean 'model.pos_encoding'?)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nfrobnicate = 1\n") ==
        "study.toml:3:1: unknown key 'model.frobnicate'");
  CHECK(ErrorOf("nmae = \"x\"\n") == "study.toml:1:1: unknown key 'nmae' (did you mean 'name'?)");
  CHECK(ErrorOf("name = \"x\"\n[modle]\nlayers = 2\n") ==
        "study.toml:2:1: unknown table 'modle' (did you mean 'model'?)");
  CHECK(ErrorOf("name = \"x\"\nlr = 3\n") ==
        "study.toml:2:1: unknown key 'lr' (did you mean 'train.lr'?)");
  CHECK(ErrorOf("name = \"x\"\nmodle.layers = 3\n") ==
        "study.toml:2:1: unknown table 'modle' (did you mean 'model'?)");
  CHECK(ErrorOf("name = \"x\"\n[optimizer]\nlr = 2\n") ==
        "study.toml:2:1: unknown table 'optimizer'");
  CHECK(ErrorOf("name = \"x\"\n[resources.label]\na = \"b\"\n") ==
        "study.toml:2:1: unknown table 'resources.label' (did you mean 'resources.labels'?)");
}

TEST_CASE("a wrong type names the expected and the actual type", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[model]\nlayers = \"2\"\n") ==
        "study.toml:3:10: model.layers: expected an integer, got a string");
  CHECK(ErrorOf("name = \"x\"\n[model]\nlayers = 2.0\n") ==
        "study.toml:3:10: model.layers: expected an integer, got a float");
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = \"fast\"\n") ==
        "study.toml:3:6: train.lr: expected a number, got a string");
  CHECK(ErrorOf("name = \"x\"\n[model]\nresidual = 1\n") ==
        "study.toml:3:12: model.residual: expected a boolean, got an integer");
  CHECK(ErrorOf("name = \"x\"\n[model]\nnorm = false\n") ==
        "study.toml:3:8: model.norm: expected a string, got a boolean");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_ffn_layers = 1\n") ==
        "study.toml:3:19: model.drop_ffn_layers: expected an array of integers, got an integer");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_ffn_layers = [0, \"1\"]\n") ==
        "study.toml:3:23: model.drop_ffn_layers[1]: expected an integer, got a string");
  CHECK(ErrorOf("name = \"x\"\n[resources]\nlabels = \"cpu\"\n") ==
        "study.toml:3:10: resources.labels: expected a table of strings, got a string");
  CHECK(ErrorOf("name = \"x\"\n[resources]\nlabels = { accelerator = 4 }\n") ==
        "study.toml:3:26: resources.labels.accelerator: expected a string, got an integer");
  CHECK(
      ErrorOf("name = \"x\"\n[resources]\nlabels = { \"a b\" = \"c\" }\n") ==
      "study.toml:3:12: resources.labels: 'a b' is not a valid label name (use [A-Za-z0-9._/-]+)");
  CHECK(ErrorOf("name = \"x\"\nmodel = 3\n") ==
        "study.toml:2:9: model: expected a table, got an integer");
  CHECK(ErrorOf("name = 3\n") == "study.toml:1:8: name: expected a string, got an integer");
  CHECK(ErrorOf("name = \"x\"\ndescription = []\n") ==
        "study.toml:2:15: description: expected a string, got an array");
}

TEST_CASE("values out of range or not allowed list what is allowed", "[spec][errors]") {
  CHECK(
      ErrorOf("name = \"x\"\n[model]\nnorm = \"batchnorm\"\n") ==
      "study.toml:3:8: model.norm: 'batchnorm' is not one of layernorm, rmsnorm, scalenorm, none");
  CHECK(ErrorOf("name = \"x\"\n[train]\ntask = \"sorting\"\n") ==
        "study.toml:3:8: train.task: 'sorting' is not one of copy, reverse, sort, assoc_recall, "
        "induction, mod_add, lm");
  CHECK(ErrorOf("name = \"x\"\n[model]\nlayers = 65\n") ==
        "study.toml:3:10: model.layers: 65 is out of range (must be 0..64)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nheads = 0\n") ==
        "study.toml:3:9: model.heads: 0 is out of range (must be >= 1)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = 0\n") ==
        "study.toml:3:6: train.lr: 0 is out of range (must be > 0 and <= 1000)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = -1e-3\n") ==
        "study.toml:3:6: train.lr: -0.001 is out of range (must be > 0 and <= 1000)");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndropout = 1.0\n") ==
        "study.toml:3:11: model.dropout: 1 is out of range (must be >= 0 and <= 0.99)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = inf\n") ==
        "study.toml:3:6: train.lr: inf is not a finite number");
  CHECK(ErrorOf("name = \"x\"\n[train]\nsteps = 1_000_000_001\n") ==
        "study.toml:3:9: train.steps: 1000000001 is out of range (must be 1..1000000000)");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_attention_layers = [-1]\n") ==
        "study.toml:3:26: model.drop_attention_layers[0]: -1 is out of range (must be >= 0)");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_attention_layers = [1, 1]\n") ==
        "study.toml:3:29: model.drop_attention_layers[1]: 1 is listed twice");
}

TEST_CASE("[eval] compression keys and train.profile_at are checked where they are written",
          "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[eval]\nprune_heads_by_importance = [0.5, 1.0]\n") ==
        "study.toml:3:35: eval.prune_heads_by_importance[1]: 1 is out of range (must be > 0 and "
        "< 1)");
  CHECK(ErrorOf("name = \"x\"\n[eval]\nprune_heads_by_importance = [0.5, \"half\"]\n") ==
        "study.toml:3:35: eval.prune_heads_by_importance[1]: expected a number, got a string");
  CHECK(ErrorOf("name = \"x\"\n[eval]\nprune_heads_by_importance = [0.25, 0.25]\n") ==
        "study.toml:3:36: eval.prune_heads_by_importance[1]: 0.25 is listed twice");
  CHECK(ErrorOf("name = \"x\"\n[eval]\nquantize = \"int4\"\n") ==
        "study.toml:3:12: eval.quantize: 'int4' is not one of none, int8-dynamic");
  CHECK(ErrorOf("name = \"x\"\n[train]\nprofile_at = [0]\n") ==
        "study.toml:3:15: train.profile_at[0]: 0 is out of range (must be >= 1)");
}

TEST_CASE("train.seeds must be a non-empty list of unique seeds", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = []\n") ==
        "study.toml:3:9: train.seeds: must not be empty");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = [0, 1, 0]\n") ==
        "study.toml:3:16: train.seeds[2]: 0 is listed twice");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = [-1]\n") ==
        "study.toml:3:10: train.seeds[0]: -1 is out of range (must be >= 0)");
}

TEST_CASE("the experiment name is required and restricted", "[spec][errors]") {
  CHECK(ErrorOf("description = \"no name\"\n") == "study.toml:1:1: missing required key 'name'");
  CHECK(ErrorOf("name = \"\"\n") == "study.toml:1:8: name: must not be empty");
  CHECK(ErrorOf("name = \"my study\"\n") ==
        "study.toml:1:8: name: 'my study' is not a valid name (use [A-Za-z0-9._-]+)");
  CHECK(ErrorOf("name = \"..\"\n") ==
        "study.toml:1:8: name: '..' is not a valid name (use [A-Za-z0-9._-]+)");
}

TEST_CASE("ablations are checked", "[spec][errors]") {
  const std::string head = "name = \"x\"\n";
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"a\"\n\"model.norm\" = \"none\"\n"
                       "[[ablation]]\nname = \"a\"\n\"model.layers\" = 1\n") ==
        "study.toml:6:8: duplicate ablation name 'a' (first defined at 2:1)");
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"baseline\"\n\"model.layers\" = 1\n") ==
        "study.toml:3:8: ablation name 'baseline' is reserved for the implicit baseline variant");
  CHECK(ErrorOf(head + "[[ablation]]\n\"model.layers\" = 1\n") ==
        "study.toml:2:1: ablation #1: missing required key 'name'");
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"empty\"\n") ==
        "study.toml:2:1: ablation 'empty' has no overrides (add one such as \"model.norm\" = "
        "\"rmsnorm\")");
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"no pos\"\n\"model.layers\" = 1\n") ==
        "study.toml:3:8: ablation name: 'no pos' is not a valid name (use [A-Za-z0-9._-]+)");
  CHECK(ErrorOf(head + "ablation = [1]\n") ==
        "study.toml:2:13: ablation #1: expected a table, got an integer");
  CHECK(MustParse(head + "ablation = []\n").ablations.empty());
  CHECK(ErrorOf(head + "[ablation]\nname = \"a\"\n") ==
        "study.toml:2:1: ablation: expected an array of tables ([[ablation]]), got a table");
}

TEST_CASE("ablation overrides are checked like the baseline's keys", "[spec][errors]") {
  const std::string head = "name = \"x\"\n[[ablation]]\nname = \"a\"\n";
  CHECK(ErrorOf(head + "\"model.layres\" = 1\n") ==
        "study.toml:4:1: unknown key 'model.layres' (did you mean 'model.layers'?)");
  CHECK(ErrorOf(head + "layers = 1\n") ==
        "study.toml:4:1: unknown key 'layers' (did you mean 'model.layers'?)");
  CHECK(
      ErrorOf(head + "\"model.norm\" = \"batchnorm\"\n") ==
      "study.toml:4:16: model.norm: 'batchnorm' is not one of layernorm, rmsnorm, scalenorm, none");
  CHECK(ErrorOf(head + "\"model.layers\" = \"1\"\n") ==
        "study.toml:4:18: model.layers: expected an integer, got a string");
  CHECK(ErrorOf(head + "\"train.seeds\" = [1]\n") ==
        "study.toml:4:1: train.seeds cannot be overridden in an ablation (every variant runs "
        "once per seed)");
  CHECK(ErrorOf(head + "\"model.layers\" = 1\nmodel.layers = 3\n") ==
        "study.toml:5:7: duplicate override 'model.layers'");
  CHECK(ErrorOf(head + "\"resources.hosts\" = 0\n") ==
        "study.toml:4:21: resources.hosts: 0 is out of range (must be 1..256)");
}

TEST_CASE("cross-key checks point at the baseline key", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[model]\nheads = 3\n") ==
        "study.toml:3:9: model.heads: 3 does not divide model.d_model 64");
  CHECK(ErrorOf("name = \"x\"\n[model]\nd_model = 66\n") ==
        "study.toml:3:11: model.heads: 4 does not divide model.d_model 66");
  CHECK(ErrorOf("name = \"x\"\n[model]\nkv_heads = 3\n") ==
        "study.toml:3:12: model.kv_heads: 3 does not divide model.heads 4");
  CHECK(ErrorOf("name = \"x\"\n[model]\nkv_heads = 2\nheads = 1\nd_model = 8\n") ==
        "study.toml:3:12: model.kv_heads: 2 does not divide model.heads 1");  // tie: offender
  CHECK(MustParse("name = \"x\"\n[model]\nkv_heads = 2\n").base.at("model.kv_heads") == 2);
  CHECK(MustParse("name = \"x\"\n[model]\nheads = 8\n").base.at("model.kv_heads") == 0);
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_attention_layers = [0, 2]\n") ==
        "study.toml:3:25: model.drop_attention_layers: layer 2 does not exist (model.layers is 2)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nlayers = 0\ndrop_ffn_layers = [0]\n") ==
        "study.toml:4:19: model.drop_ffn_layers: layer 0 does not exist (model.layers is 0)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nsteps = 10\n") ==
        "study.toml:3:9: train.warmup: 50 is more than train.steps 10");
}

TEST_CASE("prune_heads, head_dim and rope are checked against the model at submit",
          "[spec][errors]") {
  CHECK(MustParse("name = \"x\"\n[model]\nheads = 3\nhead_dim = 16\n").base.at("model.heads") == 3);
  CHECK(ErrorOf("name = \"x\"\n[model]\npos_encoding = \"rope\"\nhead_dim = 7\n") ==
        "study.toml:3:16: model.pos_encoding: rope needs an even head width, got 7 (set "
        "model.head_dim or change model.heads)");
  CHECK(MustParse("name = \"x\"\n[model]\nprune_heads = { \"1\" = [0, 3] }\n")
            .base.at("model.prune_heads") == nlohmann::json{{"1", {0, 3}}});
  CHECK(ErrorOf("name = \"x\"\n[model]\nprune_heads = { \"2\" = [0] }\n") ==
        "study.toml:3:15: model.prune_heads: layer 2 does not exist (model.layers is 2)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nprune_heads = { \"0\" = [4] }\n") ==
        "study.toml:3:15: model.prune_heads: layer 0: head 4 does not exist (model.heads is 4)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nprune_heads = { \"0\" = [0, 1, 2, 3] }\n") ==
        "study.toml:3:15: model.prune_heads: layer 0: all 4 heads are pruned but the layer "
        "keeps its attention (add 0 to model.drop_attention_layers to remove the sublayer)");
  CHECK(ErrorOf("name = \"x\"\n[model]\nprune_heads = { \"x\" = [0] }\n") ==
        "study.toml:3:17: model.prune_heads: 'x' is not a layer index (write \"0\" = [1, 3])");
  CHECK(ErrorOf("name = \"x\"\n[model]\nprune_heads = { \"0\" = [1, 1] }\n") ==
        "study.toml:3:27: model.prune_heads.0[1]: 1 is listed twice");
  CHECK(MustParse("name = \"x\"\n[model]\nprune_heads = { \"0\" = [0, 1, 2, 3] }\n"
                  "drop_attention_layers = [0]\n")
            .base.at("model.prune_heads")
            .size() == 1);
}

TEST_CASE("cross-key checks run on every ablation and point inside it", "[spec][errors]") {
  const std::string head = "name = \"x\"\n[model]\ndrop_ffn_layers = [1]\n";
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"ok\"\n\"model.norm\" = \"none\"\n"
                       "[[ablation]]\nname = \"odd\"\n\"model.heads\" = 3\n") ==
        "study.toml:9:17: model.heads: 3 does not divide model.d_model 64");
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"wide\"\n\"model.d_model\" = 66\n") ==
        "study.toml:6:19: model.heads: 4 does not divide model.d_model 66");
  CHECK(ErrorOf(head + "[[ablation]]\nname = \"shallow\"\n\"model.layers\" = 1\n") ==
        "study.toml:6:18: model.drop_ffn_layers: layer 1 does not exist (model.layers is 1)");
}

TEST_CASE("the first error in file order is reported", "[spec][errors]") {
  // [model] sorts before [train] in toml++'s tables; the report follows the file.
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = \"a\"\n[model]\nlayers = \"b\"\n") ==
        "study.toml:3:6: train.lr: expected a number, got a string");
  CHECK(ErrorOf("name = \"x\"\n[train]\nlr = 0\nvocab = 1\n") ==
        "study.toml:3:6: train.lr: 0 is out of range (must be > 0 and <= 1000)");
}

TEST_CASE("overrides from --set replace baseline values", "[spec][set]") {
  Spec spec = MustParse(
      "name = \"x\"\n[model]\nlayers = 4\n",
      {"model.layers=6", "model.norm=rmsnorm", "train.lr=1e-3", "train.warmup=1",
       "model.drop_ffn_layers=[0, 5]", "resources.labels={accelerator=\"tpu\"}", "train.data=2024",
       "train.seeds=[5]", "name=renamed", " description = \"quoted text\" ", "model.causal=false"});
  CHECK(spec.base.at("model.layers") == 6);
  CHECK(spec.base.at("model.norm") == "rmsnorm");
  CHECK(spec.base.at("train.lr").get<double>() == 1e-3);
  CHECK(spec.base.at("model.drop_ffn_layers") == nlohmann::json({0, 5}));
  CHECK(spec.base.at("resources.labels") == nlohmann::json({{"accelerator", "tpu"}}));
  CHECK(spec.base.at("train.data") == "2024");
  CHECK(spec.base.at("model.causal") == false);
  CHECK(spec.seeds == std::vector<int64_t>{5});
  CHECK(spec.name == "renamed");
  CHECK(spec.description == "quoted text");
  CHECK(MustParse("name = \"x\"", {"train.lr=2"}).base.at("train.lr").is_number_float());
  CHECK(MustParse("", {"name=from-flag"}).name == "from-flag");
  CHECK(MustParse("name = \"x\"", {"model.layers=3", "model.layers=5"}).base.at("model.layers") ==
        5);
}

TEST_CASE("errors in --set values name the flag", "[spec][set][errors]") {
  const std::string text = "name = \"x\"\n";
  CHECK(ErrorOf(text, {"model.layers"}) ==
        "--set model.layers: expected KEY=VALUE, e.g. --set model.layers=4");
  CHECK(ErrorOf(text, {"=4"}) == "--set =4: expected KEY=VALUE, e.g. --set model.layers=4");
  CHECK(ErrorOf(text, {"model.layres=4"}) ==
        "--set model.layres=4: unknown key 'model.layres' (did you mean 'model.layers'?)");
  CHECK(ErrorOf(text, {"base.lr=1e-3"}) ==
        "--set base.lr=1e-3: unknown key 'base.lr' (did you mean 'train.lr'?)");
  CHECK(ErrorOf(text, {"model.layers=four"}) ==
        "--set model.layers=four: model.layers: expected an integer, got a string");
  CHECK(ErrorOf(text, {"model.layers=99"}) ==
        "--set model.layers=99: model.layers: 99 is out of range (must be 0..64)");
  CHECK(ErrorOf(text, {"model.norm=batchnorm"}) ==
        "--set model.norm=batchnorm: model.norm: 'batchnorm' is not one of layernorm, rmsnorm, "
        "scalenorm, none");
  CHECK(ErrorOf(text, {"train.seeds=[]"}) ==
        "--set train.seeds=[]: train.seeds: must not be empty");
  CHECK(ErrorOf(text, {"resources.hosts=300"}) ==
        "--set resources.hosts=300: resources.hosts: 300 is out of range (must be 1..256)");
  CHECK(ErrorOf(text, {"train.data=\xff"}) ==
        "--set train.data=\xff: the value is not valid UTF-8");
}

TEST_CASE("values from --set go through the cross-key checks", "[spec][set][errors]") {
  CHECK(ErrorOf("name = \"x\"\n", {"model.heads=3"}) ==
        "--set model.heads=3: model.heads: 3 does not divide model.d_model 64");
  CHECK(ErrorOf("name = \"x\"\n[model]\ndrop_ffn_layers = [1]\n", {"model.layers=1"}) ==
        "--set model.layers=1: model.drop_ffn_layers: layer 1 does not exist (model.layers is 1)");
  CHECK(ErrorOf("name = \"x\"\n[[ablation]]\nname = \"a\"\n\"model.drop_ffn_layers\" = [1]\n",
                {"model.layers=1"}) ==
        "study.toml:4:27: model.drop_ffn_layers: layer 1 does not exist (model.layers is 1)");
}

TEST_CASE("ParseSpecFile reads fixture files", "[spec][file]") {
  const std::string dir = std::string(TAE_TEST_DATA_DIR) + "/specs/";
  absl::StatusOr<Spec> good = ParseSpecFile(dir + "pos_encoding.toml", {});
  INFO(good.status().ToString());
  REQUIRE(good.ok());
  CHECK(good->name == "pos-encoding");
  CHECK(good->ablations.size() == 2);

  absl::StatusOr<Spec> bad = ParseSpecFile(dir + "bad_heads.toml", {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        dir + "bad_heads.toml:11:17: model.heads: 3 does not divide model.d_model 64");

  absl::StatusOr<Spec> missing = ParseSpecFile(dir + "does_not_exist.toml", {});
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("does_not_exist.toml: cannot open") !=
        std::string::npos);
}

TEST_CASE("[grid] axes are read in key order, quoted or nested", "[spec][grid]") {
  Spec spec = MustParse(
      "name = \"g\"\n[grid]\n\"model.layers\" = [1, 2, 4]\n[grid.train]\nlr = [1e-3, 3e-3]\n");
  REQUIRE(spec.grid.size() == 2);
  CHECK(spec.grid[0].key == "model.layers");
  CHECK(spec.grid[0].values == std::vector<nlohmann::json>{1, 2, 4});
  CHECK(spec.grid[1].key == "train.lr");
  CHECK(spec.grid[1].values == std::vector<nlohmann::json>{1e-3, 3e-3});
}

TEST_CASE("bad [grid] entries say where and why", "[spec][grid][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layers\" = 2\n") ==
        "study.toml:3:18: [grid] model.layers: expected an array of values, got an integer (write "
        "model.layers = [a, b])");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layers\" = []\n") ==
        "study.toml:3:18: [grid] model.layers: needs at least one value");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layers\" = [1, \"two\"]\n") ==
        "study.toml:3:22: model.layers: expected an integer, got a string");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layers\" = [1, 2, 1]\n") ==
        "study.toml:3:25: [grid] model.layers: value 1 is listed twice");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"train.seeds\" = [[0], [1]]\n") ==
        "study.toml:3:1: train.seeds cannot be varied in [grid] (every variant already runs once "
        "per seed)");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layer\" = [1]\n")
            .find("study.toml:3:1: unknown key 'model.layer'") == 0);
  CHECK(ErrorOf("name = \"x\"\n[grid]\n") ==
        "study.toml:2:1: [grid] is empty: give it at least one key = [values]");
}

TEST_CASE("an ablation may not set a key the grid varies, nor may --set", "[spec][grid][errors]") {
  const std::string text =
      "name = \"x\"\n[grid]\n\"model.layers\" = [1, 2]\n[[ablation]]\nname = \"deep\"\n"
      "\"model.layers\" = 6\n";
  CHECK(ErrorOf(text) ==
        "study.toml:6:1: ablation 'deep' sets model.layers, which [grid] varies (line 3); drop one "
        "of the two");
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.layers\" = [1, 2]\n", {"model.layers=3"}) ==
        "--set model.layers=3: [grid] varies model.layers (line 3), so it cannot also be set; use "
        "--set on the [grid] key's values in the file instead");
}

TEST_CASE("cross-key checks run on every grid point and blame the grid value",
          "[spec][grid][errors]") {
  // heads = 4 divides 64 and 48 but not 30: the error points at the 30.
  CHECK(ErrorOf("name = \"x\"\n[grid]\n\"model.d_model\" = [64, 48, 30]\n") ==
        "study.toml:3:28: model.heads: 4 does not divide model.d_model 30");
}

TEST_CASE("an experiment of more than kMaxRuns runs is refused", "[spec][grid][errors]") {
  std::string values;
  for (int i = 1; i <= 101; ++i) {
    values += (i > 1 ? ", " : "") + std::to_string(i * 8);
  }
  // 101 x 101 grid points x 1 variant x 3 seeds
  const std::string text = "name = \"x\"\n[grid]\n\"model.d_model\" = [" + values +
                           "]\n\"train.steps\" = [" + values + "]\n";
  CHECK(ErrorOf(text) ==
        "study.toml:2:1: the experiment expands to 30603 runs (10201 grid points x 1 variants x 3 "
        "seeds); at most 10000 are allowed, split it into several experiments");
}

TEST_CASE("a [job] command expands placeholders per run and quotes values for the shell",
          "[spec][job]") {
  Spec spec = MustParse(R"(name = "cmd"
[train]
lr = 1e-3
seeds = [7]
[[ablation]]
name = "odd"
"train.task" = "reverse"
"model.prune_heads" = { "0" = [1] }
[job]
code = "src"
command = "python3 t.py --lr {train.lr} --seed={train.seed} --task {train.task} --p {model.prune_heads} {{literal}}"
)");
  CHECK(spec.job_code == "src");
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].config.at("job.command") ==
        "python3 t.py --lr 0.001 --seed=7 --task copy --p '{}' {literal}");
  CHECK(runs[1].config.at("job.command") ==
        "python3 t.py --lr 0.001 --seed=7 --task reverse --p '{\"0\":[1]}' {literal}");
  CHECK_FALSE(runs[0].config.contains("job.snapshot"));
  CHECK_FALSE(spec.base.contains("job.code"));  // experiment-level, not a run key

  // The snapshot is part of the identity and of every run's config.
  const std::string before = SpecHash(spec);
  spec.snapshot_id = std::string(64, 'a');
  CHECK(SpecHash(spec) != before);
  CHECK(ExpandRuns(spec)[0].config.at("job.snapshot") == spec.snapshot_id);
  // Specs without [job] keep their hashes.
  CHECK(SpecHash(MustParse("name = \"x\"")) ==
        SpecHash(MustParse("name = \"x\"\n[job]\ncode = \"\"\n")));
}

TEST_CASE("bad [job] commands are refused at the command's position", "[spec][job][errors]") {
  const std::string head = "name = \"x\"\n[job]\n";
  CHECK(ErrorOf(head + "command = \"run {train.lrr}\"\n") ==
        "study.toml:3:11: job.command: unknown placeholder {train.lrr} (did you mean "
        "'train.lr'?); placeholders name run keys such as {train.lr} or {train.seed}");
  CHECK(ErrorOf(head + "command = \"run {train.seeds}\"\n").find("unknown placeholder") !=
        std::string::npos);
  CHECK(ErrorOf(head + "command = \"run {train.lr\"\n") ==
        "study.toml:3:11: job.command: the '{' at character 5 is never closed (write {{ for a "
        "literal one)");
  CHECK(ErrorOf(head + "command = \"a } b\"\n").find("a lone '}'") != std::string::npos);
  CHECK(ErrorOf(head + "command = \"a {} b\"\n").find("empty placeholder") != std::string::npos);
  CHECK(ErrorOf(head + "commnd = \"x\"\n").find("unknown key 'job.commnd'") != std::string::npos);
  CHECK(ErrorOf(head + "command = 3\n").find("job.command") != std::string::npos);
}

TEST_CASE("ShellQuote leaves plain words alone and quotes the rest", "[spec][job]") {
  CHECK(ShellQuote("train.py") == "train.py");
  CHECK(ShellQuote("0.001") == "0.001");
  CHECK(ShellQuote("a b") == "'a b'");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("it's") == "'it'\\''s'");
  CHECK(ShellQuote("$(rm -rf /)") == "'$(rm -rf /)'");
}

}  // namespace
}  // namespace tae::spec
