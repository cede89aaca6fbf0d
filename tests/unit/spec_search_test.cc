// [search] in the experiment file (common/spec): its defaults, --set, the hash, and every refusal
// with its place.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

// A tae-train study with a learning-rate grid and one ablation, and `search` after it.
std::string Study(const std::string& search, const std::string& extra = "") {
  return "name = \"lr\"\n"
         "[train]\n"
         "steps = 300\n"
         "[grid]\n"
         "\"train.lr\" = [1e-3, 3e-3, 1e-2]\n"
         "[[ablation]]\n"
         "name = \"no-pos\"\n"
         "model.pos_encoding = \"none\"\n" +
         extra + search;
}

TEST_CASE("without [search] a study is a grid on eval/loss, min", "[spec][search]") {
  const Spec spec = MustParse(Study(""));
  CHECK_FALSE(spec.search.declared);
  CHECK(spec.search.method == SearchMethod::kGrid);
  CHECK_FALSE(spec.search.asha());
  CHECK(spec.search.metric == "eval/loss");
  CHECK(spec.search.goal == "min");
  CHECK(spec.search.reduction == 3);
  CHECK(spec.search.within == SearchWithin::kVariant);
  CHECK_FALSE(spec.base.contains("search.method"));  // experiment keys are not run config
}

TEST_CASE("an asha [search] is read whole", "[spec][search]") {
  const Spec spec =
      MustParse(Study("[search]\n"
                      "method = \"asha\"\n"
                      "metric = \"eval/acc\"\n"
                      "goal = \"max\"\n"
                      "min_steps = 30\n"
                      "reduction = 2\n"
                      "within = \"study\"\n"));
  CHECK(spec.search.declared);
  CHECK(spec.search.asha());
  CHECK(spec.search.metric == "eval/acc");
  CHECK(spec.search.maximize());
  CHECK(spec.search.min_steps == 30);
  CHECK(spec.search.reduction == 2);
  CHECK(spec.search.within == SearchWithin::kStudy);
}

TEST_CASE("an asha grid starts its points in a seeded shuffled order under the finite rule",
          "[spec][search]") {
  const std::string asha = "[search]\nmethod = \"asha\"\nmin_steps = 30\nreduction = 4\n";
  const Spec spec = MustParse(Study(asha));
  CHECK(spec.search.bootstrap == 0);  // the finite rule (server/search/asha.h)
  CHECK(spec.search.shuffle);
  // Runs come grid point by grid point (baseline, then the ablation) in GridOrder's order.
  const std::vector<size_t> order = GridOrder(3, 0);
  const std::vector<std::string> listed = {"baseline[lr=0.001]", "baseline[lr=0.003]",
                                           "baseline[lr=0.01]"};
  std::vector<std::string> expected;
  for (size_t i : order) {
    expected.push_back(listed[i]);
    expected.push_back("no-pos" + listed[i].substr(8));
  }
  std::vector<std::string> got;
  for (const RunPlan& run : ExpandRuns(spec)) {
    if (got.empty() || got.back() != run.variant) {  // a variant's seeds come together
      got.push_back(run.variant);
    }
  }
  CHECK(got == expected);
  // The same file gives the same order (and hash); order_seed another; "listed" the file's.
  CHECK(SpecHash(MustParse(Study(asha))) == SpecHash(spec));
  const Spec other = MustParse(Study(asha + "order_seed = 7\n"));
  CHECK(SpecHash(other) != SpecHash(spec));
  const Spec listed_spec = MustParse(Study(asha + "order = \"listed\"\nbootstrap = 1\n"));
  CHECK_FALSE(listed_spec.search.shuffle);
  CHECK(listed_spec.search.bootstrap == 1);
  CHECK(ExpandRuns(listed_spec).front().variant == "baseline[lr=0.001]");
  // A grid [search] keeps the file's order: it changes nothing about which runs finish.
  CHECK(ExpandRuns(MustParse(Study(""))).front().variant == "baseline[lr=0.001]");
}

