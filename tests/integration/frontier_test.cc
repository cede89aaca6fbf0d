// The cost frontier through the real binaries: a command study whose runs print their size
// (model/params) and an accuracy that depends only on the variant, the grid point and the seed,
// so the front and the cheapest variant whose 95% CI clears the bar are known by construction.
// taectl report --frontier (text and --json), taectl plot --frontier (SVG) and the dashboard's
// /report?frontier= and /frontier.svg.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/fs/fs.h"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace tae::testing {
namespace {

// width lr seed -> "step=1 model/params=<width*1000> eval/acc=<acc>"; width 0 prints no size.
// acc = base(width) + (seed % 3 - 1) * d(width) - (lr == 1 ? 0.05 : 0). Seeds 0, 1, 2 (and
// search.confirm's fresh seeds 3, 4, 5 alike, so the confirmed estimates are the same): the mean is
// base (at lr 2), the sample sd d, the 95% CI's half-width t(0.975, 2) d / sqrt(3) = 2.484 d:
//   width 1  1000  0.900                       no
//   width 2  2000  0.992 ± 0.0099  [0.982, ]   mean only: the CI straddles 0.99
//   width 4  4000  0.995 ± 0.0025  [0.9925, ]  clears: the cheapest that does
//   width 8  8000  0.998 ± 0.0012              clears
//   width 0     ?  0.999 ± 0.0002              clears, but its cost is unknown
constexpr char kJob[] = R"(#!/bin/sh
awk -v w="$1" -v lr="$2" -v s="$3" 'BEGIN {
  base["1"] = 0.900; d["1"] = 0.001
  base["2"] = 0.992; d["2"] = 0.004
  base["4"] = 0.995; d["4"] = 0.001
  base["8"] = 0.998; d["8"] = 0.0005
  base["0"] = 0.999; d["0"] = 0.0001
  acc = base[w] + (s % 3 - 1) * d[w] - (lr == 1 ? 0.05 : 0)
  line = "step=1"
  if (w > 0) line = line " model/params=" (w * 1000)
  printf "%s eval/acc=%.6f\n", line, acc
}'
)";

constexpr char kStudy[] = R"(name = "sizes"
[params]
width = 1
lr = 2
[train]
seeds = [0, 1, 2]
[report]
metrics = ["eval/acc"]
[[ablation]]
name = "w2"
"params.width" = 2
[[ablation]]
name = "w4"
"params.width" = 4
[[ablation]]
name = "w8"
"params.width" = 8
[[ablation]]
name = "nocost"
"params.width" = 0
[grid]
"params.lr" = [1, 2]
[search]
confirm = 3
[job]
code = "src"
command = "sh job.sh {params.width} {params.lr} {train.seed}"
)";

std::string Sign(const Cluster& cluster, int* port) {
  absl::StatusOr<std::string> addr = fs::ReadFile(cluster.home() + "/http.addr");
  absl::StatusOr<std::string> token = fs::ReadFile(cluster.home() + "/http.token");
  REQUIRE(addr.ok());
  REQUIRE(token.ok());
  absl::string_view a = absl::StripAsciiWhitespace(*addr);
  REQUIRE(absl::ConsumePrefix(&a, "127.0.0.1:"));
  REQUIRE(absl::SimpleAtoi(a, port));
  HttpReply in = Http(*port, {"GET", "/?token=" + std::string(absl::StripAsciiWhitespace(*token))});
  REQUIRE(in.status == 200);
  const std::string set_cookie = in.headers["set-cookie"];
  return set_cookie.substr(0, set_cookie.find(';'));
}

}  // namespace

