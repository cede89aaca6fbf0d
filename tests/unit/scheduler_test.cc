#include "server/scheduler/scheduler.h"

#include <catch2/catch.hpp>

namespace tae::scheduler {

TEST_CASE("runs go to agents with free slots, in queue order, spreading load") {
  std::vector<QueuedRun> queue = {{1, 0, 1, {}}, {2, 0, 1, {}}, {3, 0, 1, {}}};
  std::vector<AgentCapacity> agents = {{"a", 1, 1, {}}, {"b", 2, 2, {}}};
  std::vector<Placement> placed = Place(queue, agents);
  REQUIRE(placed.size() == 3);
  CHECK(placed[0].agent_id == "b");  // most free slots first
  CHECK(placed[1].agent_id == "a");  // a and b tie at 1; the first listed wins
  CHECK(placed[2].agent_id == "b");
}

TEST_CASE("a run waits when no agent has the slots it needs") {
  std::vector<QueuedRun> queue = {{1, 0, 3, {}}, {2, 0, 1, {}}};
  std::vector<Placement> placed = Place(queue, {{"a", 2, 2, {}}});
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].run_id == 2);  // the big run does not block the small one
}

TEST_CASE("label constraints must all match the agent's labels") {
  std::vector<QueuedRun> queue = {{1, 0, 1, {{"accelerator", "v4-8"}}},
                                  {2, 0, 1, {{"accelerator", "cpu"}}}};
  std::vector<AgentCapacity> agents = {{"cpu-box", 4, 4, {{"accelerator", "cpu"}}}};
  std::vector<Placement> placed = Place(queue, agents);
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].run_id == 2);
  CHECK(LabelsMatch({}, {{"x", "y"}}));
  CHECK_FALSE(LabelsMatch({{"x", "y"}}, {}));
  CHECK_FALSE(LabelsMatch({{"x", "y"}}, {{"x", "z"}}));
}

TEST_CASE("a waiting run says why") {
  QueuedRun tpu{1, 0, 1, {{"accelerator", "v4-8"}}};
  QueuedRun big{2, 0, 8, {}};
  QueuedRun small{3, 0, 1, {}};
  std::vector<AgentCapacity> agents = {{"cpu-box", 0, 4, {{"accelerator", "cpu"}}}};
  CHECK(WhyWaiting(small, {}) == "waiting for an agent to connect");
  CHECK(WhyWaiting(tpu, agents) == "waiting: no connected agent has accelerator=v4-8");
  CHECK(WhyWaiting(big, agents) == "waiting: needs 8 slots, the largest matching agent has 4");
  CHECK(WhyWaiting(small, agents) == "waiting for a free slot");
}

TEST_CASE("no agents, no placements") { CHECK(Place({{1, 0, 1, {}}}, {}).empty()); }

namespace {

QueuedRun Run(int64_t id, int64_t experiment, int priority = 0) {
  QueuedRun run;
  run.run_id = id;
  run.experiment_id = experiment;
  run.priority = priority;
  return run;
}

std::vector<int64_t> Ids(const Decision& decision) {
  std::vector<int64_t> ids;
  for (const Placement& p : decision.placements) {
    ids.push_back(p.run_id);
  }
  return ids;
}

}  // namespace

TEST_CASE("experiments of equal priority take turns (fair share)", "[scheduler]") {
  // e1 submitted 4 runs before e2 submitted 2; 4 free slots.
  std::vector<QueuedRun> queue = {Run(1, 1), Run(2, 1), Run(3, 1), Run(4, 1), Run(5, 2), Run(6, 2)};
  Decision d = Decide(queue, {{"a", 4, 4, {}}}, Context{});
  CHECK(Ids(d) == std::vector<int64_t>{1, 5, 2, 6});
  // e1 already has 2 active runs elsewhere: e2 goes first until they are level.
  Context busy;
  busy.active[1] = 2;
  d = Decide(queue, {{"a", 3, 3, {}}}, busy);
  CHECK(Ids(d) == std::vector<int64_t>{5, 6, 1});
  CHECK(d.waiting.at(2) == "waiting for a free slot");
}

TEST_CASE("higher priority goes first, whatever the experiment", "[scheduler]") {
  std::vector<QueuedRun> queue = {Run(7, 2, 5), Run(1, 1), Run(5, 2)};
  Decision d = Decide(queue, {{"a", 2, 2, {}}}, Context{});
  CHECK(Ids(d) == std::vector<int64_t>{7, 1});
}

TEST_CASE("max_concurrent caps an experiment's active runs and says so", "[scheduler]") {
  std::vector<QueuedRun> queue = {Run(1, 1), Run(2, 1), Run(3, 1), Run(4, 2)};
  for (QueuedRun& run : queue) {
    run.max_concurrent = run.experiment_id == 1 ? 2 : 0;
  }
  Context context;
  context.active[1] = 1;  // one e1 run already active: one more allowed
  Decision d = Decide(queue, {{"a", 8, 8, {}}}, context);
  CHECK(Ids(d) == std::vector<int64_t>{4, 1});
  CHECK(d.waiting.at(2) == "experiment e1 at its cap of 2 active runs (resources.max_concurrent)");
  CHECK(d.waiting.at(3) == d.waiting.at(2));
}