TEST_CASE("GridOrder is a seeded permutation that moves a sorted list far from sorted",
          "[spec][search]") {
  for (size_t n : {0, 1, 2, 9, 50}) {
    std::vector<size_t> order = GridOrder(n, 3);
    std::vector<size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < n; ++i) {
      CHECK(sorted[i] == i);  // a permutation
    }
    CHECK(GridOrder(n, 3) == order);  // deterministic
  }
  // Over seeds, each of 9 positions takes each point about equally often (unbiased Fisher-Yates):
  // 9,000 shuffles, 1,000 expected per cell, 5 sigma ~ 150.
  std::vector<std::vector<int>> counts(9, std::vector<int>(9, 0));
  for (int seed = 0; seed < 9000; ++seed) {
    const std::vector<size_t> order = GridOrder(9, seed);
    for (size_t position = 0; position < 9; ++position) {
      ++counts[position][order[position]];
    }
  }
  for (const std::vector<int>& row : counts) {
    for (int count : row) {
      CHECK(std::abs(count - 1000) < 150);
    }
  }
  // The default seed does not leave an ascending grid ascending.
  const std::vector<size_t> nine = GridOrder(9, 0);
  CHECK_FALSE(std::is_sorted(nine.begin(), nine.end()));
}

TEST_CASE("the search metric and goal default to [report]'s, then to the metric's own way",
          "[spec][search]") {
  const std::string asha = "[search]\nmethod = \"asha\"\nmin_steps = 30\n";
  SECTION("[report]'s first metric and its goal") {
    const Spec spec = MustParse(
        Study(asha,
              "[report]\nmetrics = [\"eval/seq_acc\", \"eval/loss\"]\ngoal = { \"eval/seq_acc\" = "
              "\"min\" }\n"));
    CHECK(spec.search.metric == "eval/seq_acc");
    CHECK(spec.search.goal == "min");
  }
  SECTION("an accuracy without a goal is better larger, as in the report") {
    const Spec spec = MustParse(Study(asha, "[report]\nmetrics = [\"eval/acc\"]\n"));
    CHECK(spec.search.metric == "eval/acc");
    CHECK(spec.search.goal == "max");
  }
  SECTION("search.goal wins over [report]'s") {
    const Spec spec = MustParse(
        Study(asha + "goal = \"max\"\n", "[report]\ngoal = { \"eval/loss\" = \"min\" }\n"));
    CHECK(spec.search.metric == "eval/loss");
    CHECK(spec.search.goal == "max");
  }
  SECTION("a grid [search] names the tuned table's metric") {
    const Spec spec = MustParse(Study("[search]\nmetric = \"eval/acc\"\n"));
    CHECK(spec.search.declared);
    CHECK_FALSE(spec.search.asha());
    CHECK(spec.search.goal == "max");
  }
}

TEST_CASE("with --set search.method=grid an asha file runs as a full grid, another experiment",
          "[spec][search]") {
  const std::string file = Study("[search]\nmethod = \"asha\"\nmin_steps = 30\n");
  const Spec asha = MustParse(file);
  const Spec grid = MustParse(file, {"search.method=grid"});
  CHECK(asha.search.asha());
  CHECK_FALSE(grid.search.asha());
  CHECK(grid.search.min_steps == 30);
  // The same runs, but asha stops some of them early: two experiments, not one.
  CHECK(ExpandRuns(asha).size() == ExpandRuns(grid).size());
  CHECK(SpecHash(asha) != SpecHash(grid));
  // A grid [search] changes no run: the hash is the file's without it.
  CHECK(SpecHash(grid) == SpecHash(MustParse(Study(""))));
  CHECK(SpecHash(MustParse(Study("[search]\nmetric = \"eval/acc\"\n"))) ==
        SpecHash(MustParse(Study(""))));
  // Every asha key decides which runs stop.
  for (const char* set : {"search.reduction=4", "search.min_steps=20", "search.within=study",
                          "search.goal=max", "search.metric=train/loss"}) {
    INFO(set);
    CHECK(SpecHash(MustParse(file, {set})) != SpecHash(asha));
  }
  CHECK(MustParse(Study(""), {"search.method=asha", "search.min_steps=10"}).search.asha());
}

