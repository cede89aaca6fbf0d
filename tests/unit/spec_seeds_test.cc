// train.seeds as a table (adaptive seeds) and [report] floor in the experiment file.
#include <catch2/catch.hpp>

#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

}  // namespace

TEST_CASE("train.seeds as a table starts min seeds and keeps the design", "[spec]") {
  const Spec spec = MustParse(
      "name = \"x\"\n[train]\nseeds = { min = 3, max = 12, alpha = 0.01, margin = { \"eval/acc\" = "
      "0.02 } }\n[[ablation]]\nname = \"one-layer\"\nmodel.layers = 1\n");
  CHECK(spec.seeds_design.adaptive);
  CHECK(spec.seeds_design.min == 3);
  CHECK(spec.seeds_design.max == 12);
  CHECK(spec.seeds_design.alpha == 0.01);
  CHECK(spec.seeds_design.margin == std::map<std::string, double>{{"eval/acc", 0.02}});
  CHECK(spec.seeds == std::vector<int64_t>{0, 1, 2});
  CHECK(ExpandRuns(spec).size() == 6);  // 2 variants x min seeds

  const Spec defaults = MustParse("name = \"x\"\n[train]\nseeds = { max = 6 }\n");
  CHECK(defaults.seeds_design.min == 3);
  CHECK(defaults.seeds_design.alpha == 0.05);
  CHECK(defaults.seeds_design.margin.empty());

  // A list stays a list, and keeps its hash; the design is part of an adaptive spec's hash.
  const Spec list = MustParse("name = \"x\"\n[train]\nseeds = [0, 1, 2]\n");
  CHECK_FALSE(list.seeds_design.adaptive);
  CHECK(SpecHash(list) != SpecHash(defaults));
  CHECK(SpecHash(defaults) != SpecHash(MustParse("name = \"x\"\n[train]\nseeds = { max = 7 }\n")));
}

TEST_CASE("bad train.seeds tables are refused where they are wrong", "[spec][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { min = 1, max = 4 }\n") ==
        "study.toml:3:17: train.seeds.min: 1 is out of range (must be 2..100)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { min = 5, max = 4 }\n") ==
        "study.toml:3:26: train.seeds.max: 4 is below min (5)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { max = 101 }\n") ==
        "study.toml:3:17: train.seeds.max: 101 is out of range (must be 2..100)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { max = 4, alpha = 0.5 }\n") ==
        "study.toml:3:28: train.seeds.alpha: 0.5 is out of range (must be > 0 and < 0.5)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { max = 4, margin = { \"eval/acc\" = 0 } }\n") ==
        "study.toml:3:44: train.seeds.margin.eval/acc: 0 must be > 0");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = { max = 4, mni = 3 }\n") ==
        "study.toml:3:20: train.seeds.mni: unknown key (train.seeds takes min, max, alpha and "
        "margin)");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = \"many\"\n") ==
        "study.toml:3:9: train.seeds: expected an array of integers or a table { min, max, alpha, "
        "margin }, got a string");
  // The list form keeps its checks.
  CHECK(ErrorOf("name = \"x\"\n[train]\nseeds = [1, 1]\n") ==
        "study.toml:3:13: train.seeds[1]: 1 is listed twice");
}

TEST_CASE("report.floor is a table of metric = number", "[spec]") {
  const Spec spec =
      MustParse("name = \"x\"\n[report]\nfloor = { \"val/acc\" = 0.5, \"val/loss\" = 3 }\n");
  CHECK(spec.report_floor == std::map<std::string, double>{{"val/acc", 0.5}, {"val/loss", 3.0}});
  CHECK(MustParse("name = \"x\"\n").report_floor.empty());
  CHECK(ErrorOf("name = \"x\"\n[report]\nfloor = { \"val/acc\" = \"half\" }\n") ==
        "study.toml:3:23: report.floor.val/acc: expected a number, got a string");
  CHECK(ErrorOf("name = \"x\"\n[report]\nfloor = 0.5\n") ==
        "study.toml:3:9: report.floor: expected a table of metric = number, got a float");
}

}  // namespace tae::spec