TEST_CASE("paused experiments and runs in backoff wait, the earliest backoff end is reported",
          "[scheduler]") {
  std::vector<QueuedRun> queue = {Run(1, 1), Run(2, 2), Run(3, 2), Run(4, 3)};
  queue[0].paused = true;
  queue[1].not_before = 130.0;
  queue[2].not_before = 110.0;
  Context context;
  context.now = 100.0;  // a fake clock
  Decision d = Decide(queue, {{"a", 4, 4, {}}}, context);
  CHECK(Ids(d) == std::vector<int64_t>{4});
  CHECK(d.waiting.at(1) == "experiment paused (taectl resume)");
  CHECK(d.waiting.at(2) == "retry backoff after a lost attempt: starts in 30s");
  CHECK(d.waiting.at(3) == "retry backoff after a lost attempt: starts in 10s");
  CHECK(d.wake_at == 110.0);
  context.now = 110.0;  // the clock moves on: run 3's backoff is over
  d = Decide(queue, {{"a", 4, 4, {}}}, context);
  CHECK(Ids(d) == std::vector<int64_t>{3, 4});
  CHECK(d.wake_at == 130.0);
}

}  // namespace tae::scheduler

namespace tae::scheduler {
namespace {

QueuedRun Gang(int64_t id, int hosts, model::Labels labels = {}) {
  QueuedRun run;
  run.run_id = id;
  run.hosts = hosts;
  run.labels = std::move(labels);
  return run;
}

AgentCapacity Host(const std::string& id, const std::string& slice, const std::string& worker,
                   int free = 1) {
  model::Labels labels = {{"accelerator", "v4"}};
  if (!slice.empty()) {
    labels["slice"] = slice;
  }
  if (!worker.empty()) {
    labels["worker"] = worker;
  }
  return {id, free, 1, labels};
}

}  // namespace

TEST_CASE("a gang takes hosts of one slice, ranks in worker order", "[scheduler][gang]") {
  // Slice a has 2 free hosts, slice b 3; worker 10 sorts after worker 2 (numbers, not text).
  std::vector<AgentCapacity> agents = {Host("b-w10", "b", "10"), Host("a-0", "a", "0"),
                                       Host("b-w2", "b", "2"),   Host("b-w0", "b", "0"),
                                       Host("a-1", "a", "1", 0), Host("lone", "", "")};
  std::vector<Placement> placed = Place({Gang(1, 3)}, agents);
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].gang == std::vector<std::string>{"b-w0", "b-w2", "b-w10"});
  CHECK(placed[0].agent_id == "b-w0");  // rank 0
}

TEST_CASE("a gang is placed all at once or not at all", "[scheduler][gang]") {
  // Two slices of 2 hosts each; 1 host of slice a is busy: the gang of 2 goes to slice b, a
  // second gang of 2 waits (one free host in a is not enough), a one-host run takes that host.
  std::vector<AgentCapacity> agents = {Host("a0", "a", "0"), Host("a1", "a", "1", 0),
                                       Host("b0", "b", "0"), Host("b1", "b", "1")};
  QueuedRun single;
  single.run_id = 3;
  Decision decision = Decide({Gang(1, 2), Gang(2, 2), single}, agents, Context{});
  REQUIRE(decision.placements.size() == 2);
  CHECK(decision.placements[0].gang == std::vector<std::string>{"b0", "b1"});
  CHECK(decision.placements[1].run_id == 3);
  CHECK(decision.placements[1].agent_id == "a0");
  CHECK(decision.placements[1].gang.empty());
  REQUIRE(decision.waiting.count(2) == 1);
  CHECK(decision.waiting.at(2) == "waiting for 2 hosts of one slice with 1 free slot(s) each");
}

TEST_CASE("a gang that no slice can hold says so", "[scheduler][gang]") {
  std::vector<AgentCapacity> agents = {Host("a0", "a", "0"), Host("x", "", ""),
                                       Host("b0", "b", "0")};
  Decision decision = Decide({Gang(1, 2)}, agents, Context{});
  CHECK(decision.placements.empty());
  CHECK(decision.waiting.at(1) ==
        "waiting: needs 2 hosts of one slice (agents labelled slice=NAME); the largest has 1");
  // Labels narrow the slice: only matching hosts count.
  Decision labelled = Decide({Gang(2, 2, {{"accelerator", "v5"}})},
                             {Host("a0", "a", "0"), Host("a1", "a", "1")}, Context{});
  CHECK(labelled.waiting.at(2) ==
        "waiting: needs 2 hosts of one slice (agents labelled slice=NAME and the run's labels); "
        "the largest has 0");
}

}  // namespace tae::scheduler

namespace tae::scheduler {

TEST_CASE(
    "a run that a held pool's agents would take says what the pool's provider says, and a run the "
    "pool cannot take does not") {
  QueuedRun tpu{1, 0, 1, {{"accelerator", "tpu"}}};
  QueuedRun gang{2, 0, 1, {{"accelerator", "tpu"}}};
  gang.hosts = 2;
  QueuedRun cpu{3, 0, 1, {{"accelerator", "cpu"}}};
  Context context;
  context.pool_notes = {{{{"accelerator", "tpu"}, {"pool", "v5e"}},
                         "gke slice tae-v5e-1: waiting for quota: insufficient quota"}};
  const Decision d = Decide({tpu, gang, cpu}, {}, context);
  CHECK(d.placements.empty());
  CHECK(d.waiting.at(1) ==
        "waiting for an agent to connect; gke slice tae-v5e-1: waiting for quota: insufficient "
        "quota");
  CHECK(d.waiting.at(2) == d.waiting.at(1));
  CHECK(d.waiting.at(3) == "waiting for an agent to connect");
  // With agents of the pool connected and busy, the note still tells why no more come.
  const Decision busy = Decide({tpu}, {{"tae-v5e-1-w0", 0, 1, {{"accelerator", "tpu"}}}}, context);
  CHECK(busy.waiting.at(1) ==
        "waiting for a free slot; gke slice tae-v5e-1: waiting for quota: insufficient quota");
}

}  // namespace tae::scheduler
