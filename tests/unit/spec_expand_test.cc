// Expansion of a Spec into runs and the spec hash (common/spec).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/spec/schema.h"
#include "common/spec/spec.h"

namespace tae::spec {
namespace {

Spec MustParse(const std::string& text, const std::vector<std::string>& sets = {}) {
  absl::StatusOr<Spec> spec = ParseSpec(text, "study.toml", sets);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  return *spec;
}

constexpr char kStudy[] = R"(
name = "norms"
description = "which norm?"

[model]
layers = 3
norm = "layernorm"

[train]
lr = 3e-3
seeds = [11, 22, 33]

[[ablation]]
name = "rms"
"model.norm" = "rmsnorm"

[[ablation]]
name = "deep"
"model.layers" = 6
"train.lr" = 1e-3
)";

TEST_CASE("runs are the baseline then the ablations in file order and each once per seed",
          "[spec][expand]") {
  Spec spec = MustParse(kStudy);
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == (1 + 2) * 3);
  std::vector<std::string> variants;
  std::vector<int64_t> seeds;
  for (const RunPlan& run : runs) {
    variants.push_back(run.variant);
    seeds.push_back(run.seed);
    CHECK(run.config.at("train.seed") == run.seed);
  }
  CHECK(variants == std::vector<std::string>{"baseline", "baseline", "baseline", "rms", "rms",
                                             "rms", "deep", "deep", "deep"});
  CHECK(seeds == std::vector<int64_t>{11, 22, 33, 11, 22, 33, 11, 22, 33});
}

TEST_CASE("a variant's config is the baseline plus only its own overrides", "[spec][expand]") {
  Spec spec = MustParse(kStudy);
  std::vector<RunPlan> runs = ExpandRuns(spec);
  const nlohmann::json& baseline = runs[0].config;
  const nlohmann::json& rms = runs[3].config;
  const nlohmann::json& deep = runs[6].config;
  CHECK(baseline.at("model.norm") == "layernorm");
  CHECK(baseline.at("model.layers") == 3);
  CHECK(rms.at("model.norm") == "rmsnorm");
  CHECK(rms.at("model.layers") == 3);
  CHECK(rms.at("train.lr").get<double>() == 3e-3);
  CHECK(deep.at("model.norm") == "layernorm");
  CHECK(deep.at("model.layers") == 6);
  CHECK(deep.at("train.lr").get<double>() == 1e-3);

  nlohmann::json expected = spec.base;
  expected["model.norm"] = "rmsnorm";
  expected["train.seed"] = 11;
  CHECK(rms == expected);
}

TEST_CASE("a run config holds every run key with defaults plus train.seed", "[spec][expand]") {
  Spec spec = MustParse(R"(name = "defaults")");
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 3);
  const nlohmann::json& config = runs[0].config;
  size_t run_keys = 0;
  for (const KeyInfo& key : Schema()) {
    if (key.scope == KeyScope::kRun) {
      ++run_keys;
      INFO(key.name);
      REQUIRE(config.contains(std::string(key.name)));
      CHECK(config.at(std::string(key.name)) == nlohmann::json::parse(key.default_json));
    }
  }
  CHECK(config.size() == run_keys + 1);
  CHECK(config.at("train.seed") == 0);
  CHECK_FALSE(config.contains("train.seeds"));
  CHECK_FALSE(config.contains("name"));
  CHECK(config.at("train.lr").dump() == "0.003");
  CHECK(config.at("model.dropout").dump() == "0.0");
  CHECK(config.dump().find("\"model.activation\":\"gelu\",\"model.bias\":true") !=
        std::string::npos);
}

TEST_CASE("overrides from --set apply to the baseline and the ablations inherit them",
          "[spec][expand]") {
  Spec spec = MustParse(kStudy, {"train.steps=100", "model.norm=none", "train.seeds=[4]"});
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].config.at("model.norm") == "none");
  CHECK(runs[1].variant == "rms");
  CHECK(runs[1].config.at("model.norm") == "rmsnorm");
  CHECK(runs[2].config.at("model.norm") == "none");
  for (const RunPlan& run : runs) {
    CHECK(run.config.at("train.steps") == 100);
    CHECK(run.seed == 4);
  }
}

TEST_CASE("ResolveConfig gives one variant's config", "[spec][expand]") {
  Spec spec = MustParse(kStudy);
  CHECK(ResolveConfig(spec, "deep", 22) == ExpandRuns(spec)[7].config);
  CHECK(ResolveConfig(spec, "baseline", 11) == ExpandRuns(spec)[0].config);
  CHECK(ResolveConfig(spec, "nope", 11).is_null());
}

