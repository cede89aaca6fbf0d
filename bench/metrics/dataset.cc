#include "bench/metrics/dataset.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/metrics/children.h"
#include "bench/metrics/format.h"
#include "bench/metrics/sql.h"
#include "common/status/macros.h"
#include "server/store/store.h"

namespace tae::bench {
namespace {

constexpr int kEvalEvery = 6;  // steps between eval lines
constexpr const char* kTrainKeys[] = {"train/loss",        "train/lr",     "train/grad_norm",
                                      "perf/tokens_per_s", "perf/step_ms", "perf/peak_rss_mb"};
constexpr const char* kEvalKeys[] = {"eval/loss", "eval/acc", "eval/seq_acc", "eval/ppl"};
// tae-train reports these once, at step 0.
constexpr const char* kModelKeys[] = {"model/params", "model/params_non_embedding",
                                      "model/flops_per_token"};
constexpr char kAgent[] = "bench-agent";

std::string Spec(const std::string& name, int variants, int seeds, int steps) {
  std::vector<int> seed_list;
  for (int i = 0; i < seeds; ++i) {
    seed_list.push_back(i);
  }
  std::string text = absl::StrCat(
      "name = \"", name, "\"\ndescription = \"query benchmark data (bench/metrics_bench.sh)\"\n\n",
      "[train]\ntask = \"copy\"\nsteps = ", steps, "\neval_every = ", kEvalEvery, "\nseeds = [",
      absl::StrJoin(seed_list, ", "), "]\n");
  for (int v = 1; v < variants; ++v) {
    absl::StrAppend(&text, "\n[[ablation]]\nname = \"lr-", v, "\"\n\"train.lr\" = ", 1e-4 * v,
                    "\n");
  }
  return text;
}

std::string Marker(const DatasetOptions& options) {
  return absl::StrCat("v2 big_runs=", options.big_runs, " small=", options.small_experiments,
                      " steps=", options.steps,
                      options.big_variants == 20
                          ? std::string()
                          : absl::StrCat(" variants=", options.big_variants));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status Submit(const std::string& home, const DatasetOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Taed> taed, Taed::Up(home));
  const int big_seeds = std::max(1, options.big_runs / options.big_variants);
  std::vector<std::pair<std::string, std::string>> specs = {
      {"query-big", Spec("query-big", options.big_variants, big_seeds, options.steps)}};
  for (int e = 0; e < options.small_experiments; ++e) {
    std::string name = absl::StrCat("query-small-", e);
    specs.push_back({name, Spec(name, 5, 2, options.steps)});
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string path = absl::StrCat(home, "/", specs[i].first, ".toml");
    std::ofstream(path) << specs[i].second;
    CommandResult submit = taed->Taectl({"submit", path});
    if (submit.exit_code != 0) {
      return absl::InternalError(absl::StrCat("taectl submit ", path, ": ", submit.err,
                                              "the end of taed.log:\n", taed->LogTail()));
    }
    if (i % 10 == 0) {
      std::fprintf(stderr, "  submitted %zu/%zu experiments\n", i + 1, specs.size());
    }
  }
  return taed->Down();
}

struct RunRow {
  int64_t id = 0;
  int64_t variant_index = 0;
  int64_t seed = 0;
  double created_at = 0;
};

// A plausible curve per key: losses fall towards a floor that depends on the variant and seed,
// accuracies rise towards a ceiling, the rest are near-constant.
double Value(const std::string& key, const RunRow& run, int64_t step, int steps) {
  const double progress = static_cast<double>(step) / steps;
  const double floor = 1.0 + 0.02 * static_cast<double>(run.variant_index) +
                       0.005 * static_cast<double>((run.seed * 31) % 7);
  const double loss = floor + 3.0 * std::exp(-5.0 * progress);
  if (key == "train/loss" || key == "eval/loss") {
    return loss;
  }
  if (key == "eval/ppl") {
    return std::exp(loss);
  }
  if (key == "eval/acc" || key == "eval/seq_acc") {
    const double ceiling = 0.9 - 0.01 * static_cast<double>(run.variant_index) -
                           0.004 * static_cast<double>((run.seed * 17) % 5);
    return ceiling * (1 - std::exp(-5 * progress));
  }
  if (key == "model/params" || key == "model/params_non_embedding") {
    return 102528 + 4096 * static_cast<double>(run.variant_index % 3);
  }
  if (key == "model/flops_per_token") {
    return 616000;
  }
  if (key == "train/lr") {
    return 3e-3 * (1 - progress);
  }
  return 100.0 + static_cast<double>((step * 7919) % 97);
}

struct Writer {
  sqlite3_stmt* metric = nullptr;
  sqlite3_stmt* summary = nullptr;
  sqlite3_stmt* experiment_metric = nullptr;
  sqlite3_stmt* finish = nullptr;
  sqlite3_stmt* transition = nullptr;
};

// Points at steps first, first + every, ... up to last, and the summary ingest keeps of them.
absl::Status WriteSeries(SqlFile* db, const Writer& w, const RunRow& run, int64_t key_id,
                         const std::string& key, int64_t first, int every, int64_t last, int steps,
                         int64_t* points) {
  int64_t count = 0;
  double min = 0;
  double max = 0;
  double last_value = 0;
  int64_t last_step = 0;
  for (int64_t step = first; step <= last; step += every) {
    const double value = Value(key, run, step, steps);
    sqlite3_bind_int64(w.metric, 1, run.id);
    sqlite3_bind_int64(w.metric, 2, key_id);
    sqlite3_bind_int64(w.metric, 3, step);
    sqlite3_bind_double(w.metric, 4, value);
    sqlite3_bind_double(w.metric, 5, run.created_at + 0.05 * static_cast<double>(step));
    RETURN_IF_ERROR(db->Run(w.metric));
    min = count == 0 ? value : std::min(min, value);
    max = count == 0 ? value : std::max(max, value);
    last_value = value;
    last_step = step;
    ++count;
  }
  // What ingest's run_summaries upsert leaves after these points (server/store/store_ingest.cc).
  sqlite3_bind_int64(w.summary, 1, run.id);
  sqlite3_bind_int64(w.summary, 2, key_id);
  sqlite3_bind_int64(w.summary, 3, last_step);
  sqlite3_bind_double(w.summary, 4, last_value);
  sqlite3_bind_double(w.summary, 5, min);
  sqlite3_bind_double(w.summary, 6, max);
  sqlite3_bind_int64(w.summary, 7, count);
  RETURN_IF_ERROR(db->Run(w.summary));
  sqlite3_bind_int64(w.experiment_metric, 1, run.id);
  sqlite3_bind_int64(w.experiment_metric, 2, key_id);
  RETURN_IF_ERROR(db->Run(w.experiment_metric));
  *points += count;
  return absl::OkStatus();
}

// A finished run as taed records it: assigned, started, exited 0, one transition each.
absl::Status FinishRun(SqlFile* db, const Writer& w, const RunRow& run, int steps) {
  const double started = run.created_at + 1;
  const double finished = started + 0.05 * steps;
  const int64_t pid = 100000 + run.id;
  sqlite3_bind_int64(w.finish, 1, pid);
  sqlite3_bind_double(w.finish, 2, started);
  sqlite3_bind_double(w.finish, 3, finished);
  sqlite3_bind_int64(w.finish, 4, run.id);
  RETURN_IF_ERROR(db->Run(w.finish));
  const std::string reasons[3][3] = {
      {"queued", "assigned", absl::StrCat("placed on ", kAgent)},
      {"assigned", "running", absl::StrCat("started as pid ", pid, " on ", kAgent)},
      {"running", "succeeded", "exit code 0"}};
  const double at[3] = {run.created_at, started, finished};
  for (int i = 0; i < 3; ++i) {
    sqlite3_bind_int64(w.transition, 1, run.id);
    sqlite3_bind_text(w.transition, 2, reasons[i][0].c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(w.transition, 3, reasons[i][1].c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(w.transition, 4, reasons[i][2].c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(w.transition, 5, at[i]);
    RETURN_IF_ERROR(db->Run(w.transition));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunRow>> LoadRuns(SqlFile* db) {
  ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                   db->Prepare("SELECT id, experiment_id, variant, seed, created_at FROM runs "
                               "ORDER BY id"));
  std::vector<RunRow> runs;
  std::map<int64_t, std::map<std::string, int64_t>> variants;  // per experiment, in order
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    RunRow run;
    run.id = sqlite3_column_int64(stmt, 0);
    auto& seen = variants[sqlite3_column_int64(stmt, 1)];
    std::string variant = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 2));
    run.variant_index = seen.emplace(variant, static_cast<int64_t>(seen.size())).first->second;
    run.seed = sqlite3_column_int64(stmt, 3);
    run.created_at = sqlite3_column_double(stmt, 4);
    runs.push_back(run);
  }
  sqlite3_reset(stmt);
  return runs;
}

absl::StatusOr<int64_t> Fill(const std::string& db_path, const DatasetOptions& options) {
  SqlFile db;
  RETURN_IF_ERROR(db.Open(db_path));
  // Data preparation only: no fsync. (taed itself runs with synchronous = NORMAL.)
  RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF"));
  std::map<std::string, int64_t> key_ids;
  for (const char* key : kTrainKeys) {
    RETURN_IF_ERROR(db.Exec(absl::StrCat("INSERT INTO metric_keys (name) VALUES ('", key, "')")));
    ASSIGN_OR_RETURN(key_ids[key], db.Int("SELECT last_insert_rowid()"));
  }
  for (const char* key : kEvalKeys) {
    RETURN_IF_ERROR(db.Exec(absl::StrCat("INSERT INTO metric_keys (name) VALUES ('", key, "')")));
    ASSIGN_OR_RETURN(key_ids[key], db.Int("SELECT last_insert_rowid()"));
  }
  for (const char* key : kModelKeys) {
    RETURN_IF_ERROR(db.Exec(absl::StrCat("INSERT INTO metric_keys (name) VALUES ('", key, "')")));
    ASSIGN_OR_RETURN(key_ids[key], db.Int("SELECT last_insert_rowid()"));
  }
  ASSIGN_OR_RETURN(std::vector<RunRow> runs, LoadRuns(&db));
  Writer w;
  ASSIGN_OR_RETURN(w.metric, db.Prepare("INSERT INTO metrics (run_id, key_id, step, attempt, "
                                        "value, wall_time) VALUES (?1, ?2, ?3, 1, ?4, ?5)"));
  ASSIGN_OR_RETURN(w.summary,
                   db.Prepare("INSERT INTO run_summaries (run_id, key_id, last_step, last_value, "
                              "min_value, max_value, count) VALUES (?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(w.experiment_metric,
                   db.Prepare("INSERT OR IGNORE INTO experiment_metrics (experiment_id, key_id) "
                              "SELECT experiment_id, ?2 FROM runs WHERE id = ?1"));
  ASSIGN_OR_RETURN(w.finish,
                   db.Prepare(absl::StrCat(
                       "UPDATE runs SET state = 'succeeded', attempt = 1, agent_id = '", kAgent,
                       "', pid = ?1, exit_code = 0, reason = 'exit code 0', "
                       "started_at = ?2, finished_at = ?3 WHERE id = ?4")));
  ASSIGN_OR_RETURN(w.transition,
                   db.Prepare("INSERT INTO run_transitions (run_id, attempt, from_state, "
                              "to_state, reason, at) VALUES (?, 1, ?, ?, ?, ?)"));
  RETURN_IF_ERROR(db.Exec(absl::StrCat(
      "INSERT OR REPLACE INTO agents (id, host, slots, labels, version, state, first_seen, "
      "last_seen) VALUES ('",
      kAgent,
      "', 'bench', 2, '{\"accelerator\":\"cpu\"}', '0.1.0', "
      "'lost', 1.7e9, 1.7e9)")));
  const double start = SteadyNow();
  int64_t points = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    RETURN_IF_ERROR(db.Exec("BEGIN"));
    for (const char* key : kModelKeys) {
      RETURN_IF_ERROR(
          WriteSeries(&db, w, runs[i], key_ids[key], key, 0, 1, 0, options.steps, &points));
    }
    for (const char* key : kTrainKeys) {
      RETURN_IF_ERROR(WriteSeries(&db, w, runs[i], key_ids[key], key, 1, 1, options.steps,
                                  options.steps, &points));
    }
    for (const char* key : kEvalKeys) {
      RETURN_IF_ERROR(WriteSeries(&db, w, runs[i], key_ids[key], key, kEvalEvery, kEvalEvery,
                                  options.steps, options.steps, &points));
    }
    RETURN_IF_ERROR(FinishRun(&db, w, runs[i], options.steps));
    RETURN_IF_ERROR(db.Exec("COMMIT"));
    if ((i + 1) % 100 == 0 || i + 1 == runs.size()) {
      std::fprintf(stderr, "  filled %zu/%zu runs (%s points) in %.1f s\n", i + 1, runs.size(),
                   Thousands(points).c_str(), SteadyNow() - start);
    }
  }
  RETURN_IF_ERROR(db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  return points;
}

// The packed series a store that ingested these runs has (written as each ended), made by what
// taed runs for runs that ended before packs existed (Store::PackSome). Quick when they are
// there already: one look at each run.
absl::Status Pack(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store, store::Store::Open(db_path));
  const double start = SteadyNow();
  bool more = true;
  while (more) {
    ASSIGN_OR_RETURN(more, store->PackSome(2.0));
    std::fprintf(stderr, "  packing the runs' series: %.1f s\n", SteadyNow() - start);
  }
  return store->db()->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

}  // namespace

absl::StatusOr<Dataset> MakeDataset(const std::string& home, const DatasetOptions& options) {
  Dataset dataset;
  dataset.big_experiment = "query-big";
  dataset.small_experiment = absl::StrCat("query-small-", options.small_experiments / 2);
  if (options.small_experiments == 0) {
    dataset.small_experiment = dataset.big_experiment;
  }
  const std::string marker_path = home + "/bench-dataset.txt";
  const std::string db_path = home + "/tae.db";
  if (ReadFile(marker_path) != Marker(options)) {
    std::fprintf(stderr, "query: making the data set in %s\n", home.c_str());
    std::remove(db_path.c_str());
    std::remove((db_path + "-wal").c_str());
    std::remove((db_path + "-shm").c_str());
    RETURN_IF_ERROR(Submit(home, options));
    ASSIGN_OR_RETURN(int64_t points, Fill(db_path, options));
    (void)points;
    std::ofstream(marker_path) << Marker(options);
  } else {
    std::fprintf(stderr, "query: reusing the data set in %s\n", home.c_str());
  }
  RETURN_IF_ERROR(Pack(db_path));
  SqlFile db;
  RETURN_IF_ERROR(db.Open(db_path, /*read_only=*/true));
  ASSIGN_OR_RETURN(dataset.experiments, db.Int("SELECT COUNT(*) FROM experiments"));
  ASSIGN_OR_RETURN(dataset.runs, db.Int("SELECT COUNT(*) FROM runs"));
  ASSIGN_OR_RETURN(dataset.points, db.Int("SELECT SUM(count) FROM run_summaries"));
  return dataset;
}

}  // namespace tae::bench
