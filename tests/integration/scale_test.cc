// A [scale] ladder through the real binaries: a command job whose loss follows a known law,
// L = E + A (m N)^-alpha with E = 2, A = 100, alpha = 0.3, and 0.5% seed noise, at four sizes it
// reports as its `params` metric. One ablation has a constant multiplier (1.5), one a multiplier
// that fades with size (2 at 1M toward 1). taectl submit --dry-run lists the ladder, taectl report
// --scale (text and --json) recovers the exponent, the constant multiplier with trend "none" and
// the fading one as "shrinks", extrapolates within reach and refuses beyond it; the dashboard's
// /report?scale=1 carries the same fit.

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// n m fade seed -> "step=1 params=<n> loss=<L>", m_eff = exp(log(m) (n / 1e6)^-fade), the noise a
// normal draw seeded by (seed, n, m, fade).
constexpr char kJob[] = R"(#!/bin/sh
awk -v n="$1" -v m="$2" -v fade="$3" -v s="$4" 'BEGIN {
  srand(s * 7919 + int(log(n) * 1000) + int(m * 100) * 13 + int(fade * 100) * 17)
  u1 = rand(); u2 = rand(); if (u1 < 1e-12) u1 = 1e-12
  z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)
  meff = exp(log(m) * exp(-fade * log(n / 1e6)))
  loss = (2 + 100 * exp(-0.3 * log(meff * n))) * exp(0.005 * z)
  printf "step=1 params=%d loss=%.9f\n", n, loss
}'
)";

constexpr char kStudy[] = R"(name = "ladder"
[params]
n = 1e6
m = 1.0
fade = 0.0
[train]
seeds = [0, 1, 2, 3]
[report]
metrics = ["loss"]
[[ablation]]
name = "constant"
"params.m" = 1.5
[[ablation]]
name = "fading"
"params.m" = 2.0
"params.fade" = 0.3
[scale]
"params.n" = [1e6, 4e6, 1.6e7, 6.4e7]
[job]
code = "src"
command = "sh job.sh {params.n} {params.m} {params.fade} {train.seed}"
)";

// The same job, and a ladder whose first 3 rungs decide: "same" changes nothing (m = 1, so its
// interval lies within 1 +- 0.1 and its 4th rung is skipped), "better" (m = 1.5) goes on.
constexpr char kStopStudy[] = R"(name = "stop"
[params]
n = 1e6
m = 1.0
fade = 0.0
[train]
seeds = [0, 1, 2, 3]
[report]
metrics = ["loss"]
[[ablation]]
name = "same"
"params.fade" = 0.01
[[ablation]]
name = "better"
"params.m" = 1.5
[scale]
"params.n" = [1e6, 4e6, 1.6e7, 6.4e7]
stop_if = { rungs = 3, band = 0.1 }
[job]
code = "src"
command = "sh job.sh {params.n} {params.m} {params.fade} {train.seed}"
)";

}  // namespace

