// ASHA over a [grid] through the real binaries: taed stops the grid points that fall behind at a
// rung (every host of a gang, command jobs too), a kill -9 of taed mid-search changes no decision,
// and each variant's chosen point is the one the full grid picks, at a fraction of its steps.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "server/store/store.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// A command job that reports loss = lr + 10 / step for 400 steps, 50 a second, and keeps its pid
// where the test can see it (one file per rank).
constexpr char kJob[] = R"(#!/bin/sh
echo $$ > "$1/pid-$TAE_RUN_ID-$TAE_RANK"
i=1
while [ $i -le 400 ]; do
  awk "BEGIN { print \"step=$i loss=\" ($2 + 10 / $i) }"
  i=$((i + 1))
  sleep 0.02
done
)";

std::string JobSpec(const std::string& pids) {
  return R"(name = "gang-asha"
[train]
seeds = [0]
[grid]
"train.lr" = [1.0, 2.0, 3.0]
[search]
method = "asha"
metric = "loss"
min_steps = 5
reduction = 3
bootstrap = 1
order = "listed"
[resources]
hosts = 2
[job]
code = "src"
command = "sh job.sh )" +
         pids + R"( {train.lr}"
)";
}

// A learning-rate sweep listed in ascending order whose learning rates >= 1 diverge: from step 3
// they print loss=nan. The others: loss = (log10(lr) + 2)^2 + 3 / sqrt(step), best at 0.01.
constexpr char kDivergingJob[] = R"(#!/bin/sh
i=1
while [ $i -le 60 ]; do
  awk -v lr="$1" -v i=$i 'BEGIN { if (lr >= 1 && i >= 3) print "step=" i " loss=nan";
    else printf "step=%d loss=%.6f\n", i, (log(lr) / log(10) + 2) ^ 2 + 3 / sqrt(i) }'
  i=$((i + 1))
  sleep 0.02
done
)";

constexpr char kDivergingSpec[] = R"(name = "diverging-sweep"
[train]
seeds = [0, 1]
steps = 60
[grid]
"train.lr" = [0.001, 0.003, 0.01, 0.03, 0.1, 1.0, 10.0]
[search]
method = "asha"
metric = "loss"
min_steps = 5
reduction = 3
[job]
code = "src"
command = "sh job.sh {train.lr}"
)";

bool Alive(long pid) { return pid > 0 && kill(static_cast<pid_t>(pid), 0) == 0; }

}  // namespace

TEST_CASE("asha stops a command job's pruned grid points on every host of their gang") {
  Cluster cluster(2, 1, nullptr, {"--slice", "local"});
  const std::string pids = cluster.home() + "/pids";
  std::filesystem::create_directories(pids);
  std::filesystem::create_directories(cluster.home() + "/study/src");
  std::ofstream(cluster.home() + "/study/src/job.sh") << kJob;
  const std::string spec = cluster.dir().Write("study/gang.toml", JobSpec(pids));
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "300"}, 330);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);  // pruned is not a failure
  const nlohmann::json runs = cluster.TaectlJson({"runs", "gang-asha"});
  REQUIRE(runs.size() == 3);
  std::map<std::string, nlohmann::json> by_point;
  for (const auto& run : runs) {
    by_point[run.at("variant")] = run;
  }
  // The first point is best at every rung; the others lose at rung 0 (step 5).
  CHECK(by_point.at("baseline[lr=1.0]").at("state") == "succeeded");
  int gangs_stopped = 0;
  for (const char* point : {"baseline[lr=2.0]", "baseline[lr=3.0]"}) {
    const nlohmann::json& run = by_point.at(point);
    CHECK(run.at("state") == "pruned");
    CHECK(run.at("last_step").get<int64_t>() < 400);
    const std::string id = std::to_string(run.at("id").get<int64_t>());
    nlohmann::json shown = cluster.TaectlJson({"show", "r" + id});
    CHECK(shown.at("reason").get<std::string>().rfind("pruned by [search]: rung 0 (step 5): loss ",
                                                      0) == 0);
    // Every rank that started is gone (a point pruned while queued never started).
    int started = 0;
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream pid_file(pids + "/pid-" + id + "-" + std::to_string(rank));
      long pid = 0;
      if (pid_file >> pid) {
        ++started;
        CHECK(WaitUntil([&] { return !Alive(pid); }, 30));
      }
    }
    gangs_stopped += started == 2 ? 1 : 0;
  }
  CHECK(gangs_stopped >= 1);  // the second point is judged while its two ranks run
}