TEST_CASE("a bad [search] is refused where it is written", "[spec][search][errors]") {
  CHECK(ErrorOf(Study("[search]\nmethod = \"hyperband\"\n")) ==
        "study.toml:10:10: search.method: 'hyperband' is not one of grid, asha");
  CHECK(ErrorOf(Study("[search]\ngoal = \"down\"\n")) ==
        "study.toml:10:8: search.goal: 'down' is not one of min, max");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 30\nreduction = 1\n")) ==
        "study.toml:12:13: search.reduction: 1 is out of range (must be 2..1000)");
  CHECK(ErrorOf(Study("[search]\nwithin = \"grid\"\n")) ==
        "study.toml:10:10: search.within: 'grid' is not one of variant, study");
  CHECK(ErrorOf(Study("[search]\nmin_step = 3\n")) ==
        "study.toml:10:1: unknown key 'search.min_step' (did you mean 'search.min_steps'?)");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\n")) ==
        "study.toml:10:10: search.method = \"asha\" needs search.min_steps, the step of the first "
        "rung");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 0\n")) ==
        "study.toml:11:13: search.min_steps: 0 is out of range (must be 1..1000000000)");
}

TEST_CASE("asha needs a grid, a list of seeds and a first rung before the runs end",
          "[spec][search][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[search]\nmethod = \"asha\"\nmin_steps = 10\n") ==
        "study.toml:3:10: search.method = \"asha\" needs a [grid]: it stops grid points that fall "
        "behind, and without a [grid] there is one point per variant");
  CHECK(ErrorOf("name = \"x\"\n", {"search.method=asha", "search.min_steps=10"}) ==
        "--set search.method=asha: search.method = \"asha\" needs a [grid]: it stops grid points "
        "that fall behind, and without a [grid] there is one point per variant");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 10\n",
                      "[train.seeds]\nmin = 3\nmax = 6\n")) ==
        "study.toml:13:10: search.method = \"asha\" with adaptive train.seeds is not supported: a "
        "point is judged on all its seeds, so give train.seeds as a list");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 300\n")) ==
        "study.toml:11:13: search.min_steps: 300 is not below train.steps (300): the first rung "
        "must come before the runs end");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 100\n",
                      "[[ablation]]\nname = \"short\"\ntrain.steps = 100\n")) ==
        "study.toml:14:13: search.min_steps: 100 is not below train.steps (100 in ablation "
        "'short'): the first rung must come before the runs end");
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 30\n"),
                {"train.steps=30", "train.warmup=0"}) ==
        "study.toml:11:13: search.min_steps: 30 is not below train.steps (30): the first rung "
        "must come before the runs end");
}

TEST_CASE("asha on tae-train judges only metrics tae-train reports while training",
          "[spec][search][errors]") {
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 30\nmetric = \"eval/los\"\n")) ==
        "study.toml:12:10: search.metric: tae-train does not report 'eval/los' while training "
        "(did you mean 'eval/loss'?); it reports eval/loss, eval/acc, eval/seq_acc, eval/ppl, "
        "train/loss, train/lr, train/grad_norm, perf/tokens_per_s, perf/step_ms, "
        "perf/peak_rss_mb");
  // The compression columns come after the last step: nothing to judge a rung on.
  const std::string error = ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 30\n",
                                          "[report]\nmetrics = [\"quant/eval/loss\"]\n"));
  CHECK(error.rfind("study.toml:10:11: search.metric (from report.metrics): tae-train does not "
                    "report 'quant/eval/loss' while training",
                    0) == 0);
  // A grid [search] on a final-only metric is fine: the tuned table reads final values.
  CHECK(MustParse(Study("[search]\nmetric = \"quant/eval/loss\"\n")).search.metric ==
        "quant/eval/loss");
}

TEST_CASE("asha on a command job takes any metric, and checks steps only when it passes them",
          "[spec][search]") {
  const std::string job = "[job]\ncommand = \"python3 train.py --lr {train.lr}\"\n";
  const Spec spec = MustParse(
      Study("[search]\nmethod = \"asha\"\nmin_steps = 1000\nmetric = \"val/loss\"\n", job));
  CHECK(spec.search.metric == "val/loss");
  CHECK(spec.search.min_steps == 1000);
  const std::string passes = "[job]\ncommand = \"python3 train.py --steps {train.steps}\"\n";
  CHECK(ErrorOf(Study("[search]\nmethod = \"asha\"\nmin_steps = 1000\nmetric = \"val/loss\"\n",
                      passes)) ==
        "study.toml:13:13: search.min_steps: 1000 is not below train.steps (300): the first rung "
        "must come before the runs end");
}

}  // namespace
}  // namespace tae::spec
