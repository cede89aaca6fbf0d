// A researcher's own program as a first-class job: its knobs in [params] reach it (argparse,
// ml_collections and hydra command lines, TAE_CONFIG), reports and plots show its own metrics
// without --metric, and a gang study runs on one machine's local slice.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

void WriteFile(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// Prints its argv on stderr (a log line), parses the argparse words (before the first "--"),
// reads its config with tae_log.config(), and logs what it got as metrics named like a user's.
constexpr char kScript[] = R"(import argparse, json, sys
import tae_log
argv = sys.argv[1:]
print("ARGV " + json.dumps(argv), file=sys.stderr, flush=True)
parser = argparse.ArgumentParser()
parser.add_argument("--rotary", choices=["true", "false"], required=True)
parser.add_argument("--dropout", type=float, required=True)
parser.add_argument("--width", type=int, required=True)
args = parser.parse_args(argv[:argv.index("--")])
cfg = tae_log.config()
params = cfg["params"]
assert params["rotary"] == (args.rotary == "true"), (params, args)
assert params["width"] == args.width and abs(params["dropout"] - args.dropout) < 1e-12
for step in (1, 2):
    tae_log.log(step=step, Loss=args.width / 8.0 + (0.5 if args.rotary == "false" else 0.0),
                Rate=100.0 * args.width, cfg_width=cfg["params"]["width"])
)";

constexpr char kStudy[] = R"(name = "byom-params"
[params]
rotary = true
dropout = 0.1
width = 8
[train]
seeds = [0]
[[ablation]]
name = "no-rotary"
"params.rotary" = false
[grid]
params.width = [8, 16]
[job]
code = "src"
command = "python3 show.py {params:argparse} -- {params:ml_collections} -- {params:hydra}"
)";

}  // namespace

TEST_CASE(
    "declared params reach a job's command line and TAE_CONFIG, and reports show its own metrics") {
  Cluster cluster(1, 2);
  TempDir work;
  WriteFile(work.path() + "/src/show.py", kScript);
  const std::string spec = work.Write("study.toml", kStudy);
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"});
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  nlohmann::json runs = cluster.TaectlJson({"runs", "byom-params"});
  REQUIRE(runs.size() == 4);

  // The exact words each renderer gave the program, for the no-rotary run at width 16.
  int64_t run = 0;
  for (const auto& r : runs) {
    CHECK(r.at("state") == "succeeded");
    if (r.at("variant") == "no-rotary[width=16]") {
      run = r.at("id").get<int64_t>();
    }
  }
  REQUIRE(run > 0);
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  INFO("logs: " << logs.exit_code << " " << logs.out << logs.err);
  CHECK(logs.err.find(R"(ARGV ["--dropout", "0.1", "--rotary", "false", "--width", "16", "--", )"
                      R"("--config.dropout=0.1", "--config.rotary=False", "--config.width=16", )"
                      R"("--", "dropout=0.1", "rotary=false", "width=16"])") != std::string::npos);

  // No --metric: the runs' own metrics, and the report says so.
  CommandResult report = cluster.Taectl({"report", "byom-params"});
  INFO(report.out << report.err);
  REQUIRE(report.exit_code == 0);
  CHECK(report.out.find("Loss") != std::string::npos);
  CHECK(report.out.find("Rate") != std::string::npos);
  CHECK(report.out.find("eval/loss") == std::string::npos);
  CHECK(report.err.find("its runs' own metrics: Loss, Rate, cfg_width") != std::string::npos);
  nlohmann::json table = cluster.TaectlJson({"report", "byom-params"});
  CHECK(table.at("metrics_source") == "runs");
  int rows = 0;
  for (const auto& row : table.at("rows")) {
    const std::string variant = row.at("variant");
    const double width = variant.find("width=16") != std::string::npos ? 16 : 8;
    const double loss = width / 8.0 + (variant.rfind("no-rotary", 0) == 0 ? 0.5 : 0.0);
    CHECK(row.at("metrics").begin().key() == "Loss");
    CHECK(row.at("metrics").at("Loss").at("mean").get<double>() == Approx(loss));
    ++rows;
  }
  CHECK(rows == 4);

  // The runs listing shows the same metrics, not columns of dashes.
  CommandResult listed = cluster.Taectl({"runs", "byom-params"});
  INFO(listed.out);
  CHECK(listed.out.find(" Loss ") != std::string::npos);
  CHECK(listed.out.find(" Rate ") != std::string::npos);
  CHECK(listed.out.find("eval/loss") == std::string::npos);

  // plot without --metric draws the first of them instead of failing.
  const std::string svg = work.path() + "/loss.svg";
  CommandResult plot = cluster.Taectl({"plot", "byom-params", "-o", svg});
  INFO(plot.out << plot.err);
  CHECK(plot.exit_code == 0);
  CHECK(plot.err.find("plotting Loss") != std::string::npos);
  CHECK(std::filesystem::file_size(svg) > 0);

  // A param nobody declared, or a renderer that does not exist: refused at submit, nothing stored.
  const std::string undeclared = work.Write("bad.toml", std::string(kStudy) + R"(
[[ablation]]
name = "typo"
"params.rotory" = false
)");
  CommandResult refused = cluster.Taectl({"submit", undeclared});
  CHECK(refused.exit_code == 2);
  INFO(refused.err);
  CHECK(refused.err.find("bad.toml:19:1: unknown key 'params.rotory' (did you mean "
                         "'params.rotary'?)") != std::string::npos);
  CHECK(cluster.TaectlJson({"ls"}).size() == 1);
}

