// The read side's tuned table and search savings (issue 27): Query::Report's view ("tuned" by
// default for an experiment with a [search]) and Query::SearchSavings over stored decisions.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"

namespace tae::query {
namespace {

struct PlannedRun {
  std::string variant;
  std::vector<std::pair<int64_t, double>> points;  // (step, eval/loss)
  bool finishes = true;                            // else left running (to be pruned)
};

// A [grid] experiment with an asha [search] on eval/loss; every run's config says train.steps 10.
int64_t Study(store::Store* store, const std::vector<PlannedRun>& planned, bool asha = true) {
  model::NewExperiment exp;
  exp.name = "study";
  exp.spec_hash = "study";
  exp.report.search.declared = true;
  exp.report.search.method = asha ? "asha" : "grid";
  exp.report.search.metric = "eval/loss";
  exp.report.search.goal = "min";
  exp.report.search.min_steps = 2;
  for (const PlannedRun& run : planned) {
    exp.runs.push_back({run.variant, 0, R"({"train.steps": 10})", {}});
  }
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  auto runs = store->ListRuns(*id);
  REQUIRE(runs.ok());
  uint64_t seq = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    const int64_t run = (*runs)[i].id;
    REQUIRE(store->Transition(run, lifecycle::Assign({"a"}, 2.0)).ok());
    std::vector<model::IngestEvent> events;
    model::IngestEvent started;
    started.seq = ++seq;
    started.run_id = run;
    started.attempt = 1;
    started.kind = model::IngestEvent::Kind::kStarted;
    events.push_back(started);
    for (const auto& [step, value] : planned[i].points) {
      model::IngestEvent e;
      e.seq = ++seq;
      e.run_id = run;
      e.attempt = 1;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.step = step;
      e.values = {{"eval/loss", value}};
      events.push_back(e);
    }
    if (planned[i].finishes) {
      model::IngestEvent exit;
      exit.seq = ++seq;
      exit.run_id = run;
      exit.attempt = 1;
      exit.kind = model::IngestEvent::Kind::kExited;
      events.push_back(exit);
    }
    REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
  }
  return *id;
}

model::SearchDecisionRecord Decision(const std::string& point, int rung, int64_t step,
                                     const std::string& verdict) {
  model::SearchDecisionRecord d;
  d.point = point;
  d.group = point.substr(0, point.find('['));
  d.rung = rung;
  d.step = step;
  d.value = 1.0;
  d.seeds = 1;
  d.verdict = verdict;
  d.rank = 1;
  d.competitors = 1;
  d.keeps = 1;
  d.reason = verdict;
  d.at = 3.0;
  return d;
}

const std::vector<PlannedRun> kRuns = {
    {"baseline[lr=0.1]", {{2, 2.0}, {10, 1.5}}},
    {"no-pos[lr=0.1]", {{2, 2.5}, {10, 2.2}}},
    {"baseline[lr=0.01]", {{2, 1.8}, {10, 1.0}}},
    {"no-pos[lr=0.01]", {{2, 3.0}}, false},  // pruned at rung 0
};

}  // namespace

