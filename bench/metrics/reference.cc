#include "bench/metrics/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/metrics/children.h"
#include "bench/metrics/sim_agent.h"
#include "bench/metrics/sql.h"
#include "common/status/macros.h"
#include "server/lifecycle/lifecycle.h"
#include "server/store/store.h"

namespace tae::bench {
namespace {

// The SQL taed runs per point, copied from server/store/store_ingest.cc (kInsertMetric,
// kUpsertSummary). Keep in step with it.
constexpr char kTaedInsertMetric[] =
    "INSERT INTO metrics (run_id, key_id, step, attempt, value, wall_time) VALUES "
    "(?1,?2,?3,?4,?5,?6) ON CONFLICT DO UPDATE SET attempt = excluded.attempt, value = "
    "excluded.value, wall_time = excluded.wall_time WHERE excluded.attempt > attempt";
constexpr char kTaedUpsertSummary[] =
    "INSERT INTO run_summaries (run_id, key_id, last_step, last_value, min_value, max_value, "
    "count) VALUES (?1,?2,?3,?4,?4,?4,1) ON CONFLICT DO UPDATE SET last_value = CASE WHEN "
    "excluded.last_step >= last_step THEN excluded.last_value ELSE last_value END, last_step = "
    "MAX(last_step, excluded.last_step), min_value = MIN(min_value, excluded.min_value), "
    "max_value = MAX(max_value, excluded.max_value), count = count + 1";
constexpr char kPlainInsertMetric[] =
    "INSERT INTO metrics (run_id, key_id, step, attempt, value, wall_time) VALUES (?,?,?,?,?,?)";

struct Line {
  int run = 0;  // index into the layout's runs
  int64_t step = 0;
};

// Calls batch(lines) for every transaction's worth of lines, in the order the simulated agents
// send them: each agent interleaves its own runs line by line; agents take turns per batch.
void ForEachBatch(const PointLayout& layout,
                  const std::function<void(const std::vector<Line>&)>& batch) {
  const int agents = (layout.runs + layout.runs_per_agent - 1) / layout.runs_per_agent;
  std::vector<int64_t> emitted(static_cast<size_t>(agents), 0);  // lines per agent so far
  std::vector<Line> lines;
  bool any = true;
  while (any) {
    any = false;
    for (int a = 0; a < agents; ++a) {
      const int first = a * layout.runs_per_agent;
      const int count = std::min(layout.runs_per_agent, layout.runs - first);
      const int64_t total = count * layout.steps_per_run;
      lines.clear();
      int64_t& done = emitted[static_cast<size_t>(a)];
      while (done < total && static_cast<int>(lines.size()) < layout.batch_events) {
        lines.push_back({first + static_cast<int>(done % count), done / count + 1});
        ++done;
      }
      if (!lines.empty()) {
        any = true;
        batch(lines);
      }
    }
  }
}

double Value(int64_t step, int key) {  // the simulated agent's values
  return 2.5 * std::exp(-static_cast<double>(step) / 4000.0) + 0.01 * key +
         1e-3 * static_cast<double>((step * 7919 + key) % 97);
}

absl::StatusOr<double> MeasureRaw(const std::string& path, const PointLayout& layout,
                                  bool taed_sql) {
  SqlFile db;
  RETURN_IF_ERROR(db.Open(path));
  // As Store::Open (server/store/store.cc); journal_mode = WAL is also stored in the file.
  RETURN_IF_ERROR(
      db.Exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
              "PRAGMA foreign_keys = ON"));
  // The keys' ids, made or found (a store that already holds them); the runs' ids past every
  // run and every series already stored, as a new study's runs would be.
  std::vector<int64_t> key_ids;
  for (int k = 0; k < layout.values_per_event; ++k) {
    RETURN_IF_ERROR(db.Exec(
        absl::StrCat("INSERT OR IGNORE INTO metric_keys (name) VALUES ('", SimMetricKey(k), "')")));
    ASSIGN_OR_RETURN(int64_t id, db.Int(absl::StrCat("SELECT id FROM metric_keys WHERE name = '",
                                                     SimMetricKey(k), "'")));
    key_ids.push_back(id);
  }
  ASSIGN_OR_RETURN(int64_t last_run, db.Int("SELECT MAX((SELECT COALESCE(MAX(id), 0) FROM runs), "
                                            "(SELECT COALESCE(MAX(run_id), 0) FROM metrics))"));
  ASSIGN_OR_RETURN(sqlite3_stmt * insert,
                   db.Prepare(taed_sql ? kTaedInsertMetric : kPlainInsertMetric));
  ASSIGN_OR_RETURN(sqlite3_stmt * summary, db.Prepare(kTaedUpsertSummary));
  absl::Status status;
  const double wall_time = 1.7e9;
  const double start = SteadyNow();
  ForEachBatch(layout, [&](const std::vector<Line>& lines) {
    if (!status.ok()) {
      return;
    }
    status = db.Exec("BEGIN IMMEDIATE");
    for (const Line& line : lines) {
      for (int k = 0; k < layout.values_per_event && status.ok(); ++k) {
        const double value = Value(line.step, k);
        sqlite3_bind_int64(insert, 1, last_run + line.run + 1);
        sqlite3_bind_int64(insert, 2, key_ids[static_cast<size_t>(k)]);
        sqlite3_bind_int64(insert, 3, line.step);
        sqlite3_bind_int64(insert, 4, 1);
        sqlite3_bind_double(insert, 5, value);
        sqlite3_bind_double(insert, 6, wall_time);
        status = db.Run(insert);
        if (taed_sql && status.ok()) {
          sqlite3_bind_int64(summary, 1, last_run + line.run + 1);
          sqlite3_bind_int64(summary, 2, key_ids[static_cast<size_t>(k)]);
          sqlite3_bind_int64(summary, 3, line.step);
          sqlite3_bind_double(summary, 4, value);
          status = db.Run(summary);
        }
      }
    }
    if (status.ok()) {
      status = db.Exec("COMMIT");
    }
  });
  RETURN_IF_ERROR(status);
  return SteadyNow() - start;
}

absl::StatusOr<double> MeasureStore(const std::string& path, const PointLayout& layout) {
  ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store, store::Store::Open(path));
  model::NewExperiment experiment;
  experiment.name = "reference";
  experiment.spec_hash = "reference";
  for (int r = 0; r < layout.runs; ++r) {
    model::NewRun run;
    run.variant = "baseline";
    run.seed = r;
    run.config_json = "{}";
    run.resources.labels = {{"bench", "ingest"}};
    experiment.runs.push_back(run);
  }
  ASSIGN_OR_RETURN(int64_t experiment_id, store->CreateExperiment(experiment, 1.7e9));
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, store->ListRuns(experiment_id));
  absl::Status status;
  double seconds = 0;
  uint64_t seq = 0;
  std::vector<model::IngestEvent> events;
  ForEachBatch(layout, [&](const std::vector<Line>& lines) {
    if (!status.ok()) {
      return;
    }
    events.clear();  // decoded outside the clock, as taed decodes on a gRPC thread
    for (const Line& line : lines) {
      model::IngestEvent event;
      event.kind = model::IngestEvent::Kind::kMetrics;
      event.seq = ++seq;
      event.run_id = runs[static_cast<size_t>(line.run)].id;
      event.attempt = 1;
      event.wall_time = 1.7e9;
      event.step = line.step;
      for (int k = 0; k < layout.values_per_event; ++k) {
        event.values.push_back({SimMetricKey(k), Value(line.step, k)});
      }
      events.push_back(std::move(event));
    }
    const double start = SteadyNow();
    status = store->Ingest("reference-agent", events, lifecycle::IngestRules()).status();
    seconds += SteadyNow() - start;
  });
  RETURN_IF_ERROR(status);
  return seconds;
}

}  // namespace

