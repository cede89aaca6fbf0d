// [scale] in the experiment file (common/spec): a ladder of sizes applied to every variant alike,
// its runs and names, the hash, and every refusal with its place.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

std::string Ladder(const std::string& scale, const std::string& extra = "") {
  return "name = \"ladder\"\n"
         "[train]\n"
         "steps = 100\n"
         "seeds = [0, 1]\n" +
         extra +
         "[[ablation]]\n"
         "name = \"rms\"\n"
         "model.norm = \"rmsnorm\"\n"
         "[scale]\n" +
         scale;
}

const std::string kFour =
    "\"model.d_model\" = [32, 64, 128, 256]\n"
    "\"model.layers\" = [1, 2, 2, 4]\n";

TEST_CASE("a [scale] ladder is read rung by rung", "[spec][scale]") {
  const Spec spec = MustParse(Ladder(kFour + "params = [1e4, 4e4, 1.6e5, 6.4e5]\n"
                                             "stop_if = { rungs = 2, band = 0.05 }\n"));
  REQUIRE(spec.scale.declared());
  REQUIRE(spec.scale.rungs.size() == 4);
  CHECK(spec.scale.keys == std::vector<std::string>{"model.d_model", "model.layers"});
  CHECK(spec.scale.rungs[2] == nlohmann::json{{"model.d_model", 128}, {"model.layers", 2}});
  CHECK(spec.scale.params == std::vector<double>{1e4, 4e4, 1.6e5, 6.4e5});
  CHECK(spec.scale.stop_if.rungs == 2);
  CHECK(spec.scale.stop_if.band == Approx(0.05));
  CHECK_FALSE(MustParse(Ladder("\"model.layers\" = [1, 2]\n")).scale.stop_if.rungs > 0);
}

TEST_CASE("a ladder's runs: every variant at every rung, small rungs first", "[spec][scale]") {
  const Spec spec = MustParse(Ladder(kFour));
  const std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 4 * 2 * 2);
  for (size_t i = 0; i < runs.size(); ++i) {
    const int64_t rung = static_cast<int64_t>(i / 4);
    INFO(runs[i].variant);
    CHECK(runs[i].grid.at(kRungKey) == rung);
    CHECK(runs[i].config.at(kRungKey) == rung);
    CHECK(runs[i].config.at("model.d_model") == spec.scale.rungs[rung].at("model.d_model"));
    CHECK(runs[i].config.at("model.layers") == spec.scale.rungs[rung].at("model.layers"));
    CHECK(RungOf(runs[i].variant) == rung);
  }
  CHECK(runs[0].variant == "baseline[rung=0]");
  CHECK(runs[2].variant == "rms[rung=0]");
  CHECK(runs[2].config.at("model.norm") == "rmsnorm");
  CHECK(runs[15].variant == "rms[rung=3]");
  CHECK(BaselineFor(runs[15].variant) == "baseline[rung=3]");
  // ResolveConfig gives what ExpandRuns gave.
  CHECK(ResolveConfig(spec, "rms", 1, runs[15].grid) == runs[15].config);
}

TEST_CASE("a ladder with a [grid]: the rung is the slowest axis", "[spec][scale]") {
  const Spec spec =
      MustParse(Ladder("\"model.d_model\" = [32, 64]\n", "[grid]\n\"train.lr\" = [1e-3, 1e-2]\n"));
  const std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 2 * 2 * 2 * 2);
  CHECK(runs[0].variant == "baseline[rung=0,lr=0.001]");
  CHECK(runs.back().variant == "rms[rung=1,lr=0.01]");
  CHECK(AblationAtRung(runs.back().variant) == "rms[rung=1]");
  CHECK(WithoutRung(runs.back().variant) == "rms[lr=0.01]");
  CHECK(WithoutRung("rms[rung=1]") == "rms");
  CHECK(AblationAtRung("rms[lr=0.01]") == "rms");
  CHECK(RungOf("rms[lr=0.01]") == -1);
  CHECK(RungOf("rms[rung=01]") == -1);
  CHECK(RungOf("rms[rung=12,lr=1]") == 12);
  CHECK(RungOf("rms") == -1);
  CHECK(RungOf("rms[rung=]") == -1);
  for (const RunPlan& run : runs) {
    CHECK(RungOf(run.variant) == run.grid.at(kRungKey).get<int>());
  }
}

