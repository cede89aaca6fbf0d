// Adaptive seeds through the controller: a run's end adds the seeds server/seeds plans, and a
// restarted taed adds what its predecessor decided on but did not add, and nothing twice.

#include <catch2/catch.hpp>

#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "tests/unit/start_channel.h"

namespace tae::controller {
namespace {

constexpr const char* kAdaptive = R"(
name = "adaptive"
[train]
seeds = { min = 3, max = 5 }
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
[report]
metrics = ["score"]
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

// Scores with a difference 3 or 4 seeds cannot settle (p = 0.29 at n = 3, 0.19 at n = 4): every
// comparison stays undecided, and close enough that futility does not end it before max.
double Score(const std::string& variant, int64_t seed) {
  return 1.0 + 0.1 * static_cast<double>(seed % 3) + (variant == "baseline" ? 0.0 : 0.1);
}

std::vector<model::RunRecord> Runs(store::Store* store, int64_t experiment) {
  auto runs = store->ListRuns(experiment);
  REQUIRE(runs.ok());
  return *runs;
}

}  // namespace

TEST_CASE(
    "a run's end adds seeds to undecided comparisons, and a restart adds the missed ones once") {
  boost::asio::io_context io;
  auto store = std::move(*store::Store::Open(":memory:"));
  Controller first(&io, store.get(), Options{});
  auto channel = std::make_shared<FakeChannel>();
  AgentHello hello;
  hello.agent.id = "a";
  hello.agent.slots = 20;
  first.OnRegister(channel, hello);
  auto submitted = first.Submit({kAdaptive, "adaptive.toml", {}, false, ""});
  REQUIRE(submitted.ok());
  const int64_t exp = submitted->experiment_id;
  REQUIRE(Runs(store.get(), exp).size() == 6);
  REQUIRE(channel->starts.size() == 6);

  uint64_t seq = 0;
  const std::vector<model::RunRecord> initial = Runs(store.get(), exp);
  for (size_t i = 0; i < initial.size(); ++i) {
    const model::RunRecord& run = initial[i];
    REQUIRE(
        first
            .OnEvents("a", channel.get(), Finished(&seq, run.id, Score(run.variant, run.seed)), seq)
            .ok());
    if (i + 1 < initial.size()) {
      CHECK(Runs(store.get(), exp).size() == 6);  // nothing while a run is pending
    }
  }
  std::vector<model::RunRecord> runs = Runs(store.get(), exp);
  REQUIRE(runs.size() == 8);  // seed 3 of each arm
  for (size_t i = 6; i < 8; ++i) {
    CHECK(runs[i].seed == 3);
    CHECK(runs[i].state == model::RunState::kAssigned);  // placed in the same pass
    CHECK(runs[i].config_json.find("\"train.seed\":3") != std::string::npos);
  }
  CHECK(runs[6].variant == "baseline");
  CHECK(runs[7].variant == "no-pos");
  CHECK(runs[7].config_json.find("\"model.pos_encoding\":\"none\"") != std::string::npos);
  query::Query query(store.get());
  auto shown = query.GetRun(runs[7].id);
  REQUIRE(shown.ok());
  CHECK(shown->transitions[0].reason.rfind(
            "added by adaptive seeds: score: no-pos vs baseline undecided at n=3", 0) == 0);
  CHECK(channel->starts.size() == 8);

  // taed stops after storing the two new runs' ends but before adding seeds: the ends go
  // straight into the store here, as a crash between the two would leave them.
  for (size_t i = 6; i < 8; ++i) {
    REQUIRE(store
                ->Ingest("a", Finished(&seq, runs[i].id, Score(runs[i].variant, 3)),
                         lifecycle::IngestRules())
                .ok());
  }
  REQUIRE(Runs(store.get(), exp).size() == 8);
  Controller second(&io, store.get(), Options{});
  second.Recover();
  runs = Runs(store.get(), exp);
  REQUIRE(runs.size() == 10);  // seed 4 of each arm, once
  CHECK(runs[8].seed == 4);
  CHECK(runs[9].seed == 4);
  Controller third(&io, store.get(), Options{});
  third.Recover();
  CHECK(Runs(store.get(), exp).size() == 10);
}

}  // namespace tae::controller