const char* ReferenceName(Reference reference) {
  switch (reference) {
    case Reference::kRaw:
      return "raw sqlite (plain INSERT)";
    case Reference::kRawWithTaedSql:
      return "raw sqlite, taed's SQL (upsert + summary)";
    case Reference::kStoreIngest:
      return "Store::Ingest in-process";
  }
  return "?";
}

absl::StatusOr<double> MeasureReference(Reference reference, const std::string& dir,
                                        const PointLayout& layout, const std::string& store) {
  if (!store.empty()) {
    // Into the store as it is: the points go under new run ids, after everything in it.
    return reference == Reference::kStoreIngest
               ? MeasureStore(store, layout)
               : MeasureRaw(store, layout, reference == Reference::kRawWithTaedSql);
  }
  const std::string path = absl::StrCat(dir, "/reference.db");
  auto remove = [&path] {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::remove((path + suffix).c_str());
    }
  };
  remove();  // a fresh file for every measurement
  absl::StatusOr<double> seconds;
  if (reference == Reference::kStoreIngest) {
    seconds = MeasureStore(path, layout);
  } else {
    {
      // The schema exactly as taed makes it: Store::Open applies the embedded migrations.
      ASSIGN_OR_RETURN(std::unique_ptr<store::Store> schema, store::Store::Open(path));
    }
    seconds = MeasureRaw(path, layout, reference == Reference::kRawWithTaedSql);
  }
  remove();
  return seconds;
}

}  // namespace tae::bench