namespace {

// The sweep of tests/data/asha_sweep (also bench/search_bench.sh's command-job grid): nine
// learning rates x {baseline, worse} x 2 seeds of a job whose loss curves keep their order at
// every step, best at lr 0.01; 150 steps each.
constexpr char kSweepSpec[] = TAE_SOURCE_DIR "/tests/data/asha_sweep/sweep.toml";

// variant -> its point with the lowest mean final loss among those whose runs all succeeded.
std::map<std::string, std::string> Chosen(const nlohmann::json& runs) {
  std::map<std::string, std::pair<double, int>> sum;  // point -> (sum, n)
  std::map<std::string, bool> complete;
  for (const auto& run : runs) {
    const std::string point = run.at("variant");
    const bool done = run.at("state") == "succeeded";
    complete[point] = complete.count(point) ? complete[point] && done : done;
    if (done) {
      auto& s = sum[point];
      s.first += run.at("final_metrics").at("loss").get<double>();
      s.second += 1;
    }
  }
  std::map<std::string, std::pair<double, std::string>> best;  // variant -> (mean, point)
  for (const auto& [point, s] : sum) {
    if (!complete[point]) {
      continue;
    }
    const std::string variant = point.substr(0, point.find('['));
    const double mean = s.first / s.second;
    auto it = best.find(variant);
    if (it == best.end() || mean < it->second.first) {
      best[variant] = {mean, point};
    }
  }
  std::map<std::string, std::string> out;
  for (const auto& [variant, b] : best) {
    out[variant] = b.second;
  }
  return out;
}

std::vector<std::string> StoredDecisions(const std::string& db_path, int64_t experiment) {
  auto store = store::Store::Open(db_path);
  REQUIRE(store.ok());
  auto decisions = (*store)->SearchDecisions(experiment);
  REQUIRE(decisions.ok());
  std::vector<std::string> out;
  for (const auto& d : *decisions) {
    out.push_back(d.point + " " + d.verdict + " " + d.reason);
  }
  return out;
}

int64_t StepsRun(const nlohmann::json& runs) {
  int64_t steps = 0;
  for (const auto& run : runs) {
    steps += run.at("last_step").get<int64_t>();
  }
  return steps;
}

}  // namespace

TEST_CASE("a diverged grid point is pruned at its first rung as the worst and the search goes on") {
  Cluster cluster(1, 4);
  std::filesystem::create_directories(cluster.home() + "/study/src");
  std::ofstream(cluster.home() + "/study/src/job.sh") << kDivergingJob;
  const std::string spec = cluster.dir().Write("study/diverging.toml", kDivergingSpec);
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "300"}, 330);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const nlohmann::json runs = cluster.TaectlJson({"runs", "diverging-sweep"});
  REQUIRE(runs.size() == 14);
  int diverged_pruned = 0;
  for (const auto& run : runs) {
    const std::string point = run.at("variant");
    const nlohmann::json shown =
        cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int64_t>())});
    const std::string reason = shown.at("reason");
    INFO(point << ": " << run.at("state") << ": " << reason);
    if (point == "baseline[lr=1.0]" || point == "baseline[lr=10.0]") {
      // Pruned at rung 0 as the worst, as soon as its first seed went NaN (step 3), whatever
      // the bootstrap: a diverged point never waits.
      CHECK(run.at("state") == "pruned");
      CHECK(reason.find("rung 0 (step 5): loss diverged at step 3") != std::string::npos);
      diverged_pruned += run.at("state") == "pruned" ? 1 : 0;
    }
  }
  CHECK(diverged_pruned == 4);
  // The rest of the search went on: the best point ran to the end and is the one chosen.
  CommandResult report = cluster.Taectl({"report", "diverging-sweep", "--json"});
  INFO(report.out << report.err);
  REQUIRE(report.exit_code == 0);
  const nlohmann::json tuned = nlohmann::json::parse(report.out);
  REQUIRE(tuned.at("rows").size() == 1);
  CHECK(tuned.at("rows")[0].at("point_name") == "lr=0.01");
  bool diverged_in_rung_view = false;
  for (const auto& d : tuned.at("decisions")) {
    diverged_in_rung_view |=
        d.at("reason").get<std::string>().find("diverged at step 3") != std::string::npos;
  }
  CHECK(diverged_in_rung_view);

  // The same grid run to the end: the diverged runs succeed (the job exits 0), but their final
  // value is "diverged", never the last finite loss (step 2's 2.12 for lr=1.0, lower than every
  // healthy point's), and the tuned table cannot choose them.
  nlohmann::json full = cluster.TaectlJson(
      {"submit", spec, "--set", "search.method=grid", "--wait", "--timeout", "300"});
  const std::string grid = std::to_string(full.at("experiment").get<int64_t>());
  CommandResult at_grid = cluster.Taectl({"report", grid, "--at-grid", "--json"});
  INFO(at_grid.out << at_grid.err);
  REQUIRE(at_grid.exit_code == 0);
  int diverged_rows = 0;
  const nlohmann::json grid_report = nlohmann::json::parse(at_grid.out);
  for (const auto& row : grid_report.at("rows")) {
    const nlohmann::json& cell = row.at("metrics").at("loss");
    const std::string variant = row.at("variant");
    INFO(variant << ": " << cell.dump());
    if (variant == "baseline[lr=1.0]" || variant == "baseline[lr=10.0]") {
      CHECK(cell.at("diverged") == 2);
      CHECK(cell.at("diverged_step") == 3);
      CHECK(cell.at("mean").is_null());
      ++diverged_rows;
    } else {
      CHECK(cell.at("diverged") == 0);
    }
  }
  CHECK(diverged_rows == 2);
  CommandResult text = cluster.Taectl({"report", grid, "--at-grid"});
  CHECK(text.out.find("diverged 2/2 (step 3)") != std::string::npos);
  const nlohmann::json grid_tuned =
      nlohmann::json::parse(cluster.Taectl({"report", grid, "--tuned", "--json"}).out);
  CHECK(grid_tuned.at("rows")[0].at("point_name") == "lr=0.01");
}

