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

}  // namespace tae::scheduler
