// The scheduler's view of the queue, kept between passes (server/controller/queue_cache.h) from
// the store's change notes (Store::TakeQueueChanges): after any sequence of submits,
// placements, losses with backoff, cancels, pauses and stored reasons, the kept view is the one
// a fresh read of the store gives.
#include "server/controller/queue_cache.h"

#include <catch2/catch.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "server/lifecycle/lifecycle.h"
#include "server/store/store.h"

namespace tae::controller {
namespace {

std::string Describe(const std::vector<scheduler::QueuedRun>& runs) {
  std::string out;
  for (const scheduler::QueuedRun& r : runs) {
    absl::StrAppend(&out, "r", r.run_id, " e", r.experiment_id, " p", r.priority, " s", r.slots,
                    " h", r.hosts, " c", r.max_concurrent, " nb", r.not_before,
                    r.paused ? " paused" : "", " labels", r.labels.size(), "\n");
  }
  return out;
}

// A new view read whole from the store, as after a restart.
std::string Fresh(store::Store* store) {
  QueueCache fresh;
  fresh.Reset(*store->QueueRows());
  fresh.SetPaused(*store->PausedExperiments());
  return Describe(fresh.Runs());
}

// What the controller does before a pass (Controller::RefreshQueue).
void Refresh(store::Store* store, QueueCache* cache) {
  model::QueueChanges changes = store->TakeQueueChanges();
  if (changes.all || !cache->loaded()) {
    cache->Reset(*store->QueueRows());
    cache->SetPaused(*store->PausedExperiments());
    return;
  }
  if (!changes.runs.empty()) {
    cache->Update(changes.runs, *store->QueueRows(changes.runs));
  }
  if (changes.paused) {
    cache->SetPaused(*store->PausedExperiments());
  }
}

}  // namespace

TEST_CASE("the kept queue matches a fresh read of the store after any sequence of writes") {
  auto opened = store::Store::Open(":memory:");
  REQUIRE(opened.ok());
  store::Store* store = opened->get();
  QueueCache cache;
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<int64_t> experiments;
  double now = 1000;
  for (int step = 0; step < 400; ++step) {
    now += 1;
    std::vector<model::QueueRow> queued = *store->QueueRows();
    const int op = pick(7);
    if (op == 0 || experiments.empty()) {
      model::NewExperiment exp;
      exp.name = absl::StrCat("e", step);
      exp.spec_hash = exp.name;
      exp.spec_text = "name = \"x\"";
      for (int r = 1 + pick(5); r > 0; --r) {
        model::RunResources resources;
        resources.priority = pick(3);
        resources.slots = 1 + pick(2);
        resources.hosts = pick(4) == 0 ? 2 : 1;
        resources.max_concurrent = pick(3);
        if (pick(3) == 0) {
          resources.labels = {{"accelerator", pick(2) ? "v4" : "cpu"}};
        }
        exp.runs.push_back({absl::StrCat("v", r), 0, "{}", resources});
      }
      experiments.push_back(*store->CreateExperiment(exp, now));
    } else if (op == 1 && !queued.empty()) {
      const int64_t run = queued[pick(static_cast<int>(queued.size()))].id;
      REQUIRE(store->Transition(run, lifecycle::Assign({"agent-a"}, now)).ok());
    } else if (op == 2) {
      // A placed run is lost (requeued after a backoff) or finishes.
      std::vector<model::RunRecord> active = *store->ActiveRuns();
      if (!active.empty()) {
        const int64_t run = active[pick(static_cast<int>(active.size()))].id;
        REQUIRE(store
                    ->Transition(run, pick(2) ? lifecycle::Lost("agent lost", now, 30)
                                              : lifecycle::Finish(model::RunState::kSucceeded,
                                                                  "exit code 0", now))
                    .ok());
      }
    } else if (op == 3 && !queued.empty()) {
      const int64_t run = queued[pick(static_cast<int>(queued.size()))].id;
      REQUIRE(
          store->Transition(run, lifecycle::Finish(model::RunState::kCancelled, "cancelled", now))
              .ok());
    } else if (op == 4) {
      REQUIRE(store
                  ->SetExperimentPaused(experiments[pick(static_cast<int>(experiments.size()))],
                                        pick(2) == 0)
                  .ok());
    } else if (op == 5 && !queued.empty()) {
      REQUIRE(store->SetWaitingReasons({{queued[0].id, absl::StrCat("why ", step)}}).ok());
    } else if (op == 6 && pick(10) == 0) {
      cache.Invalidate();  // a failed read or write: the next refresh reads everything
    }
    if (pick(3) != 0) {  // passes do not follow every write
      Refresh(store, &cache);
      INFO("step " << step << ", op " << op);
      REQUIRE(Describe(cache.Runs()) == Fresh(store));
    }
  }
  Refresh(store, &cache);
  CHECK(cache.size() == store->QueueRows()->size());
  CHECK(cache.size() > 0);
}

TEST_CASE("the store names what it wrote: everything after open, then only the runs touched") {
  auto opened = store::Store::Open(":memory:");
  REQUIRE(opened.ok());
  store::Store* store = opened->get();
  CHECK(store->TakeQueueChanges().all);  // nothing is known yet
  CHECK_FALSE(store->TakeQueueChanges().all);
  model::NewExperiment exp;
  exp.name = "study";
  exp.spec_hash = "h";
  exp.spec_text = "name = \"study\"";
  exp.runs.push_back({"a", 0, "{}", {}});
  exp.runs.push_back({"b", 0, "{}", {}});
  const int64_t id = *store->CreateExperiment(exp, 1);
  model::QueueChanges changes = store->TakeQueueChanges();
  CHECK_FALSE(changes.all);
  CHECK(changes.runs.size() == 2);
  CHECK_FALSE(changes.paused);
  const int64_t first = *changes.runs.begin();
  REQUIRE(store->Transition(first, lifecycle::Assign({"x"}, 2)).ok());
  REQUIRE(store->SetWaitingReasons({{first + 1, "waiting for a free slot"}}).ok());
  changes = store->TakeQueueChanges();
  CHECK(changes.runs == std::set<int64_t>{first});  // the reason is the reader's own write
  REQUIRE(store->SetExperimentPaused(id, true).ok());
  changes = store->TakeQueueChanges();
  CHECK(changes.paused);
  CHECK(changes.runs.empty());
  // Only the queued one of the two is read back.
  std::vector<model::QueueRow> rows = *store->QueueRows({first, first + 1});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].id == first + 1);
  CHECK(rows[0].reason == "waiting for a free slot");
}

TEST_CASE("only the waiting reasons that differ from the stored ones are written") {
  QueueCache cache;
  model::QueueRow a;
  a.id = 1;
  a.reason = "submitted";
  model::QueueRow b;
  b.id = 2;
  b.reason = "waiting for a free slot";
  cache.Reset({a, b});
  scheduler::Waiting waiting;
  const int free_slot = waiting.Reason("waiting for a free slot");
  waiting.Add(1, free_slot);
  waiting.Add(2, free_slot);
  waiting.Add(3, free_slot);  // not in the queue any more: nothing to write
  waiting.Finish();
  CHECK(cache.ChangedReasons(waiting) ==
        std::vector<std::pair<int64_t, std::string>>{{1, "waiting for a free slot"}});
  CHECK(cache.ChangedReasons(waiting).empty());  // taken as stored
}

}  // namespace tae::controller