TEST_CASE("ConfigAtSeed gives a stored run's config at another seed, as ExpandRuns would",
          "[spec][expand]") {
  const std::string text = R"(name = "cmd"
[train]
seeds = [0, 1, 2]
lr = 0.01
[[ablation]]
name = "slow"
"train.lr" = 0.001
[job]
code = "src"
command = "python3 job.py --lr {train.lr} --seed {train.seed}"
)";
  absl::StatusOr<Spec> parsed = ParseSpec(text, "cmd.toml", {});
  REQUIRE(parsed.ok());
  parsed->snapshot_id = "abc123";
  const std::vector<RunPlan> plans = ExpandRuns(*parsed);
  REQUIRE(plans.size() == 6);
  // slow at seed 0, taken to seed 2: exactly slow's plan at seed 2 (the command too).
  CHECK(ConfigAtSeed(plans[3].config, 2, parsed->job_command) == plans[5].config);
  CHECK(plans[5].config.at("job.command") == "python3 job.py --lr 0.001 --seed 2");
  CHECK(plans[5].config.at("job.snapshot") == "abc123");
  // A stored config keeps its values: a key whose default changed since is not re-resolved.
  nlohmann::json stored = plans[0].config;
  stored["model.init"] = "from-an-older-version";
  const nlohmann::json at7 = ConfigAtSeed(stored, 7, parsed->job_command);
  CHECK(at7.at("model.init") == "from-an-older-version");
  CHECK(at7.at("train.seed") == 7);
  CHECK(at7.at("job.command") == "python3 job.py --lr 0.01 --seed 7");
  // Without a [job] nothing but the seed changes.
  const Spec plain = MustParse(kStudy);
  CHECK(ConfigAtSeed(ExpandRuns(plain)[0].config, 22, "") == ResolveConfig(plain, "baseline", 22));
}

TEST_CASE("SpecHash ignores formatting and key order but not values", "[spec][hash]") {
  const std::string hash = SpecHash(MustParse(kStudy));
  CHECK(hash.size() == 16);
  CHECK(hash.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(SpecHash(MustParse(kStudy)) == hash);

  const std::string reordered = R"(# the same study, written differently
description    = "which norm?"
name = "norms"
[train]
seeds = [ 11, 22, 33 ]   # three seeds
lr = 0.003
[model]
norm = "layernorm"
layers = 3
[[ablation]]
"model.norm" = "rmsnorm"
name = "rms"
[[ablation]]
name = "deep"
train.lr = 0.001
model = { layers = 6 }
)";
  CHECK(SpecHash(MustParse(reordered)) == hash);
  // Writing a default explicitly changes nothing either.
  CHECK(SpecHash(MustParse(std::string(kStudy) + "[resources]\nslots = 1\n")) == hash);
  CHECK(SpecHash(MustParse(kStudy, {"train.lr=3e-3"})) == hash);

  CHECK(SpecHash(MustParse(kStudy, {"train.lr=2e-3"})) != hash);
  std::string changed = kStudy;
  changed.replace(changed.find("layers = 3"), 10, "layers = 4");
  CHECK(SpecHash(MustParse(changed)) != hash);
  changed = kStudy;
  changed.replace(changed.find("[11, 22, 33]"), 12, "[11, 22]");
  CHECK(SpecHash(MustParse(changed)) != hash);
  changed = kStudy;
  changed.replace(changed.find("\"rms\""), 5, "\"rms2\"");
  CHECK(SpecHash(MustParse(changed)) != hash);
}

TEST_CASE("SpecHash is float-format independent and pinned", "[spec][hash]") {
  CHECK(SpecHash(MustParse("name = \"f\"\n[train]\nlr = 1\n")) ==
        SpecHash(MustParse("name = \"f\"\n[train]\nlr = 1.0\n")));
  // Stored hashes must not change between builds: a change here needs a migration plan.
  // Changed from 22d2e0edcbb39c5a when model.kv_heads and model.norm_position joined the schema
  // (every default lands in Spec::base): specs stored before then no longer dedupe on resubmit.
  // Changed again from df6ec8869aaae088 for model.head_dim, model.prune_heads,
  // train.checkpoint_every and train.head_importance; from f8d1b36880f981d0 for resources.hosts;
  // from 5dd0d1be342490b7 for model.init, train.engine and the untied default of
  // model.tie_embeddings (a resubmitted older file means a different model now, so a new hash is
  // right); from a145f1edfaab384b when model.init's default became torch (the same reason).
  CHECK(SpecHash(MustParse(R"(name = "pinned")")) == "64b33e5fe5773eb6");
  // resources.keep_checkpoints joined later: at its default it leaves the hash alone.
  CHECK(SpecHash(MustParse("name = \"pinned\"\n[resources]\nkeep_checkpoints = 2\n")) ==
        "64b33e5fe5773eb6");
  CHECK(SpecHash(MustParse("name = \"pinned\"\n[resources]\nkeep_checkpoints = 5\n")) !=
        "64b33e5fe5773eb6");
  // A file that names the old default keeps the old hash.
  CHECK(SpecHash(MustParse("name = \"pinned\"\n[model]\ninit = \"gpt2\"\n")) == "a145f1edfaab384b");
}

