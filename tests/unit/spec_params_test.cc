// [params]: an experiment's own knobs, declared with typed values, set by ablations, [grid] and
// --set, rendered into a [job] command in the conventions launchers take.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

constexpr char kStudy[] = R"(name = "vq"
[params]
rotary = true
dropout = 0.1
codebook_size = 512
tag = "base"
[params.model]
dim = 64
[job]
command = "python3 train.py {params:argparse}"
[[ablation]]
name = "no-rotary"
"params.rotary" = false
[[ablation]]
name = "small-codebook"
params.codebook_size = 64
params.model.dim = 32
)";

const RunPlan& RunOf(const std::vector<RunPlan>& runs, const std::string& variant) {
  for (const RunPlan& run : runs) {
    if (run.variant == variant) {
      return run;
    }
  }
  FAIL("no run of " << variant);
  return runs.front();
}

}  // namespace

TEST_CASE("declared params are in every run's config, ablations override them", "[spec]") {
  Spec spec = MustParse(kStudy);
  CHECK(spec.base.at("params.rotary") == true);
  CHECK(spec.base.at("params.dropout").get<double>() == 0.1);
  CHECK(spec.base.at("params.codebook_size") == 512);
  CHECK(spec.base.at("params.model.dim") == 64);
  std::vector<RunPlan> runs = ExpandRuns(spec);
  REQUIRE(runs.size() == 9);
  CHECK(RunOf(runs, "no-rotary").config.at("params.rotary") == false);
  CHECK(RunOf(runs, "no-rotary").config.at("params.codebook_size") == 512);
  CHECK(RunOf(runs, "small-codebook").config.at("params.codebook_size") == 64);
  CHECK(RunOf(runs, "small-codebook").config.at("params.model.dim") == 32);
}