TEST_CASE("taectl up --slice makes the local agents one slice, and a gang study runs there") {
  Cluster cluster(2, 1, nullptr, {"--slice", "local"});
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  REQUIRE(agents.size() == 2);
  std::set<std::string> workers;
  for (const auto& agent : agents) {
    CHECK(agent.at("labels").at("slice") == "local");
    workers.insert(agent.at("labels").at("worker").get<std::string>());
  }
  CHECK(workers == std::set<std::string>{"0", "1"});

  TempDir work;
  const std::string spec = work.Write("gang.toml", CopyTaskSpec("local-gang", 2, 20, 0));
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"});
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  nlohmann::json runs = cluster.TaectlJson({"runs", "local-gang"});
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("state") == "succeeded");

  CommandResult bad = cluster.Taectl({"up", "--slice", "no spaces"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--slice: a name of at most 63 letters") != std::string::npos);
}

TEST_CASE(
    "the byom example runs its [params] ablations, a 2-host variant, and reports its own "
    "metrics") {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}, 60).exit_code != 0) {
    TAE_SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
  }
  // The example says `python3`: Debian's, with python3-torch, first on the agents' PATH.
  const char* path = std::getenv("PATH");
  const std::string saved = path != nullptr ? path : "";
  setenv("PATH", ("/usr/bin:" + saved).c_str(), 1);
  Cluster cluster(2, 2, nullptr, {"--slice", "local"});
  setenv("PATH", saved.c_str(), 1);
  const std::string spec = std::string(TAE_SOURCE_DIR) + "/examples/byom/study.toml";
  CommandResult submitted =
      cluster.Taectl({"submit", spec, "--set", "params.steps=20", "--set", "params.eval_every=10",
                      "--set", "params.checkpoint_every=10", "--wait", "--timeout", "600"},
                     660);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  nlohmann::json runs = cluster.TaectlJson({"runs", "byom"});
  REQUIRE(runs.size() == 10);
  for (const auto& run : runs) {
    CHECK(run.at("state") == "succeeded");
  }
  // Its [report] metrics, no --metric; every variant, the 2-host one included, has both seeds.
  nlohmann::json report = cluster.TaectlJson({"report", "byom"});
  CHECK(report.at("metrics") == nlohmann::json::array({"val/loss", "val/acc", "Rate"}));
  CHECK(report.at("metrics_source") == "spec");
  std::set<std::string> variants;
  for (const auto& row : report.at("rows")) {
    variants.insert(row.at("variant").get<std::string>());
    CHECK(row.at("runs") == 2);
    CHECK(row.at("metrics").at("val/loss").at("n") == 2);
  }
  CHECK(variants ==
        std::set<std::string>{"baseline", "learned-pos", "dropout", "one-layer", "two-hosts"});
}

}  // namespace tae::testing