TEST_CASE("the cheapest variant whose CI clears a bar through taed taectl and the dashboard") {
  Cluster cluster(1, 8);
  TempDir work;
  std::filesystem::create_directories(work.path() + "/src");
  work.Write("src/job.sh", kJob);
  const std::string spec = work.Write("study.toml", kStudy);
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"}, 270);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);

  {  // report --frontier --json: each variant at its tuned point, the front, the cheapest
    const nlohmann::json f =
        cluster.TaectlJson({"report", "sizes", "--frontier", "eval/acc>=0.99"});
    INFO(f.dump(2));
    CHECK(f.at("view") == "tuned");  // a grid: each variant at its best point
    CHECK(f.at("bar") ==
          nlohmann::json({{"metric", "eval/acc"}, {"op", ">="}, {"value", 0.99}, {"goal", "max"}}));
    CHECK(f.at("cost") == nlohmann::json({{"axis", "params"}, {"cheaper", "lower"}}));
    // The tuned points re-run on fresh seeds: the frontier uses those, and says so.
    CHECK(f.at("estimates").get<std::string>().rfind("confirmed", 0) == 0);
    REQUIRE(f.at("cheapest").is_object());
    CHECK(f.at("cheapest").at("variant") == "w4[lr=2]");
    CHECK(f.at("cheapest").at("cost") == 4000);
    CHECK(f.at("cheapest").at("mean").get<double>() == Approx(0.995));
    CHECK(f.at("cheapest").at("lo").get<double>() == Approx(0.995 - 2.484 * 0.001).epsilon(1e-3));
    const nlohmann::json& points = f.at("points");
    REQUIRE(points.size() == 5);
    const std::vector<std::string> order = {"baseline[lr=2]", "w2[lr=2]", "w4[lr=2]", "w8[lr=2]",
                                            "nocost[lr=2]"};
    const std::vector<std::string> clears = {"no", "mean_only", "yes", "yes", "yes"};
    for (size_t i = 0; i < order.size(); ++i) {
      CHECK(points[i].at("variant") == order[i]);
      CHECK(points[i].at("clears") == clears[i]);
      CHECK(points[i].at("on_front") == (i < 4));  // nocost: unknown cost, never on the front
      CHECK(points[i].at("n") == 3);
    }
    CHECK(points[4].at("cost").is_null());
  }

  {  // report --frontier prints the table and the verdict, and says what it cannot rank
    CommandResult text = cluster.Taectl({"report", "sizes", "--frontier", "eval/acc>=0.99"});
    INFO(text.out << text.err);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("eval/acc (higher is better) against params (lower is "
                                         "cheaper)"));
    CHECK_THAT(text.out, Catch::Contains("each variant at its best grid point on eval/acc (max)"));
    CHECK_THAT(text.out, Catch::Contains("mean only (CI straddles)"));
    CHECK_THAT(text.out, Catch::Contains(
                             "cheapest that clears eval/acc >= 0.99: w4[lr=2] (params 4k; eval/acc "
                             "0.9950 ± 0.0025)"));
    CHECK_THAT(text.out,
               Catch::Contains("cost unknown (their runs report no model/params): nocost[lr=2]"));
    CHECK_THAT(text.out,
               Catch::Contains("these clear it but cannot be ranked by cost: nocost[lr=2]"));
    CHECK_THAT(text.out, Catch::Contains("found by a fixed sequence from the most expensive down"));
    // At every grid point: w8[lr=1], as expensive as w8[lr=2], is under the bar, so the sequence
    // from the most expensive down stops at its first level and names none (naming a variant
    // that does not clear stays at most 2.5% likely).
    const nlohmann::json grid =
        cluster.TaectlJson({"report", "sizes", "--frontier", "eval/acc>=0.99", "--at-grid"});
    CHECK(grid.at("view") == "grid");
    CHECK(grid.at("points").size() == 10);
    CHECK(grid.at("cheapest").is_null());
    // A bar above every CI: none clears it, and the means that do are named.
    CommandResult none = cluster.Taectl({"report", "sizes", "--frontier", "eval/acc > 0.9995"});
    CHECK_THAT(none.out, Catch::Contains("none clears eval/acc > 0.9995 in the sequence from the "
                                         "most expensive down"));
    // A cost the runs do not report: every cost unknown, nothing ranked.
    const nlohmann::json flops =
        cluster.TaectlJson({"report", "sizes", "--frontier", "eval/acc>=0.99", "--cost", "flops"});
    CHECK(flops.at("cheapest").is_null());
    for (const auto& p : flops.at("points")) {
      CHECK(p.at("cost").is_null());
      CHECK_FALSE(p.at("on_front").get<bool>());
    }
  }

  {  // bad bars and unknown metrics are one-line errors that say why
    CommandResult swapped = cluster.Taectl({"report", "sizes", "--frontier", "eval/acc=>0.99"});
    CHECK(swapped.exit_code == 2);
    CHECK_THAT(swapped.err, Catch::Contains("'eval/acc=>0.99': '=>' at column 9 is not an "
                                            "operator"));
    CHECK_THAT(swapped.err, Catch::Contains(">=, >, <=, <"));
    CommandResult unknown = cluster.Taectl({"report", "sizes", "--frontier", "eval/loss<=0.1"});
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.err, Catch::Contains("has no metric 'eval/loss'; its runs have: "));
    CHECK_THAT(unknown.err, Catch::Contains("eval/acc"));
    CHECK_THAT(unknown.err, Catch::Contains("model/params"));
    CommandResult cost =
        cluster.Taectl({"report", "sizes", "--frontier", "eval/acc>=0.99", "--cost", "dollars"});
    CHECK(cost.exit_code == 2);
    CHECK_THAT(cost.err, Catch::Contains("params, flops, tokens_per_s"));
  }

  {  // plot --frontier writes an SVG with every variant and the bar
    const std::string out = work.path() + "/frontier.svg";
    CommandResult plot =
        cluster.Taectl({"plot", "sizes", "--frontier", "eval/acc>=0.99", "-o", out});
    INFO(plot.out << plot.err);
    REQUIRE(plot.exit_code == 0);
    CHECK_THAT(plot.out, Catch::Contains("cheapest that clears eval/acc >= 0.99: w4[lr=2]"));
    absl::StatusOr<std::string> svg = fs::ReadFile(out);
    REQUIRE(svg.ok());
    CHECK(absl::StartsWith(*svg, "<?xml"));
    CHECK(absl::EndsWith(*svg, "</svg>\n"));
    for (const char* v : {"baseline[lr=2]", "w2[lr=2]", "w4[lr=2]", "w8[lr=2]"}) {
      CHECK_THAT(*svg, Catch::Contains(std::string("<title>") + v + "</title>"));
    }
    CHECK_THAT(*svg, Catch::Contains("class=\"bar\""));
    CHECK_THAT(*svg, Catch::Contains("eval/acc &gt;= 0.99"));
    CHECK_THAT(*svg, Catch::Contains("class=\"variant on-front clears cheapest\""));
    CHECK_THAT(*svg, Catch::Contains("not drawn (cost or value unknown): nocost[lr=2]"));
  }

  {  // the dashboard's report and SVG carry the same frontier
    int port = 0;
    const std::string cookie = Sign(cluster, &port);
    HttpReply report = Http(port, {"GET",
                                   "/api/experiments/sizes/report?frontier=eval%2Facc%3E%3D0.99",
                                   "",
                                   {{"Cookie", cookie}}});
    INFO(report.body);
    REQUIRE(report.status == 200);
    const nlohmann::json r = nlohmann::json::parse(report.body);
    CHECK(r.at("frontier").at("cheapest").at("variant") == "w4[lr=2]");
    CHECK(r.at("rows").size() == 5);
    HttpReply bad = Http(port, {"GET",
                                "/api/experiments/sizes/report?frontier=eval%2Facc%3D%3E1",
                                "",
                                {{"Cookie", cookie}}});
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body, Catch::Contains("is not an operator"));
    HttpReply svg = Http(port, {"GET",
                                "/api/experiments/sizes/frontier.svg?frontier=eval%2Facc%3E%3D0.99",
                                "",
                                {{"Cookie", cookie}}});
    REQUIRE(svg.status == 200);
    CHECK(svg.headers["content-type"] == "image/svg+xml");
    CHECK_THAT(svg.body, Catch::Contains("<title>w4[lr=2]</title>"));
  }
}

}  // namespace tae::testing