TEST_CASE("a ladder whose loss follows a known law gets its exponent and trends back") {
  Cluster cluster(1, 8);
  TempDir work;
  std::filesystem::create_directories(work.path() + "/src");
  work.Write("src/job.sh", kJob);
  const std::string spec = work.Write("study.toml", kStudy);

  const CommandResult dry = cluster.Taectl({"submit", spec, "--dry-run"});
  INFO(dry.out << dry.err);
  REQUIRE(dry.exit_code == 0);
  CHECK(absl::StrContains(dry.out, "constant[rung=3]"));
  CHECK(absl::StrContains(dry.out, "rung 3: params.n=64000000.0"));
  CHECK(absl::StrContains(dry.out, "48 runs: 3 variants x 4 rungs x 1 grid points x 4 seeds"));

  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"}, 270);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);

  const nlohmann::json report = cluster.TaectlJson({"report", "ladder", "--scale", "--at", "2e8"});
  INFO(report.dump(2));
  const nlohmann::json& fit = report.at("scale");
  REQUIRE(fit.at("ok") == true);
  CHECK(fit.at("metric") == "loss");
  REQUIRE(fit.at("rungs").size() == 4);
  CHECK(fit.at("rungs")[2].at("params") == 1.6e7);
  CHECK(fit.at("rungs")[2].at("params_from") == "params");
  CHECK(fit.at("rungs")[2].at("overrides") == "params.n=16000000.0");
  const nlohmann::json& exponent = fit.at("exponent");
  CHECK(exponent.at("ci95")[0].get<double>() < 0.3);
  CHECK(exponent.at("ci95")[1].get<double>() > 0.3);
  CHECK(exponent.at("value").get<double>() == Approx(0.3).epsilon(0.15));
  const nlohmann::json& variants = fit.at("variants");
  REQUIRE(variants.size() == 3);
  CHECK(variants[0].at("variant") == "baseline");
  const nlohmann::json& constant = variants[1];
  CHECK(constant.at("variant") == "constant");
  CHECK(constant.at("multiplier").at("ci95")[0].get<double>() < 1.5);
  CHECK(constant.at("multiplier").at("ci95")[1].get<double>() > 1.5);
  CHECK(constant.at("trend") == "none");
  const nlohmann::json& fading = variants[2];
  CHECK(fading.at("variant") == "fading");
  CHECK(fading.at("trend") == "shrinks");
  CHECK(fading.at("slope").at("ci95")[1].get<double>() < 0);
  // Per rung, the table's comparison with that rung's baseline: a 1.5x multiplier is a lower loss.
  REQUIRE(constant.at("rungs").size() == 4);
  for (const nlohmann::json& rung : constant.at("rungs")) {
    CHECK(rung.at("n") == 4);
    CHECK(rung.at("delta").get<double>() < 0);
    CHECK(rung.at("decision") == "different");
  }
  // At 2e8 (within 10x of the top rung): the constant multiplier's effect, by the constant model.
  CHECK(constant.at("at").at("model") == "constant");
  const double truth = 100 * (std::pow(1.5 * 2e8, -0.3) - std::pow(2e8, -0.3));
  CHECK(constant.at("at").at("effect").at("ci95")[0].get<double>() < truth);
  CHECK(constant.at("at").at("effect").at("ci95")[1].get<double>() > truth);
  CHECK(fading.at("at").at("model") == "trend");
  CHECK(fit.at("warnings").empty());
  CHECK(absl::StrContains(fit.at("controls").get<std::string>(), "Bonferroni"));

  // Beyond reach: refused, with why.
  const nlohmann::json far = cluster.TaectlJson({"report", "ladder", "--scale", "--at", "1e10"});
  CHECK(
      absl::StrContains(far.at("scale").at("variants")[1].at("at").at("refused").get<std::string>(),
                        "beyond the ladder's reach"));

  const CommandResult text = cluster.Taectl({"report", "ladder", "--scale"});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(absl::StrContains(text.out, "exponent α = "));
  CHECK(absl::StrContains(text.out, "shrinks ("));
  CHECK(absl::StrContains(text.out, "controls: "));

  // --at without --scale says what it is for.
  const CommandResult at = cluster.Taectl({"report", "ladder", "--at", "1e8"});
  CHECK(at.exit_code != 0);
  CHECK(absl::StrContains(at.err, "give --scale"));
}

TEST_CASE("scale.stop_if holds the larger rungs, then skips a variant whose multiplier is 1") {
  Cluster cluster(1, 8);
  TempDir work;
  std::filesystem::create_directories(work.path() + "/src");
  work.Write("src/job.sh", kJob);
  const std::string spec = work.Write("study.toml", kStopStudy);
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"}, 270);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);  // skipped runs ended as the ladder decided: not a failure

  const nlohmann::json runs = cluster.TaectlJson({"runs", "stop"});
  INFO(runs.dump(2));
  int skipped = 0;
  for (const nlohmann::json& run : runs) {
    const std::string variant = run.at("variant");
    const bool large = absl::StrContains(variant, "[rung=3]");
    if (large && absl::StartsWith(variant, "same")) {
      CHECK(run.at("state") == "pruned");
      CHECK(absl::StartsWith(run.at("reason").get<std::string>(), "skipped by scale.stop_if: "));
      ++skipped;
    } else {
      CHECK(run.at("state") == "succeeded");
    }
  }
  CHECK(skipped == 4);

  const nlohmann::json report = cluster.TaectlJson({"report", "stop", "--scale"});
  INFO(report.dump(2));
  const nlohmann::json& variants = report.at("scale").at("variants");
  REQUIRE(variants.size() == 3);
  CHECK(variants[1].at("variant") == "same");
  CHECK(variants[1].at("skipped").at("runs") == 4);
  REQUIRE(variants[1].at("rungs").size() == 4);
  CHECK(variants[1].at("rungs")[3].at("n") == 0);  // its 4th rung never ran
  CHECK_FALSE(variants[2].contains("skipped"));
  CHECK(variants[2].at("rungs").size() == 4);
}

}  // namespace tae::testing
