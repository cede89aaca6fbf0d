// Sanity floors and decisions of the ablation table (server/report): cells at chance or at a
// task's shortcut are marked, a baseline there puts a banner over the table, and a delta is only
// called a finding when its comparison is decided.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "server/report/report.h"
#include "server/report/task_levels.h"

namespace tae::report {
namespace {

using model::RunState;

const char kAssocRecall[] =
    R"({"train.task": "assoc_recall", "train.vocab": 16, "train.seq_len": 32})";

// One succeeded run per value of `variant`, ids from `*next_id`.
void AddRuns(const std::string& variant, const std::string& config, const std::string& metric,
             const std::vector<double>& finals, int64_t* next_id,
             std::vector<model::RunRecord>* runs, std::vector<model::FinalValue>* values) {
  for (double value : finals) {
    model::RunRecord run;
    run.id = (*next_id)++;
    run.variant = variant;
    run.state = RunState::kSucceeded;
    run.config_json = config;
    runs->push_back(run);
    values->push_back(
        {run.id, variant, 0, RunState::kSucceeded, metric, value, value, value, false,
         std::nullopt});
  }
}

}  // namespace

TEST_CASE("task levels: chance and the shortcuts docs/tasks.md lists", "[report]") {
  // The most-frequent-value shortcut, against a brute-force count over every row of 4 pairs with
  // 3 values (3^4 = 81 equally likely value assignments).
  double total = 0;
  for (int row = 0; row < 81; ++row) {
    int counts[3] = {0, 0, 0};
    for (int pair = 0, code = row; pair < 4; ++pair, code /= 3) {
      ++counts[code % 3];
    }
    total += *std::max_element(counts, counts + 3) / 4.0;
  }
  CHECK(MostFrequentShare(4, 3) == Approx(total / 81));
  // The defaults: 8 pairs over 8 values. A Monte-Carlo estimate of 200,000 rows gave 0.3244.
  CHECK(MostFrequentShare(8, 8) == Approx(0.3247).margin(5e-4));

  const nlohmann::json assoc = nlohmann::json::parse(kAssocRecall);
  std::vector<Level> levels = TaskLevels(assoc, "eval/acc");
  REQUIRE(levels.size() == 2);
  CHECK(levels[0].kind == "chance");
  CHECK(levels[0].value == Approx(0.125));
  CHECK(levels[1].kind == "shortcut");
  CHECK(levels[1].hides == "the lookup mechanism");
  levels = TaskLevels(assoc, "eval/loss");
  REQUIRE(levels.size() == 2);
  CHECK(levels[1].value == Approx(std::log(8.0)));  // chance: sorted by value, above the shortcut
  CHECK(levels[0].value == Approx(FrequencyLoss(8, 8)));

  levels = TaskLevels({{"train.task", "copy"}, {"train.vocab", 10}}, "eval/acc");
  REQUIRE(levels.size() == 1);
  CHECK(levels[0].value == Approx(0.1));
  CHECK(TaskLevels({{"train.task", "sort"}}, "eval/acc").size() == 3);
  CHECK(TaskLevels({{"train.task", "lm"}}, "eval/acc").back().value == Approx(0.18));
  CHECK(TaskLevels({{"train.task", "lm"}, {"train.data", "my.txt"}}, "eval/acc").size() == 1);
  CHECK(TaskLevels({{"train.task", "copy"}, {"job.command", "python x.py"}}, "eval/acc").empty());
  CHECK(TaskLevels({{"train.task", "copy"}}, "val/acc").empty());
}

TEST_CASE("a baseline at the assoc_recall shortcut is marked and bannered", "[report]") {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  int64_t id = 1;
  AddRuns("baseline", kAssocRecall, "eval/acc", {0.311, 0.322, 0.330}, &id, &runs, &values);
  AddRuns("one-layer", kAssocRecall, "eval/acc", {0.315, 0.318, 0.325}, &id, &runs, &values);
  AddRuns("no-attn", kAssocRecall, "eval/acc", {0.136, 0.131, 0.128}, &id, &runs, &values);
  const std::vector<Row> rows =
      BuildReport({"baseline", "one-layer", "no-attn"}, runs, values, {"eval/acc"}, "baseline");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].cells[0].level_kind == "shortcut");
  CHECK(rows[0].cells[0].level == Approx(MostFrequentShare(8, 8)));
  CHECK(rows[1].cells[0].level_kind == "shortcut");
  CHECK(rows[2].cells[0].level_kind == "chance");
  const std::vector<std::string> banners = Banners(rows);
  REQUIRE(banners.size() == 1);
  CHECK(banners[0] ==
        "eval/acc: baseline is at the most-frequent-value shortcut (0.325): this table cannot "
        "show the lookup mechanism");

  // A baseline that learned the lookup: no banner, no mark.
  runs.clear();
  values.clear();
  AddRuns("baseline", kAssocRecall, "eval/acc", {1.0, 0.99, 1.0}, &id, &runs, &values);
  const std::vector<Row> learned =
      BuildReport({"baseline"}, runs, values, {"eval/acc"}, "baseline");
  CHECK(learned[0].cells[0].level_kind.empty());
  CHECK(Banners(learned).empty());
}

