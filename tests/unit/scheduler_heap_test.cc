// server/scheduler's Decide against the scan it replaced: the same placements, waiting reasons
// and wake-up on random queues (priorities, experiments with active runs, pauses, backoffs, caps,
// labels, slot sizes and gangs) and fleets. The reference (bench/scheduler/reference.h) is the
// earlier implementation, O(queue x experiments), kept as the definition of the fair-share order.
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/scheduler/reference.h"
#include "server/scheduler/scheduler.h"

namespace tae::scheduler {
namespace {

std::string Describe(const Decision& d) {
  std::string out;
  for (const Placement& p : d.placements) {
    absl::StrAppend(&out, "r", p.run_id, "->", p.agent_id);
    for (const std::string& g : p.gang) {
      absl::StrAppend(&out, ",", g);
    }
    out += "; ";
  }
  for (const auto& [run, why] : d.waiting) {
    absl::StrAppend(&out, "r", run, " waits: ", why, "; ");
  }
  return absl::StrCat(out, "wake ", d.wake_at);
}

TEST_CASE("scheduler: the heap pass decides exactly as the scan over every experiment did") {
  std::mt19937 rng(20261128);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 3000; ++round) {
    std::vector<QueuedRun> queue;
    const int runs = pick(40);
    const int experiments = 1 + pick(6);
    for (int i = 0; i < runs; ++i) {
      QueuedRun run;
      run.run_id = i + 1;
      run.priority = pick(3);
      run.experiment_id = 1 + pick(experiments);
      run.slots = 1 + pick(3);
      run.hosts = pick(5) == 0 ? 2 + pick(2) : 1;
      run.paused = pick(12) == 0;
      run.not_before = pick(10) == 0 ? 50 + pick(100) : 0;
      run.max_concurrent = pick(5) == 0 ? 1 + pick(3) : 0;
      if (pick(4) == 0) {
        run.labels["accelerator"] = pick(2) ? "v4" : "v5e";
      }
      queue.push_back(run);
    }
    std::stable_sort(queue.begin(), queue.end(), [](const QueuedRun& a, const QueuedRun& b) {
      return a.priority > b.priority;  // highest first, then age (run id order)
    });
    std::vector<AgentCapacity> agents;
    for (int a = pick(6); a > 0; --a) {
      AgentCapacity agent;
      agent.id = absl::StrCat("agent-", a);
      agent.total_slots = pick(4);
      agent.free_slots = pick(agent.total_slots + 1);
      if (pick(2)) {
        agent.labels["accelerator"] = pick(2) ? "v4" : "v5e";
      }
      if (pick(2)) {
        agent.labels[kSliceLabel] = pick(2) ? "s1" : "s2";
        agent.labels[kWorkerLabel] = absl::StrCat(pick(4));
      }
      agents.push_back(agent);
    }
    Context context;
    context.now = 100;
    for (int e = 1; e <= experiments; ++e) {
      if (pick(2)) {
        context.active[e] = pick(4);
      }
    }
    INFO("round " << round);
    CHECK(Describe(Decide(queue, agents, context)) ==
          Describe(ReferenceDecide(queue, agents, context)));
  }
}

}  // namespace
}  // namespace tae::scheduler