constexpr char kGridStudy[] = R"(
name = "sweep"
[train]
seeds = [0, 1]
[[ablation]]
name = "rms"
"model.norm" = "rmsnorm"
[grid]
"model.layers" = [1, 2]
"train.lr" = [1e-3, 3e-3]
)";

TEST_CASE("a grid crosses every variant with every point, first axis slowest", "[spec][grid]") {
  Spec spec = MustParse(kGridStudy);
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 4 * 2 * 2);  // grid points x variants x seeds
  std::vector<std::string> variants;
  for (size_t i = 0; i < runs.size(); i += 2) {
    variants.push_back(runs[i].variant);
    CHECK(runs[i + 1].variant == runs[i].variant);
    CHECK(runs[i].seed == 0);
    CHECK(runs[i + 1].seed == 1);
  }
  CHECK(variants ==
        std::vector<std::string>{"baseline[layers=1,lr=0.001]", "rms[layers=1,lr=0.001]",
                                 "baseline[layers=1,lr=0.003]", "rms[layers=1,lr=0.003]",
                                 "baseline[layers=2,lr=0.001]", "rms[layers=2,lr=0.001]",
                                 "baseline[layers=2,lr=0.003]", "rms[layers=2,lr=0.003]"});
  const RunPlan& run = runs[14];  // rms at layers 2, lr 3e-3, seed 0
  CHECK(run.ablation == "rms");
  CHECK(run.grid == nlohmann::json{{"model.layers", 2}, {"train.lr", 3e-3}});
  CHECK(run.config.at("model.layers") == 2);
  CHECK(run.config.at("train.lr") == 3e-3);
  CHECK(run.config.at("model.norm") == "rmsnorm");
  CHECK(runs[12].config.at("model.norm") == "layernorm");  // the baseline at the same point
  CHECK(run.config == ResolveConfig(spec, "rms", 0, run.grid));
}

TEST_CASE("grid variant names stay unambiguous and find their baseline", "[spec][grid]") {
  std::vector<GridAxis> grid = {{"model.dropout", {0.0, 0.1}}, {"train.task", {"copy"}}};
  CHECK(GridVariantName("baseline", nlohmann::json::object(), grid) == "baseline");
  CHECK(GridVariantName("x", {{"model.dropout", 0.1}, {"train.task", "copy"}}, grid) ==
        "x[dropout=0.1,task=copy]");
  // Two axes with the same last part keep their sections.
  std::vector<GridAxis> clash = {{"model.a", {1}}, {"train.a", {2}}};
  CHECK(GridVariantName("x", {{"model.a", 1}, {"train.a", 2}}, clash) == "x[model.a=1,train.a=2]");
  CHECK(BaselineFor("rms[layers=2]") == "baseline[layers=2]");
  CHECK(BaselineFor("rms") == "baseline");
  CHECK(BaselineFor("rms[layers=2]", "deep") == "deep[layers=2]");
  CHECK(BaselineFor("rms[layers=2]", "deep[layers=1]") == "deep[layers=1]");
}

TEST_CASE("SpecHash sees the grid and leaves grid-less specs as they were", "[spec][grid][hash]") {
  Spec with_grid = MustParse(kGridStudy);
  Spec other_values = MustParse(std::string(kGridStudy) + "\"model.d_model\" = [32]\n");
  CHECK(SpecHash(with_grid) != SpecHash(other_values));
  Spec without = with_grid;
  without.grid.clear();
  Spec parsed_without = MustParse(
      "name = \"sweep\"\n[train]\nseeds = [0, 1]\n[[ablation]]\nname = \"rms\"\n"
      "\"model.norm\" = \"rmsnorm\"\n");
  CHECK(SpecHash(without) == SpecHash(parsed_without));
  CHECK(SpecHash(without) != SpecHash(with_grid));
}

}  // namespace
}  // namespace tae::spec
