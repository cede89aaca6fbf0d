// The read side's report with the file's floors and train.seeds design, through the store: the
// [report] stored with the experiment decides the comparisons and the banners.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"

namespace tae::query {
namespace {

// An experiment whose runs (variant, config, final eval/acc) all succeeded.
int64_t Finished(store::Store* store, const std::string& name,
                 const model::ExperimentReport& report,
                 const std::vector<std::pair<std::string, double>>& finals) {
  const std::string config =
      R"({"train.task": "assoc_recall", "train.vocab": 16, "train.seq_len": 32})";
  model::NewExperiment exp;
  exp.name = name;
  exp.spec_hash = name;
  exp.report = report;
  int64_t seed = 0;
  for (const auto& [variant, value] : finals) {
    exp.runs.push_back({variant, seed++, config, {}});
  }
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  auto runs = store->ListRuns(*id);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == finals.size());
  uint64_t seq = 1000 * static_cast<uint64_t>(*id);
  for (size_t i = 0; i < runs->size(); ++i) {
    const int64_t run = (*runs)[i].id;
    REQUIRE(store->Transition(run, lifecycle::Assign({"a"}, 2.0)).ok());
    std::vector<model::IngestEvent> events(3);
    for (model::IngestEvent& e : events) {
      e.seq = ++seq;
      e.run_id = run;
      e.attempt = 1;
    }
    events[0].kind = model::IngestEvent::Kind::kStarted;
    events[1].kind = model::IngestEvent::Kind::kMetrics;
    events[1].step = 1;
    REQUIRE((*runs)[i].variant == finals[i].first);
    events[1].values = {{"eval/acc", finals[i].second}};
    events[2].kind = model::IngestEvent::Kind::kExited;
    REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
  }
  return *id;
}

}  // namespace

TEST_CASE("the stored report floor and train.seeds design reach the report") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  model::ExperimentReport adaptive;
  adaptive.metrics = {"eval/acc"};
  adaptive.min_seeds = 3;
  adaptive.max_seeds = 12;
  Finished(store.get(), "mqar", adaptive,
           {{"baseline", 0.311},
            {"baseline", 0.322},
            {"baseline", 0.330},
            {"one-layer", 0.315},
            {"one-layer", 0.318},
            {"one-layer", 0.325}});
  auto report = query.Report("mqar", {}, "", "spec");
  REQUIRE(report.ok());
  CHECK(report->adaptive);
  REQUIRE(report->banners.size() == 1);
  CHECK(report->banners[0].find("most-frequent-value shortcut") != std::string::npos);
  REQUIRE(report->rows.size() == 2);
  const report::Cell& cell = report->rows[1].cells[0];
  CHECK(cell.decision == "undecided");
  CHECK(cell.decision_n == 3);
  CHECK_FALSE(cell.decision_final);  // adaptive: more seeds would come

  // The same values with a list of seeds: one test, final; and a floor of the file's own.
  model::ExperimentReport fixed;
  fixed.metrics = {"eval/acc"};
  fixed.floor = {{"eval/acc", 0.5}};
  Finished(store.get(), "mqar-list", fixed,
           {{"baseline", 0.311},
            {"baseline", 0.322},
            {"baseline", 0.330},
            {"one-layer", 0.315},
            {"one-layer", 0.318},
            {"one-layer", 0.325}});
  report = query.Report("mqar-list", {}, "", "spec");
  REQUIRE(report.ok());
  CHECK_FALSE(report->adaptive);
  CHECK(report->rows[1].cells[0].decision == "undecided");
  CHECK(report->rows[1].cells[0].decision_final);
  CHECK(report->rows[0].cells[0].level_kind == "floor");  // the user's floor comes first
  REQUIRE(report->banners.size() == 1);
  CHECK(report->banners[0].find("[report] floor (0.5)") != std::string::npos);
}

}  // namespace tae::query