TEST_CASE("an experiment with a [search] reports each variant at its own best grid point") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  const int64_t id = Study(store.get(), kRuns);
  auto exp = query.GetExperiment(id);
  REQUIRE(exp.ok());
  REQUIRE(
      store
          ->RecordSearch(id, {Decision("no-pos[lr=0.01]", 0, 2, "prune")},
                         {{(*store->ListRuns(id))[3].id,
                           lifecycle::Finish(model::RunState::kPruned, "pruned by [search]", 4.0)}})
          .ok());

  auto tuned = query.Report("study", {"eval/loss"}, "", "spec");
  REQUIRE(tuned.ok());
  CHECK(tuned->view == "tuned");
  CHECK(tuned->search_metric == "eval/loss");
  CHECK(tuned->search_goal == "min");
  REQUIRE(tuned->rows.size() == 2);
  CHECK(tuned->rows[0].variant == "baseline[lr=0.01]");
  CHECK(tuned->rows[0].ablation == "baseline");
  CHECK(tuned->rows[0].point == "lr=0.01");
  CHECK(tuned->rows[0].baseline == "baseline[lr=0.01]");
  // no-pos's only scored point is lr=0.1 (lr=0.01 was pruned); it is compared with the
  // baseline at the baseline's own best point, not at lr=0.1.
  CHECK(tuned->rows[1].variant == "no-pos[lr=0.1]");
  CHECK(tuned->rows[1].point == "lr=0.1");
  CHECK(tuned->rows[1].points == 2);
  CHECK(tuned->rows[1].candidates == 1);
  CHECK(tuned->rows[1].baseline == "baseline[lr=0.01]");
  REQUIRE(tuned->rows[1].cells[0].has_delta);
  CHECK(tuned->rows[1].cells[0].delta == Approx(1.2));

  // Savings: steps 10 + 10 + 10 + 2 of 4 x 10; one point pruned at rung 0.
  REQUIRE(tuned->savings.has_value());
  CHECK(tuned->savings->steps_run == 32);
  CHECK(tuned->savings->steps_full == 40);
  CHECK(tuned->savings->fraction() == Approx(0.8));
  CHECK(tuned->savings->points_pruned == 1);
  REQUIRE(tuned->savings->rungs.size() == 1);
  CHECK(tuned->savings->rungs[0].step == 2);
  CHECK(tuned->savings->rungs[0].judged == 1);
  CHECK(tuned->savings->rungs[0].pruned == 1);

  // The per-point view: every point, each against the baseline at the same point.
  auto grid = query.Report("study", {"eval/loss"}, "", "spec", "grid");
  REQUIRE(grid.ok());
  CHECK(grid->view == "grid");
  REQUIRE(grid->rows.size() == 4);
  CHECK(grid->rows[1].variant == "no-pos[lr=0.1]");
  CHECK(grid->rows[1].baseline == "baseline[lr=0.1]");
  CHECK(grid->rows[1].point.empty());

  // A baseline named with its point means its ablation in the tuned view.
  auto named = query.Report("study", {"eval/loss"}, "baseline[lr=0.1]", "spec", "tuned");
  REQUIRE(named.ok());
  CHECK(named->rows[0].variant == "baseline[lr=0.01]");
  CHECK_FALSE(query.Report("study", {}, "", "", "best").ok());
}

TEST_CASE("without a [search] the report is per point unless the tuned view is asked for") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  model::NewExperiment exp;
  exp.name = "plain";
  exp.spec_hash = "plain";
  exp.runs.push_back({"baseline[lr=0.1]", 0, "{}", {}});
  exp.runs.push_back({"baseline[lr=0.01]", 0, "{}", {}});
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  auto plain = query.Report("plain", {"eval/loss"}, "");
  REQUIRE(plain.ok());
  CHECK(plain->view == "grid");
  CHECK_FALSE(plain->savings.has_value());
  auto tuned = query.Report("plain", {"eval/loss"}, "", "", "tuned");
  REQUIRE(tuned.ok());
  CHECK(tuned->view == "tuned");
  CHECK(tuned->search_metric == "eval/loss");  // the first metric, lower is better
  CHECK(tuned->search_goal == "min");
  REQUIRE(tuned->rows.size() == 1);
  CHECK(tuned->rows[0].variant == "baseline");  // no point has a score yet
  CHECK(tuned->rows[0].point.empty());
  CHECK(tuned->rows[0].candidates == 0);
  CHECK(tuned->rows[0].points == 2);
}

TEST_CASE("a grid [search] without asha has a tuned view but no savings") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  const int64_t id = Study(store.get(), kRuns, /*asha=*/false);
  auto exp = query.GetExperiment(id);
  REQUIRE(exp.ok());
  auto savings = query.SearchSavings(*exp);
  REQUIRE(savings.ok());
  CHECK_FALSE(savings->has_value());
  auto report = query.Report("study", {"eval/loss"}, "");
  REQUIRE(report.ok());
  CHECK(report->view == "tuned");
}

}  // namespace tae::query
