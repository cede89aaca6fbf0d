// search.confirm through the controller and the store: the search's last run end adds the
// confirmation runs, a restarted taed adds what its predecessor missed and nothing twice, and the
// tuned report reads them alone.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "tests/unit/start_channel.h"

namespace tae::controller {
namespace {

constexpr const char* kConfirmed = R"(
name = "confirmed"
[train]
seeds = [0, 1]
[grid]
"train.lr" = [0.1, 0.01]
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
[report]
metrics = ["score"]
[search]
confirm = 2
)";

// A run's last metric and its exit, as its agent sends them.
std::vector<model::IngestEvent> Finished(uint64_t* seq, int64_t run_id, double score) {
  std::vector<model::IngestEvent> events(2);
  for (model::IngestEvent& e : events) {
    e.seq = ++*seq;
    e.run_id = run_id;
    e.attempt = 1;
  }
  events[0].kind = model::IngestEvent::Kind::kMetrics;
  events[0].step = 10;
  events[0].values = {{"score", score}};
  events[1].kind = model::IngestEvent::Kind::kExited;
  return events;
}

// The baseline is best at lr=0.1, no-pos at lr=0.01 (lower is better).
double Score(const model::RunRecord& run) {
  const bool fast = run.variant.find("lr=0.1]") != std::string::npos;
  const bool base = run.variant.rfind("baseline", 0) == 0;
  return (base == fast ? 1.0 : 2.0) + 0.01 * static_cast<double>(run.seed);
}

std::vector<model::RunRecord> Runs(store::Store* store, int64_t experiment) {
  auto runs = store->ListRuns(experiment);
  REQUIRE(runs.ok());
  return *runs;
}

}  // namespace

TEST_CASE("the search's end adds confirmation runs once and a restart adds the missed ones",
          "[confirm][controller]") {
  boost::asio::io_context io;
  auto store = std::move(*store::Store::Open(":memory:"));
  Controller first(&io, store.get(), Options{});
  auto channel = std::make_shared<FakeChannel>();
  AgentHello hello;
  hello.agent.id = "a";
  hello.agent.slots = 20;
  first.OnRegister(channel, hello);
  auto submitted = first.Submit({kConfirmed, "confirmed.toml", {}, false, ""});
  REQUIRE(submitted.ok());
  const int64_t exp = submitted->experiment_id;
  const std::vector<model::RunRecord> initial = Runs(store.get(), exp);
  REQUIRE(initial.size() == 8);
  for (const model::RunRecord& run : initial) {
    CHECK_FALSE(run.confirm);
  }
  uint64_t seq = 0;
  // Every search run but the last ends through the controller: nothing is added yet.
  for (size_t i = 0; i + 1 < initial.size(); ++i) {
    REQUIRE(
        first.OnEvents("a", channel.get(), Finished(&seq, initial[i].id, Score(initial[i])), seq)
            .ok());
    CHECK(Runs(store.get(), exp).size() == 8);
  }
  // taed stops after storing the last end but before planning: it goes straight into the store.
  REQUIRE(store
              ->Ingest("a", Finished(&seq, initial.back().id, Score(initial.back())),
                       lifecycle::IngestRules())
              .ok());
  REQUIRE(Runs(store.get(), exp).size() == 8);
  Controller second(&io, store.get(), Options{});
  second.Recover();
  std::vector<model::RunRecord> runs = Runs(store.get(), exp);
  REQUIRE(runs.size() == 12);
  for (size_t i = 8; i < 12; ++i) {
    INFO(runs[i].variant << " seed " << runs[i].seed);
    CHECK(runs[i].confirm);
    CHECK(runs[i].seed == static_cast<int64_t>(2 + (i - 8) % 2));  // above the search's 0 and 1
    CHECK(runs[i].config_json.find("\"train.seed\":" + std::to_string(runs[i].seed)) !=
          std::string::npos);
  }
  CHECK(runs[8].variant == "baseline[lr=0.1]");
  CHECK(runs[10].variant == "no-pos[lr=0.01]");
  CHECK(runs[10].config_json.find("\"model.pos_encoding\":\"none\"") != std::string::npos);
  CHECK(runs[10].config_json.find("\"train.lr\":0.01") != std::string::npos);
  query::Query query(store.get());
  auto shown = query.GetRun(runs[10].id);
  REQUIRE(shown.ok());
  CHECK(shown->transitions[0].reason ==
        "confirms the search: lr=0.01 chosen on score (min): 1.005 over 2 seeds, best of 2 "
        "points");
  // Pending: the tuned table says so and has no values yet.
  auto pending = query.Report(std::to_string(exp), {}, "", "spec", "");
  REQUIRE(pending.ok());
  CHECK(pending->view == "tuned");
  CHECK(pending->search_confirm == 2);
  CHECK(pending->estimates ==
        "pending: 4 of 4 confirmation runs (2 fresh seeds per chosen point) not finished");
  CHECK(pending->rows[0].cells[0].n == 0);
  // A third taed adds nothing more.
  Controller third(&io, store.get(), Options{});
  third.Recover();
  CHECK(Runs(store.get(), exp).size() == 12);

  // The confirmation runs end with values of their own; the table is theirs alone.
  for (size_t i = 8; i < 12; ++i) {
    REQUIRE(store->Transition(runs[i].id, lifecycle::Assign({"a"}, 2.0)).ok());
    REQUIRE(store
                ->Ingest("a", Finished(&seq, runs[i].id, 5.0 + static_cast<double>(i)),
                         lifecycle::IngestRules())
                .ok());
  }
  third.Recover();
  CHECK(Runs(store.get(), exp).size() == 12);
  auto report = query.Report(std::to_string(exp), {}, "", "spec", "");
  REQUIRE(report.ok());
  CHECK(report->estimates == "confirmed: 2 fresh seeds");
  REQUIRE(report->rows.size() == 2);
  CHECK(report->rows[0].variant == "baseline[lr=0.1]");
  CHECK(report->rows[0].cells[0].n == 2);
  CHECK(report->rows[0].cells[0].mean == Approx(13.5));  // runs 8 and 9: 13 and 14
  CHECK(report->rows[1].variant == "no-pos[lr=0.01]");
  CHECK(report->rows[1].cells[0].mean == Approx(15.5));
  CHECK(report->rows[1].cells[0].delta == Approx(2.0));
  // The grid view is the search's runs alone.
  auto grid = query.Report(std::to_string(exp), {}, "", "spec", "grid");
  REQUIRE(grid.ok());
  CHECK(grid->rows[0].variant == "baseline[lr=0.1]");
  CHECK(grid->rows[0].cells[0].n == 2);
  CHECK(grid->rows[0].cells[0].mean == Approx(1.005));
  // The stored [search] keeps search.confirm.
  auto experiment = query.GetExperiment(exp);
  REQUIRE(experiment.ok());
  CHECK(experiment->report.search.confirm == 2);
}

}  // namespace tae::controller
