// The TPU pools' demand: decided from the queue and the agents (a pure function), published by
// the controller on its thread, read by the provider's thread without waiting.

#include "server/controller/demand.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"

namespace tae::controller {
namespace {

class NullChannel : public registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage&) override {}
  void Close() override {}
};

scheduler::QueuedRun Queued(int64_t id, int64_t experiment, model::Labels labels,
                            bool paused = false) {
  scheduler::QueuedRun run;
  run.run_id = id;
  run.experiment_id = experiment;
  run.labels = std::move(labels);
  run.paused = paused;
  return run;
}

registry::Agent Agent(const std::string& id, model::Labels labels) {
  registry::Agent agent;
  agent.id = id;
  agent.slots = 4;
  agent.labels = std::move(labels);
  agent.channel = std::make_shared<NullChannel>();
  return agent;
}

}  // namespace

TEST_CASE("demand counts the queued runs each pool's agents would take, and busy slots per VM") {
  const std::vector<DemandPool> pools = {{"v4", {{"accelerator", "tpu"}, {"pool", "v4"}}},
                                         {"other", {{"accelerator", "gpu"}}}};
  const std::vector<scheduler::QueuedRun> queued = {
      Queued(1, 1, {{"accelerator", "tpu"}}),        // v4
      Queued(2, 2, {}),                              // any pool
      Queued(3, 3, {{"accelerator", "tpu"}}, true),  // paused experiment: wants nothing
      Queued(4, 1, {{"accelerator", "cpu"}}),        // no pool
  };
  registry::AgentRegistry agents;
  agents.Connect(Agent("tae-v4-1-w0", {{"slice", "tae-v4-1"}}));
  agents.Connect(Agent("tae-v4-1-w1", {{"slice", "tae-v4-1"}}));
  agents.Connect(Agent("tae-v4-2-w0", {{"slice", "tae-v4-2"}}));
  agents.Connect(Agent("local-0", {}));
  agents.AddRun("tae-v4-1-w0", 10, 2);
  agents.AddRun("tae-v4-1-w1", 10, 2);
  agents.AddRun("local-0", 11, 1);

  const provider::TpuDemand demand = TpuDemandOf(pools, queued, agents);
  CHECK(demand.waiting == std::map<std::string, int>{{"v4", 2}, {"other", 1}});
  CHECK(demand.busy_vms == std::map<std::string, int>{{"tae-v4-1", 4}, {"tae-v4-2", 0}});
}

TEST_CASE(
    "a demand board gives the latest demand while it is recent, and nothing before or after") {
  provider::DemandBoard board;
  CHECK_FALSE(board.Latest(std::chrono::hours(1)).has_value());  // the core has not spoken
  provider::TpuDemand demand;
  demand.waiting["v4"] = 3;
  board.Publish(demand);
  auto latest = board.Latest(std::chrono::hours(1));
  REQUIRE(latest.has_value());
  CHECK(latest->waiting.at("v4") == 3);
  // Older than allowed (any age is older than a negative one): the provider skips its round.
  CHECK_FALSE(board.Latest(std::chrono::nanoseconds(-1)).has_value());
}

TEST_CASE("the controller publishes the pools' demand when it schedules") {
  boost::asio::io_context io;
  auto store = std::move(*store::Store::Open(":memory:"));
  provider::DemandBoard board;
  Options options;
  options.demand_pools = {{"cpu-pool", {{"accelerator", "cpu"}}}, {"tpu-pool", {{"x", "y"}}}};
  options.demand = &board;
  Controller controller(&io, store.get(), options);
  REQUIRE(controller
              .Submit({R"(
name = "tiny"
[train]
seeds = [0, 1]
[resources]
labels = { accelerator = "cpu" }
)",
                       "tiny.toml",
                       {},
                       false,
                       ""})
              .ok());
  auto latest = board.Latest(std::chrono::hours(1));
  REQUIRE(latest.has_value());
  CHECK(latest->waiting == std::map<std::string, int>{{"cpu-pool", 2}, {"tpu-pool", 0}});

  REQUIRE(controller.SetPaused("tiny", true).ok());
  latest = board.Latest(std::chrono::hours(1));
  REQUIRE(latest.has_value());
  CHECK(latest->waiting.at("cpu-pool") == 0);  // a paused experiment's runs want no VM
}

}  // namespace tae::controller

namespace tae::controller {

TEST_CASE(
    "a pool's slice that Kueue holds is noted, with Kueue's words, for the runs its agents would "
    "take, and other pools and slices that run are not") {
  const std::vector<DemandPool> pools = {{"v5e", {{"pool", "v5e"}, {"accelerator", "tpu"}}},
                                         {"cpu", {{"pool", "cpu"}}}};
  const std::vector<provider::CloudVm> slices = {
      {"gke", "v5e", "tae-v5e-2", "ml", "admitted", "admitted by Kueue; its pods are starting"},
      {"gke", "v5e", "tae-v5e-3", "ml", "waiting",
       "waiting for quota: couldn't assign flavors to pod set slice"},
      {"gke", "v5e", "tae-v5e-4", "ml", "waiting", "waiting for quota: second"},
      {"gke", "cpu", "tae-cpu-1", "ml", "admitted", "admitted by Kueue; its pods are starting"}};
  const std::vector<scheduler::PoolNote> notes = PoolNotesOf(pools, slices);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].labels == pools[0].labels);
  CHECK(notes[0].note ==
        "gke slice tae-v5e-3: waiting for quota: couldn't assign flavors to pod set slice");
  CHECK(PoolNotesOf(pools, {}).empty());
}

}  // namespace tae::controller