TEST_CASE("each renderer writes every param in its launcher's convention", "[spec]") {
  Spec spec = MustParse(kStudy);
  const nlohmann::json config = RunOf(ExpandRuns(spec), "no-rotary").config;
  CHECK(config.at("job.command") ==
        "python3 train.py --codebook_size 512 --dropout 0.1 --model.dim 64 --rotary false --tag "
        "base");
  CHECK(RenderParams("ml_collections", config) ==
        "--config.codebook_size=512 --config.dropout=0.1 --config.model.dim=64 "
        "--config.rotary=False --config.tag=base");
  CHECK(RenderParams("hydra", config) ==
        "codebook_size=512 dropout=0.1 model.dim=64 rotary=false tag=base");
  // Values that need quoting are quoted for /bin/sh, lists keep their shape.
  nlohmann::json odd = {{"params.name", "a b"}, {"params.layers", {1, 2}}, {"train.lr", 0.5}};
  CHECK(RenderParams("argparse", odd) == "--layers '[1,2]' --name 'a b'");
  CHECK(RenderParams("ml_collections", odd) == "'--config.layers=[1, 2]' '--config.name=a b'");
  // A configurator script's --key=value, read as Python literals (each word shell-quoted).
  nlohmann::json literal = {{"params.compile", false},
                            {"params.dropout", 0.1},
                            {"params.init_from", "resume"},
                            {"params.none", nullptr},
                            {"params.note", "a\\b\n"},
                            {"params.quote", "it's"},
                            {"params.tags", {"a", true, nullptr, 3}},
                            {"train.lr", 0.5}};
  CHECK(RenderParams("python", literal) ==
        absl::StrJoin({ShellQuote("--compile=False"), ShellQuote("--dropout=0.1"),
                       ShellQuote("--init_from='resume'"), ShellQuote("--none=None"),
                       ShellQuote(R"(--note='a\\b\n')"), ShellQuote(R"(--quote="it's")"),
                       ShellQuote("--tags=['a', True, None, 3]")},
                      " "));
  CHECK(RenderParams("hydra", odd) == "'layers=[1,2]' 'name=a b'");
  // One param as a placeholder of its own.
  CHECK(ExpandCommand("run --lr {train.lr} --rotary={params.rotary}",
                      {{"train.lr", 0.5}, {"params.rotary", false}}) ==
        "run --lr 0.5 --rotary=false");
}

TEST_CASE("params change the spec hash and can be varied in [grid] and by --set", "[spec]") {
  Spec spec = MustParse(kStudy);
  Spec other = MustParse(std::string(kStudy), {"params.dropout=0.2"});
  CHECK(other.base.at("params.dropout").get<double>() == 0.2);
  CHECK(SpecHash(other) != SpecHash(spec));
  Spec grid = MustParse(R"(name = "g"
[params]
width = 8
[grid]
params.width = [8, 16]
)");
  std::vector<RunPlan> runs = ExpandRuns(grid);
  REQUIRE(runs.size() == 6);
  CHECK(runs[0].variant == "baseline[width=8]");
  CHECK(runs[3].config.at("params.width") == 16);
}

TEST_CASE("undeclared or mistyped params are refused where they are written", "[spec]") {
  CHECK(ErrorOf(R"(name = "x"
[params]
rotary = true
[[ablation]]
name = "a"
"params.rotry" = false
)") == "study.toml:6:1: unknown key 'params.rotry' (did you mean 'params.rotary'?)");
  CHECK(ErrorOf(R"(name = "x"
[params]
rotary = true
[[ablation]]
name = "a"
"params.rotary" = "no"
)") == "study.toml:6:19: params.rotary: expected a boolean, got a string");
  CHECK(ErrorOf(R"(name = "x"
[params]
size = 4
[[ablation]]
name = "a"
params.size = 4.5
)") == "study.toml:6:15: params.size: expected an integer, got a float");
  CHECK(ErrorOf(R"(name = "x"
[params]
"bad name" = 1
)") == "study.toml:3:1: params.bad name: a param name is letters, digits, '_' and '-' (it "
       "becomes a command-line flag)");
  CHECK(ErrorOf(R"(name = "x"
[params]
when = 2024-01-01
)") == "study.toml:3:8: params.when: a param is an integer, float, boolean, string or array, "
       "got a date");
  CHECK(ErrorOf(R"(name = "x"
[params]
rotary = true
)",
                {"params.rotory=false"}) ==
        "--set params.rotory=false: unknown key 'params.rotory' (did you mean 'params.rotary'?)");
  CHECK(ErrorOf(R"(name = "x")", {"params.width=3"}) ==
        "--set params.width=3: unknown key 'params.width' (a param must be declared in the file's "
        "[params] first)");
  CHECK(ErrorOf(R"(name = "x"
[params]
width = 8
[grid]
params.height = [1, 2]
)") == "study.toml:5:8: unknown key 'params.height' (declare it in [params] first)");
}

TEST_CASE("a renderer or placeholder that does not exist is refused", "[spec]") {
  CHECK(ErrorOf(R"(name = "x"
[params]
rotary = true
[job]
command = "python3 t.py {params:argparser}"
)") == "study.toml:5:11: job.command: unknown renderer {params:argparser} (did you mean "
       "'argparse'?); the renderers are {params:argparse}, {params:ml_collections}, "
       "{params:hydra} and {params:python}");
  CHECK(ErrorOf(R"(name = "x"
[params]
rotary = true
[job]
command = "python3 t.py {params.rotari}"
)") == "study.toml:5:11: job.command: unknown placeholder {params.rotari} (did you mean "
       "'params.rotary'?); placeholders name run keys such as {train.lr} or {train.seed}");
}

}  // namespace tae::spec

namespace tae::spec {

TEST_CASE("[report] names the metrics a study shows and which way each is better", "[spec]") {
  Spec spec = MustParse(R"(name = "r"
[report]
metrics = ["val/loss", "Rate"]
goal = { "val/loss" = "min", "Rate" = "max" }
)");
  CHECK(spec.report_metrics == std::vector<std::string>{"val/loss", "Rate"});
  CHECK(spec.report_goal ==
        std::map<std::string, std::string>{{"val/loss", "min"}, {"Rate", "max"}});
  // Not part of the hash: the runs are the same.
  CHECK(SpecHash(spec) == SpecHash(MustParse(R"(name = "r")")));
  CHECK(ErrorOf(R"(name = "r"
[report]
goal = { "Rate" = "up" }
)") == "study.toml:3:19: report.goal.Rate: expected \"min\" or \"max\"");
  CHECK(ErrorOf(R"(name = "r"
[report]
metrics = ["a", "a"]
)") == "study.toml:3:17: report.metrics: 'a' is listed twice");
  CHECK(ErrorOf(R"(name = "r"
[report]
metric = ["a"]
)") == "study.toml:3:1: unknown key 'report.metric' (did you mean 'report.metrics'?)");
}

}  // namespace tae::spec
