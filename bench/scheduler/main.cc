// One scheduling pass over a lab's queue (bench/README.md, "Scheduling"): 30,000 queued runs in
// 2,001 experiments (one of 10,000 runs, 2,000 of 10), with every agent busy and with free slots,
// through server/scheduler's Decide and through the scan it replaced (bench/scheduler/reference.h)
// in the same process. Prints each pass's median time over 5 and the ratio; checks both decide
// the same. Then the same queue through the controller and a store on disk
// (bench/scheduler/controller_pass.h): submits and whole passes; --decide-only skips that part.
//
//   tae-scheduler-bench [--runs N] [--experiments N] [--repeat N] [--decide-only]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/scheduler/controller_pass.h"
#include "bench/scheduler/reference.h"
#include "server/scheduler/scheduler.h"

namespace {

using tae::scheduler::AgentCapacity;
using tae::scheduler::Context;
using tae::scheduler::Decision;
using tae::scheduler::QueuedRun;

template <typename F>
double MedianMs(int repeat, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

bool Same(const Decision& a, const Decision& b) {
  if (a.placements.size() != b.placements.size() || a.waiting != b.waiting ||
      a.wake_at != b.wake_at) {
    return false;
  }
  for (size_t i = 0; i < a.placements.size(); ++i) {
    if (a.placements[i].run_id != b.placements[i].run_id ||
        a.placements[i].agent_id != b.placements[i].agent_id) {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 30000;
  int experiments = 2000;
  int repeat = 5;
  bool decide_only = false;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--decide-only") == 0) {
      decide_only = true;
      --i;
    } else if (i + 1 >= argc) {
      std::fprintf(stderr, "tae-scheduler-bench: %s needs a value\n", argv[i]);
      return 2;
    } else if (std::strcmp(argv[i], "--runs") == 0) {
      runs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--experiments") == 0) {
      experiments = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--repeat") == 0) {
      repeat = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr,
                   "usage: tae-scheduler-bench [--runs N] [--experiments N] [--repeat N] "
                   "[--decide-only]\n");
      return 2;
    }
  }
  // One large study (a third of the runs) queued first, then the small ones of 10 runs each.
  std::vector<QueuedRun> queue;
  const int big = runs / 3;
  for (int i = 0; i < runs; ++i) {
    QueuedRun run;
    run.run_id = i + 1;
    run.experiment_id = i < big ? 1 : 2 + (i - big) / std::max(1, (runs - big) / experiments);
    queue.push_back(run);
  }
  Context context;
  context.now = 1;
  for (int e = 1; e <= experiments + 1; ++e) {
    context.active[e] = e % 3;
  }
  std::vector<AgentCapacity> busy;
  std::vector<AgentCapacity> free;
  for (int a = 0; a < 8; ++a) {
    AgentCapacity agent{absl::StrCat("agent-", a), 0, 4, {}};
    busy.push_back(agent);
    agent.free_slots = 4;
    free.push_back(agent);
  }
  std::printf(
      "scheduler pass: %d queued runs in %d experiments, 8 agents x 4 slots, median of %d\n", runs,
      experiments + 1, repeat);
  int failed = 0;
  for (const auto& [name, agents] :
       {std::pair<const char*, std::vector<AgentCapacity>>{"every agent busy", busy},
        {"32 free slots", free}}) {
    Decision heap;
    Decision scan;
    const double heap_ms =
        MedianMs(repeat, [&] { heap = tae::scheduler::Decide(queue, agents, context); });
    const double scan_ms =
        MedianMs(repeat, [&] { scan = tae::scheduler::ReferenceDecide(queue, agents, context); });
    const bool same = Same(heap, scan);
    failed += same ? 0 : 1;
    std::printf(
        "  %-17s Decide %9.2f ms   scan (before) %9.2f ms   %7.1fx faster  %zu placed  %s\n", name,
        heap_ms, scan_ms, scan_ms / heap_ms, heap.placements.size(),
        same ? "same decisions" : "DECISIONS DIFFER");
  }
  if (!decide_only) {
    tae::bench::ControllerPassOptions options;
    options.big_runs = big;
    options.experiments = experiments;
    options.repeat = std::max(repeat, 5);
    failed += tae::bench::RunControllerPass(options) == 0 ? 0 : 1;
  }
  return failed == 0 ? 0 : 1;
}