TEST_CASE("a user floor marks the rows at or below it", "[report]") {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  int64_t id = 1;
  const std::string custom = R"({"job.command": "python train.py"})";
  AddRuns("baseline", custom, "val/acc", {0.45, 0.48, 0.47}, &id, &runs, &values);
  AddRuns("wide", custom, "val/acc", {0.91, 0.90, 0.92}, &id, &runs, &values);
  ReportOptions options;
  options.floor["val/acc"] = 0.5;
  const std::vector<Row> rows =
      BuildReport({"baseline", "wide"}, runs, values, {"val/acc"}, "baseline", {}, options);
  CHECK(rows[0].cells[0].level_kind == "floor");
  CHECK(rows[1].cells[0].level_kind.empty());
  REQUIRE(Banners(rows).size() == 1);
  CHECK(Banners(rows)[0] ==
        "val/acc: baseline is at the floor of [report] floor (0.5): this table cannot show an "
        "effect on it");
  // Without the floor nothing is known about val/acc.
  CHECK(BuildReport({"baseline", "wide"}, runs, values, {"val/acc"}, "baseline")[0]
            .cells[0]
            .level_kind.empty());
}

TEST_CASE("deltas are decided: different, undecided at n, equivalent within the margin",
          "[report]") {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  int64_t id = 1;
  const std::string config = R"({"train.task": "copy"})";
  AddRuns("baseline", config, "eval/loss", {1.00, 1.02, 0.98}, &id, &runs, &values);
  AddRuns("no-attn", config, "eval/loss", {2.00, 2.01, 1.99}, &id, &runs, &values);
  AddRuns("gelu", config, "eval/loss", {1.01, 0.97, 1.03}, &id, &runs, &values);
  std::vector<Row> rows =
      BuildReport({"baseline", "no-attn", "gelu"}, runs, values, {"eval/loss"}, "baseline");
  CHECK(rows[0].cells[0].decision.empty());  // the baseline is not compared
  CHECK(rows[1].cells[0].decision == "different");
  CHECK(rows[1].cells[0].decision_n == 3);
  CHECK(rows[2].cells[0].decision == "undecided");
  CHECK(rows[2].cells[0].decision_n == 3);
  CHECK(rows[2].cells[0].decision_final);

  ReportOptions options;
  options.margin["eval/loss"] = 0.1;
  rows = BuildReport({"baseline", "no-attn", "gelu"}, runs, values, {"eval/loss"}, "baseline", {},
                     options);
  CHECK(rows[1].cells[0].decision == "different");
  CHECK(rows[2].cells[0].decision == "equivalent");
  CHECK(rows[2].cells[0].margin == 0.1);

  // Adaptive seeds: at the first of ten looks the same clear difference is still undecided
  // (nominal p ~ 1e-4 at n = 3), and the comparison wants another seed.
  options.adaptive = true;
  options.design.min_seeds = 3;
  options.design.max_seeds = 12;
  options.margin.clear();
  rows = BuildReport({"baseline", "no-attn", "gelu"}, runs, values, {"eval/loss"}, "baseline", {},
                     options);
  CHECK(rows[1].cells[0].decision == "different");  // p ~ 1e-6 passes even the first look
  CHECK(rows[2].cells[0].decision == "undecided");
  CHECK_FALSE(rows[2].cells[0].decision_final);
  CHECK_FALSE(rows[2].cells[0].decision_futile);

  // A variant that reproduces the baseline seed for seed, 3 seeds of at most 5: max seeds would
  // not decide it either (at 3 of 12 they still might), so adaptive seeds stop it now, and the
  // cell says why it is final before max.
  AddRuns("same", config, "eval/loss", {1.00, 1.02, 0.98}, &id, &runs, &values);
  options.design.max_seeds = 5;
  rows = BuildReport({"baseline", "same"}, runs, values, {"eval/loss"}, "baseline", {}, options);
  CHECK(rows[1].cells[0].decision == "undecided");
  CHECK(rows[1].cells[0].decision_final);
  CHECK(rows[1].cells[0].decision_futile);
  options.adaptive = false;  // one test over the seeds there are: final, never futile
  rows = BuildReport({"baseline", "same"}, runs, values, {"eval/loss"}, "baseline", {}, options);
  CHECK(rows[1].cells[0].decision_final);
  CHECK_FALSE(rows[1].cells[0].decision_futile);
}

