// search.confirm in the experiment file (common/spec): its default, the hash, and its refusals.
#include <catch2/catch.hpp>
#include <string>

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

TEST_CASE("search.confirm defaults to 0 and is read from [search] or --set", "[spec][confirm]") {
  CHECK(MustParse(Study("")).search.confirm == 0);
  const Spec spec = MustParse(Study("[search]\nconfirm = 3\n"));
  CHECK(spec.search.declared);
  CHECK(spec.search.confirm == 3);
  CHECK_FALSE(spec.search.asha());
  CHECK_FALSE(spec.base.contains("search.confirm"));  // an experiment key, not run config
  CHECK(MustParse(Study(""), {"search.confirm=2"}).search.confirm == 2);
  const Spec asha =
      MustParse(Study("[search]\nmethod = \"asha\"\nmin_steps = 30\nconfirm = 4\n"));
  CHECK(asha.search.asha());
  CHECK(asha.search.confirm == 4);
  // The search's own runs are the same: confirmation runs are added after it.
  CHECK(ExpandRuns(spec).size() == ExpandRuns(MustParse(Study(""))).size());
}

TEST_CASE("search.confirm enters the hash only when it is set", "[spec][confirm][hash]") {
  const std::string plain = SpecHash(MustParse(Study("")));
  CHECK(SpecHash(MustParse(Study("[search]\nconfirm = 0\n"))) == plain);
  const std::string three = SpecHash(MustParse(Study("[search]\nconfirm = 3\n")));
  CHECK(three != plain);
  CHECK(SpecHash(MustParse(Study("[search]\nconfirm = 2\n"))) != three);
  // Which points are confirmed depends on the metric and goal they are chosen on.
  CHECK(SpecHash(MustParse(Study("[search]\nconfirm = 3\ngoal = \"max\"\n"))) != three);
  CHECK(SpecHash(MustParse(Study("[search]\nconfirm = 3\nmetric = \"eval/acc\"\n"))) != three);
  const std::string asha = "[search]\nmethod = \"asha\"\nmin_steps = 30\n";
  CHECK(SpecHash(MustParse(Study(asha))) != SpecHash(MustParse(Study(asha + "confirm = 2\n"))));
}

TEST_CASE("search.confirm is refused without a grid or with adaptive seeds",
          "[spec][confirm][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[search]\nconfirm = 3\n") ==
        "study.toml:3:11: search.confirm needs a [grid]: it re-runs each variant's chosen grid "
        "point on fresh seeds, and without a [grid] there is one point per variant and no choice "
        "to confirm (add seeds to train.seeds instead)");
  CHECK(ErrorOf("name = \"x\"\n", {"search.confirm=3"}) ==
        "--set search.confirm=3: search.confirm needs a [grid]: it re-runs each variant's chosen "
        "grid point on fresh seeds, and without a [grid] there is one point per variant and no "
        "choice to confirm (add seeds to train.seeds instead)");
  CHECK(ErrorOf(Study("[search]\nconfirm = 3\n", "[train.seeds]\nmin = 3\nmax = 6\n")) ==
        "study.toml:13:11: search.confirm with adaptive train.seeds is not supported: adaptive "
        "seeds keep adding seeds to the grid points, so the search has no end after which to "
        "confirm; give train.seeds as a list");
  CHECK(ErrorOf(Study("[search]\nconfirm = -1\n")) ==
        "study.toml:10:11: search.confirm: -1 is out of range (must be 0..1000)");
  // The confirmation runs count against the experiment's limit: 6 variants x (3 points x 500
  // seeds + 1000) runs.
  std::string ablations;
  for (int i = 0; i < 4; ++i) {
    ablations += "[[ablation]]\nname = \"a" + std::to_string(i) + "\"\nmodel.layers = " +
                 std::to_string(i + 3) + "\n";
  }
  std::string seeds = "train.seeds=[0";
  for (int i = 1; i < 500; ++i) {
    seeds += "," + std::to_string(i);
  }
  seeds += "]";
  const std::string study = Study("[search]\nconfirm = 1000\n", ablations);
  CHECK(MustParse(Study("", ablations), {seeds}).search.confirm == 0);
  CHECK(ErrorOf(study, {seeds}).find("search.confirm: with 1000 confirmation runs per variant the "
                                     "experiment grows to 15000 runs; at most 10000 are "
                                     "allowed") != std::string::npos);
}

}  // namespace
}  // namespace tae::spec
