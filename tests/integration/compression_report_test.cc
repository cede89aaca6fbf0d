// Compression as ablation-table columns, through the real binaries (docs/engine.md
// "Compression"): a study that asks for head pruning and int8 evaluation gets those columns in
// `taectl report` next to the uncompressed ones, with the same statistics, and
// `taectl plot --pruning` draws eval loss against heads kept.

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/harness.h"

namespace tae::testing {

TEST_CASE(
    "report shows the pruning and int8 columns beside the uncompressed baseline, and plot "
    "--pruning draws loss against heads kept",
    "[compression]") {
  Cluster cluster(1, 2);
  REQUIRE(cluster.started());
  const std::string spec =
      "name = \"squeeze\"\n[model]\nlayers = 2\nd_model = 32\nheads = 4\n"
      "[train]\ntask = \"copy\"\nvocab = 8\nseq_len = 16\nbatch_size = 16\nlr = 0.01\n"
      "warmup = 5\nsteps = 150\neval_every = 150\neval_batches = 2\nthreads = 1\n"
      "seeds = [0, 1]\n"
      "[eval]\nprune_heads_by_importance = [0.25, 0.5]\nquantize = \"int8-dynamic\"\n"
      "[[ablation]]\nname = \"one-layer\"\n\"model.layers\" = 1\n";
  const std::string path = cluster.dir().Write("squeeze.toml", spec);
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", path}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "400"}, 430);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);

  const nlohmann::json report = cluster.TaectlJson({"report", exp});
  const std::vector<std::string> metrics = report.at("metrics").get<std::vector<std::string>>();
  INFO(report.dump());
  CHECK(metrics == std::vector<std::string>{"eval/loss", "eval/acc", "prune25/eval/loss",
                                            "prune25/eval/acc", "prune50/eval/loss",
                                            "prune50/eval/acc", "quant/eval/loss", "quant/eval/acc",
                                            "model/linear_bytes", "quant/linear_bytes",
                                            "eval/tokens_per_s", "quant/eval/tokens_per_s"});
  CHECK(report.at("metrics_source") == "default");
  for (const nlohmann::json& row : report.at("rows")) {
    INFO(row.at("variant"));
    const nlohmann::json& m = row.at("metrics");
    for (const std::string& name : metrics) {
      CHECK(m.at(name).at("n") == 2);
    }
    // int8 stays close to fp32; its weights are about 4x smaller.
    CHECK(std::abs(m.at("quant/eval/loss").at("mean").get<double>() -
                   m.at("eval/loss").at("mean").get<double>()) < 0.1);
    CHECK(m.at("model/linear_bytes").at("mean").get<double>() /
              m.at("quant/linear_bytes").at("mean").get<double>() >
          3.5);
  }
  // The one-layer variant has half the heads: its prune50 keeps 2 of 4.
  const nlohmann::json runs = cluster.TaectlJson({"runs", exp});
  for (const nlohmann::json& run : runs) {
    const nlohmann::json shown =
        cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int>())});
    const double kept = shown.at("final_metrics").at("prune50/heads_kept").get<double>();
    CHECK(kept == (run.at("variant") == "one-layer" ? 2 : 4));
  }

  TempDir out;
  const std::string svg = out.path() + "/pruning.svg";
  CommandResult plotted = cluster.Taectl({"plot", exp, "--pruning", "-o", svg});
  INFO(plotted.out << plotted.err);
  REQUIRE(plotted.exit_code == 0);
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("heads kept") != std::string::npos);
  CHECK(text.str().find("prune/eval/loss") != std::string::npos);
  CommandResult wrong = cluster.Taectl({"plot", exp, "--pruning", "--metric", "eval/loss"});
  CHECK(wrong.exit_code != 0);
  CHECK(wrong.err.find("with --pruning, prune/eval/loss or prune/eval/acc") != std::string::npos);
}

}  // namespace tae::testing