TEST_CASE("an adaptive verdict follows the planner's looks: seed order and failed seeds",
          "[report]") {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  auto add = [&](const std::string& variant, int64_t seed, RunState state, double value) {
    model::RunRecord run;
    run.id = static_cast<int64_t>(runs.size()) + 1;
    run.variant = variant;
    run.seed = seed;
    run.state = state;
    runs.push_back(run);
    if (state == RunState::kSucceeded) {
      values.push_back(
          {run.id, variant, seed, state, "score", value, value, value, false, std::nullopt});
    }
  };
  // "a" is futile at its look at 3 (0.01 on a spread of 0.1); the baseline grew to 6 seeds for
  // "b". On every value there is (the old rule) "a" reads undecided and not final again.
  const std::vector<double> base = {1.0, 1.1, 1.2, 1.5, 1.6, 1.55};
  for (int seed = 5; seed >= 0; --seed) {  // stored out of seed order
    add("baseline", seed, RunState::kSucceeded, base[seed]);
    if (seed < 3) {
      add("a", seed, RunState::kSucceeded, base[seed] + 0.01);
    }
    add("b", seed, seed == 1 ? RunState::kFailed : RunState::kSucceeded, base[seed] + 0.3);
  }
  ReportOptions options;
  options.adaptive = true;
  options.design.min_seeds = 3;
  options.design.max_seeds = 6;
  std::vector<Row> rows =
      BuildReport({"baseline", "a", "b"}, runs, values, {"score"}, "baseline", {}, options);
  REQUIRE(rows.size() == 3);
  const Cell& a = rows[1].cells[0];
  CHECK(a.decision == "undecided");
  CHECK(a.decision_n == 3);
  CHECK(a.decision_final);
  CHECK(a.decision_futile);
  CHECK(a.decision_held.empty());
  CHECK(rows[1].runs_failed == 0);

  // "b" failed at seed 1: no look is taken on its five survivors, and the row counts the failure.
  const Cell& b = rows[2].cells[0];
  CHECK(b.decision == "undecided");
  CHECK(b.decision_n == 1);
  CHECK_FALSE(b.decision_final);
  CHECK(b.decision_held == "r12 failed");
  CHECK(rows[2].runs_failed == 1);
  CHECK(rows[2].runs == 5);
  CHECK(rows[2].runs_total == 6);
  CHECK(b.n == 5);  // the mean and its CI still describe the survivors
}

}  // namespace tae::report
