// The ablation table claims no more than its runs carry, end to end through taed (issue 52): a
// family of ten comparisons where one null variant has a naive p below 0.05 calls it undecided
// (Holm), while a large effect is still different and an uncorrected table would call both;
// every compared cell carries its interval; a program that ignores its seed gets a banner and no
// verdict; the frontier says what its estimates are and how it chose.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// score of (train.lr, seed) from a table: baseline 0.001; eight null variants 0.002..0.009 (seed
// noise of SD 0.1 around 0); "lucky" 0.010, a null variant whose seeds happened high (Welch's p
// 0.014 against the baseline, scipy; 0.034 at the table's calibrated dof, so uncorrected it is
// "different"; Holm over the ten: 0.30); "big" 0.011, ten above. model/params grows with lr, so
// the most expensive is "big".
constexpr char kScore[] = R"(#!/bin/sh
awk -v lr="$1" -v seed="$2" '$1 + 0 == lr + 0 && $2 == seed {
  printf "score=%s model/params=%d\n", $3, lr * 1000000 }' table.txt
)";

constexpr char kTable[] = R"(0.001 0 0.0
0.001 1 0.1
0.001 2 -0.1
0.002 0 -0.08
0.002 1 -0.132
0.002 2 -0.025
0.003 0 0.042
0.003 1 0.114
0.003 2 0.011
0.004 0 -0.055
0.004 1 -0.078
0.004 2 0.075
0.005 0 0.163
0.005 1 0.027
0.005 2 -0.123
0.006 0 -0.096
0.006 1 0.16
0.006 2 0.02
0.007 0 -0.173
0.007 1 -0.008
0.007 2 -0.116
0.008 0 -0.063
0.008 1 -0.049
0.008 2 -0.071
0.009 0 0.055
0.009 1 -0.006
0.009 2 -0.059
0.010 0 0.3
0.010 1 0.4
0.010 2 0.25
0.011 0 10.0
0.011 1 10.1
0.011 2 9.95
)";

std::string Study(const std::string& name, const std::string& correction) {
  std::string spec = "name = \"" + name + "\"\n[train]\nlr = 0.001\nseeds = [0, 1, 2]\n";
  for (int k = 2; k <= 11; ++k) {
    const std::string variant = k == 10 ? "lucky" : k == 11 ? "big" : "null" + std::to_string(k);
    spec += "[[ablation]]\nname = \"" + variant + "\"\n\"train.lr\" = 0.0" + (k < 10 ? "0" : "") +
            std::to_string(k) + "\n";
  }
  spec += "[report]\nmetrics = [\"score\"]\n";
  if (!correction.empty()) {
    spec += "correction = \"" + correction + "\"\n";
  }
  spec += "[job]\ncode = \"src\"\ncommand = \"sh score.sh {train.lr} {train.seed}\"\n";
  return spec;
}

// A program that ignores its seed: the same score at every seed.
constexpr char kConstant[] = R"(#!/bin/sh
awk -v lr="$1" 'BEGIN { printf "score=%.4f\n", 2.6493 + lr * 50 }'
)";

constexpr char kConstantStudy[] = R"(name = "constant"
[train]
lr = 0.001
seeds = [0, 1, 2]
[[ablation]]
name = "wider"
"train.lr" = 0.002
[report]
metrics = ["score"]
[job]
code = "constant"
command = "sh score.sh {train.lr} {train.seed}"
)";

std::map<std::string, nlohmann::json> Cells(const nlohmann::json& report) {
  std::map<std::string, nlohmann::json> cells;
  for (const auto& row : report.at("rows")) {
    cells[row.at("variant")] = row.at("metrics").at("score");
  }
  return cells;
}

std::string Submit(Cluster& cluster, const std::string& file, const std::string& spec) {
  const std::string path = cluster.dir().Write("study/" + file, spec);
  const nlohmann::json submitted = cluster.TaectlJson({"submit", path});
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  return exp;
}

}  // namespace

