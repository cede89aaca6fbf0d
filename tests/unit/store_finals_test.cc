// Store::FinalValues, the values a report is built from, against the stored rows read one run and
// key at a time: a study whose ids form one block with another study's runs inside it (read as a
// range of run_summaries_by_key, the other study's runs skipped), a study whose runs are spread
// over many ids (read through the join), divergences with and without a finite value before
// them, and keys the store has never seen.

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/store/store.h"
#include "tests/unit/study.h"
#include "tests/unit/temp_dir.h"

namespace tae::store {
namespace {

std::vector<int64_t> RunIds(Store* store, int64_t experiment) {
  auto runs = store->ListRuns(experiment);
  REQUIRE(runs.ok());
  std::vector<int64_t> ids;
  for (const model::RunRecord& run : *runs) {
    ids.push_back(run.id);
  }
  return ids;
}

// Three steps of every run, values that differ by run and step; eval/loss of `nan_run` turns
// non-finite at step 3 (after finite ones), eval/acc of `nan_first_run` at step 1 (before any).
void Ingest(Store* store, const std::vector<int64_t>& runs, int64_t nan_run,
            int64_t nan_first_run) {
  std::vector<model::IngestEvent> events;
  for (int64_t step = 1; step <= 3; ++step) {
    for (int64_t run : runs) {
      model::IngestEvent e;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.run_id = run;
      e.attempt = 1;
      e.step = step;
      e.wall_time = 1.7e9 + static_cast<double>(step);
      const double loss = static_cast<double>(run) + 1.0 / static_cast<double>(step);
      e.values = {
          {"train/loss", loss},
          {"eval/loss", run == nan_run && step == 3 ? std::nan("") : 2 * loss},
          {"eval/acc", run == nan_first_run ? std::nan("") : 0.1 * static_cast<double>(step)},
          {"perf/step_ms", 40.0 + static_cast<double>(step)}};
      events.push_back(e);
    }
  }
  REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
}

// What FinalValues should hold for (run, key), read from the tables one row at a time.
struct Expected {
  bool present = false;
  double value = 0, min_value = 0, max_value = 0;
  std::optional<int64_t> diverged_step;
};

Expected Read(Store* store, int64_t run, const std::string& key) {
  Expected out;
  auto summary = store->db()->Prepare(
      "SELECT s.last_value, s.min_value, s.max_value FROM run_summaries s JOIN metric_keys k ON "
      "k.id = s.key_id WHERE s.run_id = ? AND k.name = ?");
  REQUIRE(summary.ok());
  summary->Bind(1, run).Bind(2, key);
  auto row = summary->Step();
  REQUIRE(row.ok());
  if (*row) {
    out.present = true;
    out.value = summary->Double(0);
    out.min_value = summary->Double(1);
    out.max_value = summary->Double(2);
  }
  auto diverged = store->db()->Prepare(
      "SELECT d.step FROM metric_divergence d JOIN metric_keys k ON k.id = d.key_id WHERE "
      "d.run_id = ? AND k.name = ?");
  REQUIRE(diverged.ok());
  diverged->Bind(1, run).Bind(2, key);
  row = diverged->Step();
  REQUIRE(row.ok());
  if (*row) {
    out.present = true;
    out.diverged_step = diverged->Int(0);
    out.value = std::nan("");  // never the last finite value before it
  }
  return out;
}

// FinalValues of `runs` (an experiment's, in id order) equal the rows read one at a time: keys
// in the order asked, each key's runs in id order, no other study's run.
void CheckFinals(Store* store, int64_t experiment, const std::vector<int64_t>& runs) {
  const std::vector<std::string> keys = {"eval/loss", "no/such/key", "train/loss", "eval/acc"};
  auto values = store->FinalValues(experiment, keys);
  REQUIRE(values.ok());
  size_t at = 0;
  for (const std::string& key : keys) {
    for (int64_t run : runs) {
      const Expected expected = Read(store, run, key);
      if (!expected.present) {
        continue;
      }
      INFO("run " << run << ", key " << key);
      REQUIRE(at < values->size());
      const model::FinalValue& got = (*values)[at++];
      CHECK(got.run_id == run);
      CHECK(got.key == key);
      CHECK(got.diverged_step == expected.diverged_step);
      if (expected.diverged_step) {
        CHECK(std::isnan(got.value));
      } else {
        CHECK(got.value == expected.value);
        CHECK(got.min_value == expected.min_value);
        CHECK(got.max_value == expected.max_value);
      }
    }
  }
  CHECK(at == values->size());
}

}  // namespace

TEST_CASE("a report's final values are the stored summaries of the study's own runs") {
  testing::TempDir dir("tae-finals");
  auto opened = Store::Open(dir.Full("tae.db"));
  REQUIRE(opened.ok());
  Store* store = opened->get();

  // Study a: ids a1..a4, then b's four, then a5 and a6 added later: one block of 10 ids for 6
  // runs, b's runs inside it.
  auto a = store->CreateExperiment(testing::TwoVariantStudy("a", 4), 1.0);
  REQUIRE(a.ok());
  auto b = store->CreateExperiment(testing::TwoVariantStudy("b", 4), 1.0);
  REQUIRE(b.ok());
  REQUIRE(store
              ->AddRuns(*a,
                        {{"baseline", 10, "{}", {1, 0, 1, {}}}, {"wide", 11, "{}", {1, 0, 1, {}}}},
                        2.0)
              .ok());
  // Study c: 2 runs, 20 of d's, then one more of c's: 3 runs over 23 ids, read through the join.
  auto c = store->CreateExperiment(testing::TwoVariantStudy("c", 2), 1.0);
  REQUIRE(c.ok());
  auto d = store->CreateExperiment(testing::TwoVariantStudy("d", 20), 1.0);
  REQUIRE(d.ok());
  REQUIRE(store->AddRuns(*c, {{"baseline", 12, "{}", {1, 0, 1, {}}}}, 2.0).ok());

  const std::vector<int64_t> runs_a = RunIds(store, *a);
  const std::vector<int64_t> runs_b = RunIds(store, *b);
  const std::vector<int64_t> runs_c = RunIds(store, *c);
  const std::vector<int64_t> runs_d = RunIds(store, *d);
  REQUIRE(runs_a.size() == 6);
  REQUIRE(runs_a.back() - runs_a.front() + 1 == 10);  // b's 4 runs inside a's ids
  REQUIRE(runs_c.size() == 3);
  REQUIRE(runs_c.back() - runs_c.front() + 1 == 23);

  Ingest(store, runs_a, /*nan_run=*/runs_a[1], /*nan_first_run=*/runs_a[4]);
  Ingest(store, runs_b, /*nan_run=*/runs_b[0], /*nan_first_run=*/runs_b[2]);
  Ingest(store, runs_c, /*nan_run=*/runs_c[2], /*nan_first_run=*/runs_c[0]);
  Ingest(store, runs_d, /*nan_run=*/-1, /*nan_first_run=*/-1);

  SECTION("one block of ids, another study's runs inside it") { CheckFinals(store, *a, runs_a); }
  SECTION("the study inside the other's block") { CheckFinals(store, *b, runs_b); }
  SECTION("runs spread over many ids") { CheckFinals(store, *c, runs_c); }
  SECTION("no divergence") { CheckFinals(store, *d, runs_d); }
  SECTION("only keys the store has never seen") {
    auto values = store->FinalValues(*a, {"no/such/key"});
    REQUIRE(values.ok());
    CHECK(values->empty());
  }
}

}  // namespace tae::store