TEST_CASE("the ladder enters the hash, and a spec without one keeps its hash", "[spec][scale]") {
  const std::string plain =
      "name = \"ladder\"\n[train]\nsteps = 100\nseeds = [0, 1]\n"
      "[[ablation]]\nname = \"rms\"\nmodel.norm = \"rmsnorm\"\n";
  const std::string a = SpecHash(MustParse(Ladder(kFour)));
  CHECK(a != SpecHash(MustParse(plain)));
  CHECK(a != SpecHash(MustParse(Ladder("\"model.d_model\" = [32, 64, 128, 512]\n"
                                       "\"model.layers\" = [1, 2, 2, 4]\n"))));
  CHECK(a != SpecHash(MustParse(Ladder(kFour + "params = [1e4, 4e4, 1.6e5, 6.4e5]\n"))));
  CHECK(a == SpecHash(MustParse(Ladder("\"model.layers\" = [1, 2, 2, 4]\n"
                                       "\"model.d_model\" = [32, 64, 128, 256]\n"))));
}

TEST_CASE("[scale] refusals say where and why", "[spec][scale]") {
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64, 128]\n\"model.layers\" = [1, 2]\n")) ==
        "study.toml:10:1: [scale] model.layers has 2 values but model.d_model has 3: every "
        "laddered key gives one value per rung");
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32]\n")).find("at least 2 rungs") !=
        std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 32]\n")).find("rungs 0 and 1 are the same") !=
        std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = 32\n")).find("one per rung") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.dmodel\" = [32, 64]\n")).find("unknown key 'model.dmodel'") !=
        std::string::npos);
  CHECK(ErrorOf(Ladder("\"train.seeds\" = [[0], [1]]\n")).find("cannot be laddered") !=
        std::string::npos);
  CHECK(ErrorOf(Ladder("params = [1e4, 4e4]\n")).find("ladders no run key") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nparams = [1e4]\n")) ==
        "study.toml:10:1: scale.params has 1 values for 2 rungs");
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nparams = [4e4, 1e4]\n"))
            .find("must grow from rung to rung") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nparams = [0, 1e4]\n"))
            .find("parameter counts >= 1") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nstop_if = { rungs = 1, band = 0.1 }\n"))
            .find("rungs must be >= 2") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nstop_if = { rungs = 2, band = 0.1 }\n"))
            .find("leaves no larger rung") != std::string::npos);
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\nstop_if = { rung = 2 }\n"))
            .find("expected { rungs = K, band = B }") != std::string::npos);
  // The ladder is every variant's: an ablation may not set a laddered key, nor [grid] vary one.
  CHECK(ErrorOf("name = \"x\"\n[[ablation]]\nname = \"wide\"\nmodel.d_model = 512\n"
                "[scale]\n\"model.d_model\" = [32, 64]\n") ==
        "study.toml:4:7: ablation 'wide' sets model.d_model, which [scale] ladders for every "
        "variant alike (line 6); drop one of the two");
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 64]\n", "[grid]\n\"model.d_model\" = [8, 16]\n"))
            .find("both laddered by [scale] and varied by [grid]") != std::string::npos);
  CHECK(ErrorOf(Ladder(kFour), {"model.layers=3"}).find("cannot also be set") != std::string::npos);
  // Each rung's config passes the cross-key checks, blamed at the rung's value.
  CHECK(ErrorOf(Ladder("\"model.d_model\" = [32, 66]\n")).find("study.toml:9:") == 0);
}

TEST_CASE("a ladder counts against the run limit", "[spec][scale]") {
  std::string seeds = "[";
  for (int i = 0; i < 1300; ++i) {
    seeds += (i ? ", " : "") + std::to_string(i);
  }
  seeds += "]";
  const std::string text = "name = \"big\"\n[train]\nseeds = " + seeds +
                           "\n[[ablation]]\nname = \"rms\"\nmodel.norm = \"rmsnorm\"\n"
                           "[scale]\n\"model.layers\" = [1, 2, 3, 4]\n";
  CHECK(ErrorOf(text).find("10400 runs (4 rungs x 1 grid points x 2 variants x 1300 seeds)") !=
        std::string::npos);
}

}  // namespace
}  // namespace tae::spec
