// The read side's report: which metrics it shows when none is named (the file's [report], else
// eval/loss and eval/acc, else the runs' own) and which way each is better.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"

namespace tae::query {
namespace {

// An experiment of two runs (baseline, ablated) that succeeded after logging `metric` at steps
// 1 and 2 with the given values.
int64_t Finished(store::Store* store, const std::string& name,
                 const model::ExperimentReport& report, const std::string& metric,
                 std::vector<std::pair<double, double>> values) {
  model::NewExperiment exp;
  exp.name = name;
  exp.spec_hash = name;
  exp.report = report;
  exp.runs.push_back({"baseline", 0, "{}", {}});
  exp.runs.push_back({"ablated", 0, "{}", {}});
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  auto runs = store->ListRuns(*id);
  REQUIRE(runs.ok());
  uint64_t seq = 1000 * static_cast<uint64_t>(*id);
  for (size_t i = 0; i < runs->size(); ++i) {
    const int64_t run = (*runs)[i].id;
    REQUIRE(store->Transition(run, lifecycle::Assign({"a"}, 2.0)).ok());
    std::vector<model::IngestEvent> events;
    for (int step = 0; step < 3; ++step) {
      model::IngestEvent e;
      e.seq = ++seq;
      e.run_id = run;
      e.attempt = 1;
      e.kind = step == 0 ? model::IngestEvent::Kind::kStarted : model::IngestEvent::Kind::kMetrics;
      e.step = step;
      if (step > 0) {
        e.values = {{metric, step == 1 ? values[i].first : values[i].second}};
      }
      events.push_back(e);
    }
    model::IngestEvent exit;
    exit.seq = ++seq;
    exit.run_id = run;
    exit.attempt = 1;
    exit.kind = model::IngestEvent::Kind::kExited;
    events.push_back(exit);
    REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
  }
  return *id;
}

}  // namespace

TEST_CASE("a report shows the file's [report] metrics, best taken the way its goal says") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  // Rate: baseline 10 then 5, ablated 20 then 30.
  Finished(store.get(), "declared", {{"Rate"}, {{"Rate", "max"}}}, "Rate", {{10, 5}, {20, 30}});
  auto report = query.Report("declared", {}, "");
  REQUIRE(report.ok());
  CHECK(report->metrics == std::vector<std::string>{"Rate"});
  CHECK(report->metrics_source == "spec");
  REQUIRE(report->rows.size() == 2);
  for (const report::Row& row : report->rows) {
    REQUIRE(row.cells.size() == 1);
    // best is each run's highest value (its goal is max), the mean its last.
    CHECK(row.cells[0].best == (row.variant == "baseline" ? 10 : 30));
    CHECK(row.cells[0].mean == (row.variant == "baseline" ? 5 : 30));
  }
  // Without a goal a metric named Rate is taken as lower-is-better, as before.
  Finished(store.get(), "undeclared", {}, "Rate", {{10, 5}, {20, 30}});
  auto plain = query.Report("undeclared", {}, "");
  REQUIRE(plain.ok());
  CHECK(plain->metrics_source == "runs");
  CHECK(plain->metrics == std::vector<std::string>{"Rate"});
  CHECK(plain->rows[0].cells[0].best == 5);
  // A metric asked for wins over the file's.
  auto asked = query.Report("declared", {"Rate", "other"}, "");
  REQUIRE(asked.ok());
  CHECK(asked->metrics_source == "asked");
  CHECK(asked->metrics.size() == 2);
}

TEST_CASE("a report of tae-train runs keeps eval/loss and eval/acc as its default metrics") {
  auto store = std::move(*store::Store::Open(":memory:"));
  Query query(store.get());
  Finished(store.get(), "trained", {}, "eval/loss", {{2, 1}, {3, 2}});
  auto report = query.Report("trained", {}, "");
  REQUIRE(report.ok());
  CHECK(report->metrics == std::vector<std::string>{"eval/loss", "eval/acc"});
  CHECK(report->metrics_source == "default");
}

}  // namespace tae::query
