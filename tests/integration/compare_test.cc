// taectl compare against a real study: the config diff of two variants is exactly the ablation's
// key plus the seed, and the metric values are the ones `taectl show` reports.

#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

constexpr const char* kTinyStudy = R"(name = "tiny-compare"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 40
eval_every = 20
warmup = 10
seeds = [0, 1]
[[ablation]]
name = "no-attn"
"model.drop_attention_layers" = [0]
)";

// The id of the run of `variant` with `seed`, or 0.
int64_t FindRun(const nlohmann::json& runs, const std::string& variant, int64_t seed) {
  for (const auto& run : runs) {
    if (run.at("variant") == variant && run.at("seed") == seed) {
      return run.at("id").get<int64_t>();
    }
  }
  return 0;
}

// The whitespace-separated cells of the first line of text that starts with `first`.
std::vector<std::string> Row(const std::string& text, const std::string& first) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) {
      row.push_back(cell);
    }
    if (!row.empty() && row[0] == first) {
      return row;
    }
  }
  return {};
}

}  // namespace

TEST_CASE("compare shows the ablation's key, the seed and the runs' final metrics") {
  Cluster cluster(1, 2);
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  CommandResult submit = cluster.Taectl({"submit", spec, "--wait", "--json"}, 300);
  INFO("submit stderr: " << submit.err);
  REQUIRE(submit.exit_code == 0);
  const int64_t exp_id = nlohmann::json::parse(submit.out).at("experiment").get<int64_t>();

  nlohmann::json runs = cluster.TaectlJson({"runs", std::to_string(exp_id)});
  REQUIRE(runs.size() == 4);
  const int64_t base = FindRun(runs, "baseline", 0);
  const int64_t ablated = FindRun(runs, "no-attn", 1);
  REQUIRE(base > 0);
  REQUIRE(ablated > 0);
  const std::string r_base = "r" + std::to_string(base);
  const std::string r_ablated = "r" + std::to_string(ablated);

  nlohmann::json cmp = cluster.TaectlJson({"compare", r_base, std::to_string(ablated)});
  INFO("compare: " << cmp.dump());
  CHECK(cmp.at("runs") == nlohmann::json::array({base, ablated}));
  std::set<std::string> keys;
  for (const auto& item : cmp.at("config_diff").items()) {
    keys.insert(item.key());
  }
  CHECK(keys == std::set<std::string>{"model.drop_attention_layers", "train.seed"});
  CHECK(cmp.at("config_diff").at("model.drop_attention_layers") ==
        nlohmann::json::parse("[[], [0]]"));
  CHECK(cmp.at("config_diff").at("train.seed") == nlohmann::json::array({0, 1}));
  CHECK(cmp.at("identical_keys").get<int64_t>() > 5);

  nlohmann::json shown_base = cluster.TaectlJson({"show", r_base}).at("final_metrics");
  nlohmann::json shown_ablated = cluster.TaectlJson({"show", r_ablated}).at("final_metrics");
  REQUIRE(shown_base.contains("eval/loss"));
  REQUIRE(cmp.at("metrics").contains("eval/loss"));
  CHECK(cmp.at("metrics").at("eval/loss")[0].get<double>() ==
        shown_base.at("eval/loss").get<double>());
  CHECK(cmp.at("metrics").at("eval/loss")[1].get<double>() ==
        shown_ablated.at("eval/loss").get<double>());
  CHECK(cmp.at("metrics").size() >= shown_base.size());

  // --metric restricts; the text form has the header rows and the difference columns.
  nlohmann::json only = cluster.TaectlJson({"compare", r_base, r_ablated, "--metric", "eval/acc"});
  CHECK(only.at("metrics").size() == 1);
  CHECK(only.at("metrics").contains("eval/acc"));
  CommandResult text = cluster.Taectl({"compare", r_base, r_ablated, "--metric", "eval/loss"});
  INFO("text: " << text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK(Row(text.out, "RUN") == std::vector<std::string>{"RUN", r_base, r_ablated});
  CHECK(Row(text.out, "variant") == std::vector<std::string>{"variant", "baseline", "no-attn"});
  CHECK(Row(text.out, "CONFIG") == std::vector<std::string>{"CONFIG", r_base, r_ablated});
  CHECK(Row(text.out, "train.seed") == std::vector<std::string>{"train.seed", "0", "1"});
  CHECK(Row(text.out, std::to_string(cmp.at("identical_keys").get<int64_t>())) ==
        std::vector<std::string>{std::to_string(cmp.at("identical_keys").get<int64_t>()), "keys",
                                 "identical", "in", "all", "runs"});
  CHECK(Row(text.out, "METRIC") ==
        std::vector<std::string>{"METRIC", r_base, r_ablated, "DIFF", "REL"});
  CHECK(Row(text.out, "eval/loss").size() == 5);

  // Three runs work too (no difference columns).
  const std::string r_third = "r" + std::to_string(FindRun(runs, "baseline", 1));
  nlohmann::json three = cluster.TaectlJson({"compare", r_base, r_ablated, r_third});
  CHECK(three.at("runs").size() == 3);
  CHECK(three.at("config_diff").at("train.seed") == nlohmann::json::array({0, 1, 1}));

  // Clear errors.
  CommandResult one = cluster.Taectl({"compare", r_base});
  CHECK(one.exit_code == 2);
  CHECK(one.err.find("at least 2 runs") != std::string::npos);
  CommandResult bad = cluster.Taectl({"compare", r_base, "x7"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("'x7' is not a run id") != std::string::npos);
  CommandResult missing = cluster.Taectl({"compare", r_base, "r9999"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("run r9999 does not exist") != std::string::npos);
}

}  // namespace tae::testing
