// What the gke provider does with a pool in a round (server/provider/gke_plan.h): replace what
// Kueue evicted or the cluster failed, ask for a slice while runs wait beyond the room there is,
// one a round up to max_slices, and give back a slice idle past its timeout.

#include "server/provider/gke_plan.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace tae::provider {
namespace {

GkePool Pool() {
  GkePool pool;
  pool.name = "v5e";
  pool.hosts = 2;
  pool.slots = 1;
  pool.max_slices = 3;
  pool.idle_timeout_s = 600;
  return pool;
}

GkeSlice Slice(int index, SliceState state, int busy, double idle_since = 0,
               const std::string& reason = "") {
  return {SliceName(Pool(), index), index, {state, reason}, busy, idle_since};
}

std::string Kinds(const std::vector<GkeAction>& actions) {
  std::string out;
  for (const GkeAction& a : actions) {
    out += absl::StrCat(a.kind == GkeAction::Kind::kCreate ? "+" : "-", a.index, " ");
  }
  return out;
}

TEST_CASE("gke plan: runs waiting beyond the room ask for one slice a round, up to max_slices") {
  const GkePool pool = Pool();
  CHECK(Kinds(PlanGkePool(pool, {}, 0, 0)).empty());
  std::vector<GkeAction> first = PlanGkePool(pool, {}, 3, 0);
  REQUIRE(Kinds(first) == "+1 ");
  CHECK(first[0].name == SliceName(pool, 1));
  CHECK(absl::StrContains(first[0].why, "3 run(s) wait for pool v5e, room for 0"));
  // Held by Kueue, it is room on its way: 2 slots for 2 runs, a third still asks.
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kWaiting, 0)}, 2, 0)).empty());
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kWaiting, 0)}, 3, 0)) == "+1 ");
  // Busy slices are no room; the lowest free index is taken.
  CHECK(Kinds(PlanGkePool(pool,
                          {Slice(0, SliceState::kAdmitted, 2), Slice(2, SliceState::kAdmitted, 2)},
                          1, 0)) == "+1 ");
  // At max_slices nothing more is asked for, however many wait.
  CHECK(Kinds(PlanGkePool(pool,
                          {Slice(0, SliceState::kAdmitted, 2), Slice(1, SliceState::kAdmitted, 2),
                           Slice(2, SliceState::kWaiting, 0)},
                          50, 0))
            .empty());
}

TEST_CASE(
    "gke plan: evicted, failed and finished slices go, and runs still waiting get a new one") {
  const GkePool pool = Pool();
  std::vector<GkeAction> actions = PlanGkePool(
      pool,
      {Slice(0, SliceState::kEvicted, 2, 0, "Kueue evicted it: Preempted"),
       Slice(1, SliceState::kFailed, 1, 0, "a node was lost"), Slice(2, SliceState::kFinished, 0)},
      2, 100);
  // The three go (their names are still taken while they do), and the two runs that were on
  // them, requeued, ask for a slice at the next free index.
  REQUIRE(Kinds(actions) == "-0 -1 -2 +3 ");
  CHECK(actions[0].why == "evicted: Kueue evicted it: Preempted");
  CHECK(actions[1].why == "failed: a node was lost");
  CHECK(actions[2].why == "finished");
}

TEST_CASE("gke plan: a slice idle past its timeout goes unless runs wait for its room") {
  const GkePool pool = Pool();
  const double now = 1000;
  // Idle 700 s > 600 s, nothing waits: deleted.
  std::vector<GkeAction> actions =
      PlanGkePool(pool, {Slice(0, SliceState::kAdmitted, 0, 300)}, 0, now);
  REQUIRE(Kinds(actions) == "-0 ");
  CHECK(actions[0].why == "idle for 700 s (idle_timeout_s = 600)");
  // Idle 500 s: kept. Busy: kept.
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kAdmitted, 0, 500)}, 0, now)).empty());
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kAdmitted, 1, 0)}, 0, now)).empty());
  // A run waits and this slice is its only room (its agents not registered yet): kept.
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kAdmitted, 0, 0)}, 1, now)).empty());
  // Two idle slices and one run waiting: one stays for it, the other goes.
  CHECK(Kinds(PlanGkePool(
            pool, {Slice(0, SliceState::kAdmitted, 0, 0), Slice(1, SliceState::kAdmitted, 0, 0)}, 1,
            now)) == "-0 ");
  // A slice Kueue still holds when nothing wants it any more goes after the timeout too.
  CHECK(Kinds(PlanGkePool(pool, {Slice(0, SliceState::kWaiting, 0, 0)}, 0, now)) == "-0 ");
}

}  // namespace
}  // namespace tae::provider

namespace tae::provider {

TEST_CASE(
    "gke plan: an admitted slice whose agents do not all register within start_timeout_s is "
    "replaced, and one that started never is") {
  GkePool pool = Pool();
  pool.start_timeout_s = 300;
  auto admitted = [&](int agents, double since) {
    GkeSlice slice = Slice(1, SliceState::kAdmitted, 0, 1000);
    slice.agents = agents;
    slice.admitted_since = since;
    return slice;
  };
  // Not yet: within its start time, and nothing is asked for (its room is on its way).
  CHECK(PlanGkePool(pool, {admitted(1, 1000)}, 2, 1299).empty());
  // Past it with one of its two agents: deleted with why, and a new one asked for (runs wait).
  const std::vector<GkeAction> late = PlanGkePool(pool, {admitted(1, 1000)}, 2, 1300);
  REQUIRE(late.size() == 2);
  CHECK(late[0].kind == GkeAction::Kind::kDelete);
  CHECK(late[0].name == "tae-v5e-1");
  CHECK(late[0].why ==
        "failed to start: 1 of its 2 agents registered within start_timeout_s = 300 s of its "
        "admission");
  CHECK(late[1].kind == GkeAction::Kind::kCreate);
  CHECK(late[1].name == "tae-v5e-2");  // the old name is taken until it is gone
  // Started (admitted_since 0 once all its agents were seen): an agent missing later is not a
  // failed start.
  CHECK(PlanGkePool(pool, {admitted(1, 0)}, 1, 5000).empty());
  // A slice Kueue still holds is never judged by it.
  GkeSlice held = Slice(1, SliceState::kWaiting, 0, 1000);
  held.admitted_since = 0;
  CHECK(PlanGkePool(pool, {held}, 1, 5000).empty());
}

}  // namespace tae::provider