TEST_CASE(
    "asha picks each variant's best point with a fraction of the grid's steps, across a kill -9 of "
    "taed") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  Cluster cluster(1, 4);
  const std::string spec = kSweepSpec;
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  const int64_t asha = submitted.at("experiment").get<int64_t>();
  const std::string exp = std::to_string(asha);

  // taed is killed once the search has pruned something, and started again.
  REQUIRE(WaitUntil(
      [&] {
        for (const auto& run : cluster.TaectlJson({"runs", exp})) {
          if (run.at("state") == "pruned") {
            return true;
          }
        }
        return false;
      },
      120));
  REQUIRE(cluster.KillTaed());
  const std::vector<std::string> before = StoredDecisions(cluster.db_path(), asha);
  REQUIRE_FALSE(before.empty());
  CommandResult up = cluster.Taectl({"up", "--agents", "1", "--slots", "4"}, 120);
  INFO(up.err);
  REQUIRE(up.exit_code == 0);
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);

  // The same file as a full grid: same points, same seeds, every run to the end.
  nlohmann::json full =
      cluster.TaectlJson({"submit", spec, "--set", "search.method=grid", "--wait"});
  const std::string grid = std::to_string(full.at("experiment").get<int64_t>());
  REQUIRE(grid != exp);

  const nlohmann::json asha_runs = cluster.TaectlJson({"runs", exp});
  const nlohmann::json grid_runs = cluster.TaectlJson({"runs", grid});
  REQUIRE(asha_runs.size() == 36);
  REQUIRE(grid_runs.size() == 36);
  const std::map<std::string, std::string> chosen = Chosen(asha_runs);
  const std::map<std::string, std::string> expected = Chosen(grid_runs);
  CHECK(expected.at("baseline") == "baseline[lr=0.01]");
  CHECK(expected.at("worse") == "worse[lr=0.01]");
  CHECK(chosen == expected);
  const int64_t asha_steps = StepsRun(asha_runs);
  const int64_t grid_steps = StepsRun(grid_runs);
  CHECK(grid_steps == 36 * 150);
  WARN("asha ran " << asha_steps << " of the full grid's " << grid_steps << " steps");
  CHECK(asha_steps * 10 <= grid_steps * 4);  // at most 40%

  CHECK(cluster.Taectl({"down"}).exit_code == 0);
  const std::vector<std::string> after = StoredDecisions(cluster.db_path(), asha);
  REQUIRE(after.size() >= before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after[i] == before[i]);  // the restart changed no decision
  }
}