TEST_CASE(
    "a table of ten comparisons controls its family, shows every interval, and names seeds that "
    "did not vary") {
  Cluster cluster(1, 4);
  std::filesystem::create_directories(cluster.home() + "/study/src");
  std::ofstream(cluster.home() + "/study/src/score.sh") << kScore;
  std::ofstream(cluster.home() + "/study/src/table.txt") << kTable;
  std::filesystem::create_directories(cluster.home() + "/study/constant");
  std::ofstream(cluster.home() + "/study/constant/score.sh") << kConstant;

  const std::string holm = Submit(cluster, "holm.toml", Study("family", ""));
  const nlohmann::json report = cluster.TaectlJson({"report", holm});
  REQUIRE(report.at("rows").size() == 11);
  const nlohmann::json& family = report.at("correction");
  CHECK(family.at("method") == "holm");
  CHECK(family.at("alpha") == 0.05);
  CHECK(family.at("controlled") == true);
  CHECK(family.at("comparisons").at("score") == 10);
  CHECK(family.at("family").get<std::string>().find("10 tested comparisons") != std::string::npos);
  std::map<std::string, nlohmann::json> cells = Cells(report);
  INFO(report.dump(2));
  // The null variant whose naive p is 0.014 is not a finding among ten; the large effect is.
  CHECK(cells.at("lucky").at("decision") == "undecided");
  CHECK(cells.at("lucky").at("p_value").get<double>() < 0.05);
  CHECK(cells.at("lucky").at("p_adjusted").get<double>() > 0.05);
  CHECK(cells.at("lucky").at("mark") == "");
  CHECK(cells.at("lucky").at("detectable").get<double>() > 0);
  CHECK(cells.at("big").at("decision") == "different");
  CHECK(cells.at("big").at("mark") == "***");
  // Every compared cell has its interval, consistent with its verdict.
  for (const auto& [variant, cell] : cells) {
    if (variant == "baseline") {
      continue;
    }
    const nlohmann::json& ci = cell.at("delta_ci95");
    REQUIRE(ci.is_array());
    const double lo = ci[0].get<double>();
    const double hi = ci[1].get<double>();
    CHECK(lo <= cell.at("delta").get<double>());
    CHECK(cell.at("delta").get<double>() <= hi);
    CHECK((cell.at("decision") == "different") == (lo > 0 || hi < 0));
    CHECK(cell.at("delta_level").get<double>() <= 0.05);
  }
  // The CLI: the delta with its interval for undecided cells too, a verdict column, the legend.
  CommandResult table = cluster.Taectl({"report", holm, "--format", "table"});
  INFO(table.out);
  CHECK(table.out.find("verdict") != std::string::npos);
  CHECK(table.out.find("undecided (n=3; detects |Δ|≥") != std::string::npos);
  CHECK(table.out.find("different ***") != std::string::npos);
  CHECK(table.out.find("Verdicts control the family-wise error rate") != std::string::npos);
  // The frontier says what its estimates are and how the cheapest is chosen.
  CommandResult frontier = cluster.Taectl({"report", holm, "--frontier", "score<=0.5"});
  INFO(frontier.out << frontier.err);
  CHECK(frontier.exit_code == 0);
  CHECK(frontier.out.find("estimates: as run") != std::string::npos);
  CHECK(frontier.out.find("from the most expensive down") != std::string::npos);

  // Uncorrected, the same runs call the lucky null variant different: the correction is what
  // keeps it out.
  const std::string none = Submit(cluster, "none.toml", Study("uncorrected", "none"));
  const nlohmann::json uncorrected = cluster.TaectlJson({"report", none});
  CHECK(uncorrected.at("correction").at("controlled") == false);
  CHECK(Cells(uncorrected).at("lucky").at("decision") == "different");

  // Seeds that gave identical results: a banner, and no verdict from two numbers each measured
  // once.
  const std::string constant = Submit(cluster, "constant.toml", kConstantStudy);
  const nlohmann::json same = cluster.TaectlJson({"report", constant});
  bool banner = false;
  for (const auto& b : same.at("banners")) {
    banner |= b.get<std::string>().find("identical results") != std::string::npos;
  }
  CHECK(banner);
  const nlohmann::json wider = Cells(same).at("wider");
  CHECK(wider.at("decision") == "undecided");
  CHECK(wider.at("p_value").is_null());
  CHECK(wider.at("note").get<std::string>().find("no seed variance") != std::string::npos);
  for (const auto& row : same.at("rows")) {
    CHECK(row.at("seeds_identical") == true);
  }
  CommandResult shown = cluster.Taectl({"report", constant});
  CHECK(shown.out.find("identical results") != std::string::npos);
  CHECK(shown.out.find("different") == std::string::npos);
}

}  // namespace tae::testing
