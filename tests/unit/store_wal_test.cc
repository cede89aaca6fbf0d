// taed's one connection leaves no statement busy after a read, so SQLite's checkpoints restart
// the WAL and it stays the size of a few checkpoints however long taed writes. A statement read
// in part (one row of a lookup) kept a read transaction open: the WAL then grew with every
// write (130 MB in a 5-second ingest benchmark, without bound over a night).

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"
#include "tests/unit/study.h"
#include "tests/unit/temp_dir.h"

namespace tae::store {
namespace {

// One batch as an agent sends it: `lines` steps from `first_step` of every run, 4 values each.
std::vector<model::IngestEvent> Batch(int64_t first_run, int runs, int64_t first_step, int lines) {
  std::vector<model::IngestEvent> events;
  for (int64_t step = first_step; step < first_step + lines; ++step) {
    for (int r = 0; r < runs; ++r) {
      model::IngestEvent e;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.run_id = first_run + r;
      e.attempt = 1;
      e.step = step;
      e.wall_time = 1.7e9;
      e.values = {{"train/loss", 2.0 / static_cast<double>(step)},
                  {"eval/loss", 2.5 / static_cast<double>(step)},
                  {"lr", 1e-3},
                  {"tokens", static_cast<double>(step * 4096)}};
      events.push_back(e);
    }
  }
  return events;
}

// Every read a request of the dashboard or taectl makes of an experiment and its runs.
void ReadEverything(query::Query* query, int64_t experiment_id, int64_t run_id) {
  CHECK(query->GetExperiment(experiment_id).ok());
  CHECK(query->ListExperiments(0).ok());
  CHECK(query->ListRuns("wal").ok());
  CHECK(query->ListRunsPage("wal", 0, 2).ok());
  CHECK(query->CurveRuns(experiment_id, "eval/loss").ok());
  CHECK(query->GetRun(run_id).ok());
  CHECK(query->Queue().ok());
  CHECK(query->Logs(run_id, 0, 10).ok());
  CHECK(query->ListTransitions(run_id).ok());
  CHECK(query->Summaries(run_id).ok());
  CHECK(query->ExperimentSummaries(experiment_id).ok());
  CHECK(query->FinalValues(experiment_id, {"eval/loss", "no/such/key"}).ok());
  CHECK(query->MetricNames(experiment_id).ok());
  CHECK(query->QueryMetric(run_id, "eval/loss", 0).ok());
  CHECK(query->QueryMetric(run_id, "eval/loss", 10).ok());
  CHECK(query->QueryMetric(run_id, "no/such/key", 10).ok());
  CHECK(query->ExperimentSeries(experiment_id, "train/loss").ok());
  CHECK(query->QueryMetricAfter(run_id, "train/loss", 5).ok());
  CHECK(query->ExperimentVersion(experiment_id).ok());
  CHECK(query->SearchLogs(run_id, "x", 10).ok());
}

// A store at path with one study of 4 runs; its WAL checkpointed on a thread of its own when
// `background`.
struct StudyStore {
  std::unique_ptr<Store> store;
  int64_t experiment = 0;
  int64_t first_run = 0;
};

StudyStore OpenStudy(const std::string& path, bool background) {
  StudyStore out;
  auto opened = Store::Open(path);
  REQUIRE(opened.ok());
  out.store = std::move(*opened);
  if (background) {
    REQUIRE(out.store->db()->CheckpointInBackground().ok());
    REQUIRE(out.store->db()->checkpointer() != nullptr);
  }
  auto experiment = out.store->CreateExperiment(testing::OneVariantStudy("wal", 4), 1.0);
  REQUIRE(experiment.ok());
  out.experiment = *experiment;
  auto runs = out.store->ListRuns(out.experiment);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 4);
  out.first_run = runs->front().id;
  return out;
}

// Streams about 40 MB of pages through the WAL in 150 batches from *step on, calling `between`
// (if any) before every tenth batch.
void Stream(Store* store, int64_t first_run, int64_t* step,
            const std::function<void()>& between = nullptr) {
  for (int batch = 0; batch < 150; ++batch) {
    REQUIRE(store->Ingest("a", Batch(first_run, 4, *step, 500), lifecycle::IngestRules()).ok());
    *step += 500;
    if (between && batch % 10 == 0) {
      between();
    }
  }
}

}  // namespace

TEST_CASE("reads leave no statement busy, and the WAL stays bounded while points stream in") {
  testing::TempDir dir("tae-wal");
  const std::string path = dir.Full("tae.db");
  StudyStore study = OpenStudy(path, /*background=*/false);
  Store* store = study.store.get();
  const int64_t first_run = study.first_run;
  query::Query query(store);
  REQUIRE(store->Ingest("a", Batch(first_run, 4, 1, 100), lifecycle::IngestRules()).ok());

  ReadEverything(&query, study.experiment, first_run);
  INFO("busy: " << (store->db()->BusyStatements().empty() ? "" : store->db()->BusyStatements()[0]));
  CHECK(store->db()->BusyStatements().empty());

  // Points stream in, with the reads between batches, as on taed's core thread: about 40 MB of
  // pages through the WAL, which must restart after each checkpoint (SQLite's default: 1,000
  // pages, 4 MB).
  int64_t step = 101;
  Stream(store, first_run, &step, [&] { ReadEverything(&query, study.experiment, first_run); });
  CHECK(store->db()->BusyStatements().empty());
  const auto wal_bytes = std::filesystem::file_size(path + "-wal");
  const auto db_bytes = std::filesystem::file_size(path);
  INFO("WAL " << wal_bytes << " bytes, database " << db_bytes << " bytes");
  CHECK(db_bytes > 20'000'000);         // checkpoints moved the points into the database
  CHECK(wal_bytes < 12 * 1024 * 1024);  // a few checkpoints' worth, not everything written
}

TEST_CASE("checkpoints on their own thread keep the WAL bounded while points stream in") {
  testing::TempDir dir("tae-wal");
  const std::string path = dir.Full("tae.db");
  StudyStore study = OpenStudy(path, /*background=*/true);
  Store* store = study.store.get();
  const int64_t first_run = study.first_run;
  int64_t step = 1;
  Stream(store, first_run, &step);

  // The checkpointer ran (it is woken at 1,000 pages) and the writer restarted the WAL.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store->db()->checkpointer()->done() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(store->db()->checkpointer()->done() > 0);
  CHECK(store->db()->checkpointer()->failed() == 0);
  const auto wal_bytes = std::filesystem::file_size(path + "-wal");
  INFO("WAL " << wal_bytes << " bytes, database " << std::filesystem::file_size(path) << " bytes");
  CHECK(std::filesystem::file_size(path) > 20'000'000);
  // At most the inline bound plus one batch's pages.
  CHECK(wal_bytes < (Checkpointer::kInlineFrames + 2000) * 4096ull);

  // Every point is there, read through the writer's connection.
  query::Query query(store);
  auto points = query.QueryMetric(first_run, "eval/loss", 0);
  REQUIRE(points.ok());
  CHECK(points->size() == static_cast<size_t>(step - 1));
}

}  // namespace tae::store