TEST_CASE(
    "search.confirm re-runs each variant's chosen point on fresh seeds and reports them alone",
    "[confirm]") {
  Cluster cluster(1, 4);
  const std::string spec = kSweepSpec;
  const nlohmann::json submitted =
      cluster.TaectlJson({"submit", spec, "--set", "search.confirm=2"});
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  // The search's 36 runs, then 2 confirmation runs per variant, all final.
  nlohmann::json runs;
  REQUIRE(WaitUntil(
      [&] {
        runs = cluster.TaectlJson({"runs", exp});
        for (const auto& run : runs) {
          const std::string state = run.at("state");
          if (state == "queued" || state == "assigned" || state == "running") {
            return false;
          }
        }
        return runs.size() == 40;
      },
      300));
  // The confirmation runs: at each variant's chosen point (lr 0.01, as the full grid picks it),
  // on seeds no run of the point had, succeeded.
  std::map<std::string, std::vector<double>> confirmed;  // point -> confirmation runs' losses
  std::map<std::string, std::vector<int64_t>> search_seeds;
  for (const auto& run : runs) {
    if (!run.at("confirm").get<bool>()) {
      search_seeds[run.at("variant")].push_back(run.at("seed"));
    }
  }
  int confirmations = 0;
  for (const auto& run : runs) {
    if (!run.at("confirm").get<bool>()) {
      continue;
    }
    ++confirmations;
    const std::string point = run.at("variant");
    INFO(point << " seed " << run.at("seed"));
    CHECK((point == "baseline[lr=0.01]" || point == "worse[lr=0.01]"));
    CHECK(run.at("state") == "succeeded");
    const std::vector<int64_t>& used = search_seeds[point];
    CHECK(std::find(used.begin(), used.end(), run.at("seed").get<int64_t>()) == used.end());
    CHECK(run.at("seed").get<int64_t>() >= 2);
    CHECK(run.at("config").at("train.seed") == run.at("seed"));
    confirmed[point].push_back(run.at("final_metrics").at("loss").get<double>());
  }
  CHECK(confirmations == 4);
  REQUIRE(confirmed.size() == 2);

  // The tuned table: chosen on the search's seeds, its values the confirmation runs' alone.
  const nlohmann::json report = cluster.TaectlJson({"report", exp, "--sort", "spec"});
  CHECK(report.at("view") == "tuned");
  CHECK(report.at("estimates") == "confirmed: 2 fresh seeds");
  CHECK(report.at("search").at("confirm") == 2);
  REQUIRE(report.at("rows").size() == 2);
  auto mean = [](const std::vector<double>& xs) {
    double sum = 0;
    for (double x : xs) {
      sum += x;
    }
    return sum / static_cast<double>(xs.size());
  };
  for (const auto& row : report.at("rows")) {
    const std::string point = row.at("variant");
    INFO(point);
    REQUIRE(confirmed.count(point) == 1);
    CHECK(row.at("confirm_runs") == 2);
    CHECK(row.at("confirm_pending") == 0);
    CHECK(row.at("runs") == 2);
    const nlohmann::json& loss = row.at("metrics").at("loss");
    CHECK(loss.at("n") == 2);
    CHECK(loss.at("mean").get<double>() == Approx(mean(confirmed[point])));
  }
  const nlohmann::json& worse = report.at("rows").at(1).at("metrics").at("loss");
  CHECK(worse.at("delta").get<double>() ==
        Approx(mean(confirmed["worse[lr=0.01]"]) - mean(confirmed["baseline[lr=0.01]"])));
  // The grid view is the search's seeds alone: the chosen point has its 2, not 4.
  const nlohmann::json grid = cluster.TaectlJson({"report", exp, "--at-grid", "--sort", "spec"});
  bool seen = false;
  for (const auto& row : grid.at("rows")) {
    if (row.at("variant") == "baseline[lr=0.01]") {
      seen = true;
      CHECK(row.at("metrics").at("loss").at("n") == 2);
      CHECK(row.at("runs_total") == 2);
    }
  }
  CHECK(seen);
  // The human table says where its values come from.
  CommandResult human = cluster.Taectl({"report", exp});
  CHECK(human.out.find("Estimates confirmed") != std::string::npos);
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

}  // namespace tae::testing
