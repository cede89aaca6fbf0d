#include "client/commands/compare.h"

#include <catch2/catch.hpp>

namespace tae::client {
namespace {

tae::v1::Run MakeRun(int64_t id, const std::string& variant, int64_t seed,
                     const nlohmann::json& config) {
  tae::v1::Run run;
  run.set_id(id);
  run.set_variant(variant);
  run.set_seed(seed);
  run.set_state(tae::v1::RUN_STATE_SUCCEEDED);
  run.set_last_step(60);
  run.set_config_json(config.dump());
  return run;
}

void AddMetric(tae::v1::Run* run, const std::string& key, double value) {
  tae::v1::Scalar* scalar = run->add_final_metrics();
  scalar->set_key(key);
  scalar->set_value(value);
}

// r12 baseline seed 0 against r14 no-attn seed 1: two keys differ, three are identical.
std::vector<tae::v1::Run> TwoRuns() {
  tae::v1::Run a = MakeRun(12, "baseline", 0,
                           {{"model.layers", 2},
                            {"model.drop_attention_layers", nlohmann::json::array()},
                            {"train.seed", 0},
                            {"train.task", "copy"},
                            {"train.lr", 0.001}});
  tae::v1::Run b = MakeRun(14, "no-attn", 1,
                           {{"model.layers", 2},
                            {"model.drop_attention_layers", {0}},
                            {"train.seed", 1},
                            {"train.task", "copy"},
                            {"train.lr", 0.001}});
  AddMetric(&a, "eval/loss", 2.0);
  AddMetric(&a, "eval/acc", 0.5);
  AddMetric(&b, "eval/loss", 2.5);
  AddMetric(&b, "eval/acc", 0.4);
  AddMetric(&b, "model/params", 1000);
  return {a, b};
}

TEST_CASE("compare keeps only the config keys that differ and counts the rest", "[compare]") {
  absl::StatusOr<RunComparison> c = BuildComparison(TwoRuns(), {});
  REQUIRE(c.ok());
  REQUIRE(c->runs.size() == 2);
  CHECK(c->runs[0].id == 12);
  CHECK(c->runs[1].variant == "no-attn");
  CHECK(c->identical_keys == 3);
  REQUIRE(c->config_diff.size() == 2);
  CHECK(c->config_diff[0].key == "model.drop_attention_layers");
  CHECK(c->config_diff[0].values ==
        std::vector<nlohmann::json>{nlohmann::json::array(), nlohmann::json::array({0})});
  CHECK(c->config_diff[1].key == "train.seed");
  CHECK(c->config_diff[1].values == std::vector<nlohmann::json>{0, 1});

  // Every metric of any run, sorted by name; a run without one has no value.
  REQUIRE(c->metrics.size() == 3);
  CHECK(c->metrics[0].name == "eval/acc");
  CHECK(c->metrics[1].name == "eval/loss");
  CHECK(c->metrics[1].values == std::vector<std::optional<double>>{2.0, 2.5});
  CHECK(c->metrics[2].name == "model/params");
  CHECK(c->metrics[2].values == std::vector<std::optional<double>>{std::nullopt, 1000.0});
}

TEST_CASE("compare renders headers, the config diff and metric differences", "[compare]") {
  absl::StatusOr<RunComparison> c = BuildComparison(TwoRuns(), {});
  REQUIRE(c.ok());
  const std::string expected =
      "RUN        r12        r14\n"
      "variant    baseline   no-attn\n"
      "seed       0          1\n"
      "state      succeeded  succeeded\n"
      "last_step  60         60\n"
      "\n"
      "CONFIG                       r12  r14\n"
      "model.drop_attention_layers  []   [0]\n"
      "train.seed                   0    1\n"
      "3 keys identical in all runs\n"
      "\n"
      "METRIC        r12     r14        DIFF     REL\n"
      "eval/acc      0.5000  0.4000     -0.1000  -20.00%\n"
      "eval/loss     2.0000  2.5000     +0.5000  +25.00%\n"
      "model/params  -       1000.0000  -        -\n";
  CHECK(RenderComparison(*c) == expected);
}

TEST_CASE("compare --json has the documented shape with nulls for missing values", "[compare]") {
  absl::StatusOr<RunComparison> c = BuildComparison(TwoRuns(), {"eval/loss", "model/params"});
  REQUIRE(c.ok());
  const nlohmann::ordered_json expected = nlohmann::ordered_json::parse(R"({
    "runs": [12, 14],
    "config_diff": {"model.drop_attention_layers": [[], [0]], "train.seed": [0, 1]},
    "identical_keys": 3,
    "metrics": {"eval/loss": [2.0, 2.5], "model/params": [null, 1000.0]}
  })");
  CHECK(ComparisonJson(*c) == expected);
  CHECK(ComparisonJson(*c).dump() ==
        R"({"runs":[12,14],"config_diff":{"model.drop_attention_layers":[[],[0]],)"
        R"("train.seed":[0,1]},"identical_keys":3,)"
        R"("metrics":{"eval/loss":[2.0,2.5],"model/params":[null,1000.0]}})");
}

TEST_CASE("compare of three runs has no difference columns and marks missing keys", "[compare]") {
  std::vector<tae::v1::Run> runs = TwoRuns();
  tae::v1::Run c3 = MakeRun(15, "wide", 0,
                            {{"model.layers", 2},
                             {"model.drop_attention_layers", nlohmann::json::array()},
                             {"train.seed", 0},
                             {"train.task", "copy"}});  // no train.lr
  AddMetric(&c3, "eval/loss", 1.0);
  runs.push_back(c3);
  absl::StatusOr<RunComparison> c = BuildComparison(runs, {"eval/loss"});
  REQUIRE(c.ok());
  CHECK(c->identical_keys == 2);
  REQUIRE(c->config_diff.size() == 3);
  CHECK(c->config_diff[1].key == "train.lr");
  CHECK(c->config_diff[1].values == std::vector<nlohmann::json>{0.001, 0.001, nullptr});
  const std::string text = RenderComparison(*c);
  INFO(text);
  CHECK(text.find("train.lr                     0.001  0.001  -\n") != std::string::npos);
  CHECK(text.find("2 keys identical in all runs\n") != std::string::npos);
  CHECK(text.find("METRIC     r12     r14     r15\n") != std::string::npos);
  CHECK(text.find("eval/loss  2.0000  2.5000  1.0000\n") != std::string::npos);
  CHECK(text.find("DIFF") == std::string::npos);
}

TEST_CASE("compare says when configs are identical and when a value cannot be related",
          "[compare]") {
  tae::v1::Run a = MakeRun(1, "baseline", 0, {{"train.task", "copy"}});
  tae::v1::Run b = MakeRun(2, "baseline", 0, {{"train.task", "copy"}});
  AddMetric(&a, "eval/acc", 0.0);
  AddMetric(&b, "eval/acc", 0.25);
  absl::StatusOr<RunComparison> c = BuildComparison({a, b}, {});
  REQUIRE(c.ok());
  CHECK(c->config_diff.empty());
  const std::string text = RenderComparison(*c);
  INFO(text);
  CHECK(text.find("\nconfig: identical (1 key)\n") != std::string::npos);
  CHECK(text.find("eval/acc  0.0000  0.2500  +0.2500  -\n") != std::string::npos);
}

TEST_CASE("compare rejects bad run lists, unknown metrics and broken configs", "[compare]") {
  auto ids = ParseCompareRunIds({"r12", "14", "R3"});
  REQUIRE(ids.ok());
  CHECK(*ids == std::vector<int64_t>{12, 14, 3});

  auto one = ParseCompareRunIds({"r12"});
  REQUIRE_FALSE(one.ok());
  CHECK(one.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(one.status().message() == "compare needs at least 2 runs, got 1 (taectl compare r1 r2)");

  auto bad = ParseCompareRunIds({"r12", "e4"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "'e4' is not a run id (r<ID>)");

  auto twice = ParseCompareRunIds({"r12", "12"});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message() == "r12 is given twice");

  auto unknown = BuildComparison(TwoRuns(), {"eval/los"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(unknown.status().message() == "--metric: no run has a final value for 'eval/los'");

  std::vector<tae::v1::Run> runs = TwoRuns();
  runs[1].set_config_json("not json");
  auto broken = BuildComparison(runs, {});
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(broken.status().message() == "r14 has no config (its config_json is not a JSON object)");
}

}  // namespace
}  // namespace tae::client
