#include "server/query/query.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "common/status/macros.h"
#include "common/thread/parallel.h"
#include "server/store/rows.h"
#include "server/store/series_pack.h"
#include "spdlog/spdlog.h"

namespace tae::query {
namespace {

using store::CachedStatement;
using store::Statement;

// Statements are cached by address (Db::Cached): those built from column lists are built once.
const std::string& SelectExperimentById() {
  static const std::string sql =
      absl::StrCat("SELECT ", store::rows::kExperimentColumns, " FROM experiments WHERE id = ?");
  return sql;
}

const std::string& SelectNewestExperiments() {
  static const std::string sql = absl::StrCat("SELECT ", store::rows::kExperimentColumns,
                                              " FROM experiments ORDER BY id DESC LIMIT ?");
  return sql;
}

constexpr char kCountsOfExperiment[] =
    "SELECT state, COUNT(*) FROM runs WHERE experiment_id = ? GROUP BY state";
constexpr char kVariantsOfExperiment[] =
    "SELECT variant FROM runs WHERE experiment_id = ? GROUP BY variant ORDER BY MIN(id)";
// The runs of the newest `?` experiments, as ListExperiments lists them, each experiment's in id
// order: one pass over the runs_listing index gives their counts and their variants (in order of
// first run) at once, where two grouped statements sorted 30,000 runs twice.
constexpr char kRunsOfNewest[] =
    "SELECT experiment_id, variant, state FROM runs INDEXED BY runs_listing WHERE experiment_id "
    "IN (SELECT id FROM experiments ORDER BY id DESC LIMIT ?) ORDER BY experiment_id, id";
constexpr char kTransitions[] =
    "SELECT attempt, from_state, to_state, reason, at FROM run_transitions WHERE run_id = ? "
    "ORDER BY id";
constexpr char kRunSummaries[] =
    "SELECT k.name, s.last_step, s.last_value, s.min_value, s.max_value, s.count FROM "
    "run_summaries s JOIN metric_keys k ON k.id = s.key_id WHERE s.run_id = ? ORDER BY k.name";
constexpr char kExperimentSummaries[] =
    "SELECT s.run_id, k.name, s.last_step, s.last_value, s.min_value, s.max_value, s.count FROM "
    "runs r JOIN run_summaries s ON s.run_id = r.id JOIN metric_keys k ON k.id = s.key_id WHERE "
    "r.experiment_id = ? ORDER BY s.run_id, k.name";
// The same for the runs of one page: ids in (?2, ?3].
constexpr char kPageSummaries[] =
    "SELECT s.run_id, k.name, s.last_step, s.last_value, s.min_value, s.max_value, s.count FROM "
    "runs r JOIN run_summaries s ON s.run_id = r.id JOIN metric_keys k ON k.id = s.key_id WHERE "
    "r.experiment_id = ?1 AND r.id > ?2 AND r.id <= ?3 ORDER BY s.run_id, k.name";
// One key's summary of each of the experiment's runs that has it, in run id order.
constexpr char kKeySummaries[] =
    "SELECT s.run_id, k.name, s.last_step, s.last_value, s.min_value, s.max_value, s.count FROM "
    "metric_keys k JOIN runs r INDEXED BY runs_listing JOIN run_summaries s INDEXED BY "
    "run_summaries_by_key ON s.run_id = r.id AND s.key_id = k.id WHERE k.name = ?2 AND "
    "r.experiment_id = ?1 ORDER BY r.id";
constexpr char kRunCount[] = "SELECT COUNT(*) FROM runs WHERE experiment_id = ?";
constexpr char kMetricNames[] =
    "SELECT k.name FROM experiment_metrics e JOIN metric_keys k ON k.id = e.key_id WHERE "
    "e.experiment_id = ? ORDER BY k.name";
constexpr char kLogs[] =
    "SELECT id, attempt, stream, line, wall_time FROM logs WHERE run_id = ? AND id > ? ORDER BY "
    "id LIMIT ?";
constexpr char kLogsBefore[] =
    "SELECT id, attempt, stream, line, wall_time FROM logs WHERE run_id = ? AND id < ? ORDER BY "
    "id DESC LIMIT ?";
// The agent's warnings about a run (an unmatched [job.metrics] pattern, a corrupt event file),
// newest last, at most 20.
constexpr char kRunWarnings[] =
    "SELECT line FROM (SELECT id, line FROM logs WHERE run_id = ? AND stream = 'agent' AND "
    "line LIKE 'warning: %' ORDER BY id DESC LIMIT 20) ORDER BY id";
constexpr char kMetricRange[] =
    "SELECT MIN(m.step), MAX(m.step), COUNT(*) FROM metrics m JOIN metric_keys k ON k.id = "
    "m.key_id WHERE m.run_id = ? AND k.name = ?";
// Bucket b holds the steps with (step - first) * max_points / (last - first + 1) == b.
constexpr char kMetricBuckets[] =
    "SELECT MAX(m.step), AVG(m.value), MIN(m.value), MAX(m.value), MAX(m.wall_time), COUNT(*) "
    "FROM metrics m JOIN metric_keys k ON k.id = m.key_id WHERE m.run_id = ? AND k.name = ? "
    "GROUP BY (m.step - ?) * ? / ? ORDER BY 1";

// The rows of the experiment's runs whose series of the key has no pack (store/series_pack.h).
constexpr char kExperimentSeries[] =
    "SELECT m.run_id, m.step, m.value, m.wall_time FROM runs r JOIN metrics m ON m.run_id = r.id "
    "AND m.key_id = (SELECT id FROM metric_keys WHERE name = ?1) WHERE r.experiment_id = ?2 AND "
    "NOT EXISTS (SELECT 1 FROM metric_packs p WHERE p.run_id = r.id AND p.key_id = (SELECT id "
    "FROM metric_keys WHERE name = ?1)) ORDER BY r.id, m.step";  // index and key order: no sort
// Packs are checked in parts of this many, on more than one thread past this many bytes.
constexpr size_t kPacksPerPart = 256;
constexpr int64_t kPackBytesPerThread = 4 << 20;
constexpr char kExperimentPacks[] =
    "SELECT p.run_id, p.data FROM runs r JOIN metric_packs p ON p.run_id = r.id AND p.key_id = "
    "(SELECT id FROM metric_keys WHERE name = ?1) WHERE r.experiment_id = ?2";
constexpr char kExperimentVersion[] =
    "SELECT COUNT(*), COALESCE(SUM(r.attempt), 0), COALESCE(SUM(r.last_state_code), 0), "
    "COALESCE((SELECT SUM(s.count) FROM run_summaries s JOIN runs q ON q.id = s.run_id WHERE "
    "q.experiment_id = ?1), 0) FROM (SELECT attempt, (id % 9973) * (CASE state WHEN 'queued' THEN "
    "1 WHEN 'assigned' THEN 2 WHEN 'running' THEN 3 WHEN 'succeeded' THEN 4 WHEN 'failed' THEN 5 "
    "WHEN 'cancelled' THEN 6 WHEN 'lost' THEN 7 ELSE 8 END) AS last_state_code FROM runs WHERE "
    "experiment_id = ?1) r";
constexpr char kMetricPointsAfter[] =
    "SELECT m.step, m.value, m.wall_time FROM metrics m WHERE m.run_id = ? AND m.key_id = (SELECT "
    "id FROM metric_keys WHERE name = ?) AND m.step > ? ORDER BY m.step";
constexpr char kSearchLogsSlice[] =
    "SELECT id, instr(lower(line), lower(?2)) > 0 FROM logs WHERE run_id = ?1 AND id > ?3 ORDER "
    "BY id LIMIT ?4";
constexpr char kSearchLogs[] =
    "SELECT id FROM logs WHERE run_id = ? AND instr(lower(line), lower(?)) > 0 ORDER BY id LIMIT ?";

// A row of kLogs or kLogsBefore.
model::LogRecord ReadLogLine(const Statement& stmt) {
  return {stmt.Int(0), static_cast<int>(stmt.Int(1)), stmt.Text(2), stmt.Text(3), stmt.Double(4)};
}

model::RunState StateOf(const std::string& text) {
  return model::RunStateFromString(text).value_or(model::RunState::kFailed);
}

model::MetricSummary ReadSummary(const Statement& stmt, int first) {
  return {stmt.Text(first),       stmt.Int(first + 1),    stmt.Double(first + 2),
          stmt.Double(first + 3), stmt.Double(first + 4), stmt.Int(first + 5)};
}

// Adds each summary row of `stmt` (run_id, then a summary as ReadSummary reads it) to its run's
// view; both in run id order, so one merge.
absl::Status AddSummaries(Statement* stmt, std::vector<RunView>* views) {
  size_t next = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      return absl::OkStatus();
    }
    const int64_t run_id = stmt->Int(0);
    while (next < views->size() && (*views)[next].run.id < run_id) {
      ++next;
    }
    if (next < views->size() && (*views)[next].run.id == run_id) {
      (*views)[next].summaries.push_back(ReadSummary(*stmt, 1));
    }
  }
}

}  // namespace

Query::Query(store::Store* store) : store_(store), db_(store->db()) {}

absl::StatusOr<int64_t> Query::ResolveExperiment(const std::string& ref) {
  TAE_CHECK_OWNER(core_);
  return store_->ResolveExperiment(ref);
}

absl::StatusOr<model::ExperimentRecord> Query::GetExperiment(int64_t id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(SelectExperimentById().c_str()));
  stmt->Bind(1, id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("no experiment e", id));
  }
  model::ExperimentRecord exp = store::rows::ReadExperiment(*stmt);
  ASSIGN_OR_RETURN(CachedStatement counts, db_->Cached(kCountsOfExperiment));
  counts->Bind(1, id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, counts->Step());
    if (!more) {
      break;
    }
    store::rows::AddToCounts(StateOf(counts->Text(0)), static_cast<int>(counts->Int(1)),
                             &exp.counts);
  }
  ASSIGN_OR_RETURN(CachedStatement variants, db_->Cached(kVariantsOfExperiment));
  variants->Bind(1, id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, variants->Step());
    if (!more) {
      break;
    }
    exp.variants.push_back(variants->Text(0));
  }
  return exp;
}

absl::StatusOr<std::vector<model::ExperimentRecord>> Query::ListExperiments(int limit) {
  TAE_CHECK_OWNER(core_);
  // Three statements whatever the number of experiments and runs: the rows, then the run counts
  // and the variants of all of them, grouped.
  const int64_t bound = limit > 0 ? limit : -1;
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(SelectNewestExperiments().c_str()));
  stmt->Bind(1, bound);
  std::vector<model::ExperimentRecord> out;
  std::map<int64_t, size_t> index;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    model::ExperimentRecord exp = store::rows::ReadExperiment(*stmt);
    index[exp.id] = out.size();
    out.push_back(std::move(exp));
  }
  if (out.empty()) {
    return out;
  }
  ASSIGN_OR_RETURN(CachedStatement runs, db_->Cached(kRunsOfNewest));
  runs->Bind(1, bound);
  model::ExperimentRecord* exp = nullptr;
  int64_t exp_id = 0;
  absl::flat_hash_set<std::string> seen;  // the current experiment's variants so far
  while (true) {
    ASSIGN_OR_RETURN(bool more, runs->Step());
    if (!more) {
      break;
    }
    if (exp == nullptr || runs->Int(0) != exp_id) {
      exp_id = runs->Int(0);
      exp = &out[index.at(exp_id)];
      seen.clear();
    }
    store::rows::AddToCounts(StateOf(runs->Text(2)), 1, &exp->counts);
    std::string variant = runs->Text(1);
    if (seen.insert(variant).second) {
      exp->variants.push_back(std::move(variant));
    }
  }
  return out;
}

absl::StatusOr<std::vector<RunView>> Query::ListRuns(const std::string& experiment) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(experiment));
  // A constant number of statements however many runs: the runs, then all their summaries.
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, store_->ListRuns(id));
  ASSIGN_OR_RETURN(auto summaries, ExperimentSummaries(id));
  std::vector<RunView> out;
  out.reserve(runs.size());
  for (model::RunRecord& run : runs) {
    RunView view{std::move(run), {}};
    if (auto it = summaries.find(view.run.id); it != summaries.end()) {
      view.summaries = std::move(it->second);
    }
    out.push_back(std::move(view));
  }
  return out;
}

absl::StatusOr<RunsPage> Query::ListRunsPage(const std::string& experiment, int64_t after_id,
                                             int64_t limit) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(experiment));
  RunsPage page;
  ASSIGN_OR_RETURN(CachedStatement count, db_->Cached(kRunCount));
  count->Bind(1, id);
  ASSIGN_OR_RETURN(bool counted, count->Step());
  page.total = counted ? count->Int(0) : 0;
  count->Reset();
  static const std::string sql =
      absl::StrCat("SELECT ", store::rows::kRunColumns,
                   " FROM runs WHERE experiment_id = ? AND id > ? ORDER BY id LIMIT ?");
  ASSIGN_OR_RETURN(CachedStatement runs, db_->Cached(sql.c_str()));
  // One more than asked for says whether another page follows.
  runs->Bind(1, id).Bind(2, after_id).Bind(3, limit > 0 ? limit + 1 : int64_t{-1});
  while (true) {
    ASSIGN_OR_RETURN(bool more, runs->Step());
    if (!more) {
      break;
    }
    page.runs.push_back({store::rows::ReadRun(*runs), {}});
  }
  runs->Reset();
  if (limit > 0 && static_cast<int64_t>(page.runs.size()) > limit) {
    page.runs.pop_back();
    page.next_after = page.runs.back().run.id;
  }
  if (page.runs.empty()) {
    return page;
  }
  ASSIGN_OR_RETURN(CachedStatement summaries, db_->Cached(kPageSummaries));
  summaries->Bind(1, id).Bind(2, after_id).Bind(3, page.runs.back().run.id);
  RETURN_IF_ERROR(AddSummaries(&*summaries, &page.runs));
  return page;
}

absl::StatusOr<std::vector<RunView>> Query::CurveRuns(int64_t experiment_id,
                                                      const std::string& key) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, store_->ListRunsBrief(experiment_id));
  std::vector<RunView> out;
  out.reserve(runs.size());
  for (model::RunRecord& run : runs) {
    out.push_back({std::move(run), {}});
  }
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kKeySummaries));
  stmt->Bind(1, experiment_id).Bind(2, key);
  RETURN_IF_ERROR(AddSummaries(&*stmt, &out));
  return out;
}

absl::StatusOr<RunDetail> Query::GetRun(int64_t run_id) {
  TAE_CHECK_OWNER(core_);
  RunDetail detail;
  ASSIGN_OR_RETURN(detail.view.run, store_->GetRun(run_id));
  ASSIGN_OR_RETURN(detail.view.summaries, Summaries(run_id));
  ASSIGN_OR_RETURN(detail.transitions, ListTransitions(run_id));
  ASSIGN_OR_RETURN(CachedStatement warnings, db_->Cached(kRunWarnings));
  warnings->Bind(1, run_id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, warnings->Step());
    if (!more) {
      break;
    }
    detail.warnings.push_back(warnings->Text(0).substr(std::string_view("warning: ").size()));
  }
  if (!detail.view.run.command.empty()) {
    // The template, from the experiment's spec as submitted (its runs hold it expanded).
    absl::StatusOr<model::ExperimentSource> source =
        store_->GetExperimentSource(detail.view.run.experiment_id);
    absl::StatusOr<spec::Spec> spec =
        source.ok() ? spec::ParseSpec(source->spec_text, source->spec_path, source->overrides)
                    : absl::StatusOr<spec::Spec>(source.status());
    absl::StatusOr<std::vector<std::string>> keys =
        spec.ok() ? spec::CommandPlaceholders(spec->job_command)
                  : absl::StatusOr<std::vector<std::string>>(spec.status());
    if (keys.ok()) {
      detail.command_keys = *std::move(keys);
    }
  }
  return detail;
}

absl::StatusOr<std::vector<model::RunRecord>> Query::Queue() {
  TAE_CHECK_OWNER(core_);
  return store_->QueuedRuns();
}

absl::StatusOr<LogPage> Query::Logs(int64_t run_id, int64_t after, int limit) {
  TAE_CHECK_OWNER(core_);
  if (limit < 1 || limit > kMaxLogLines) {
    return absl::InvalidArgumentError(absl::StrCat("limit: must be 1..", kMaxLogLines));
  }
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kLogs));
  stmt->Bind(1, run_id).Bind(2, after).Bind(3, static_cast<int64_t>(limit));
  LogPage page;
  page.next = after;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    page.lines.push_back(ReadLogLine(*stmt));
    page.next = page.lines.back().cursor;
  }
  // Final only once every line has been read: a final run's lines are all stored already.
  page.run_finished = model::IsFinal(run.state) && static_cast<int>(page.lines.size()) < limit;
  return page;
}

absl::StatusOr<LogPage> Query::LogsBefore(int64_t run_id, int64_t before, int limit) {
  TAE_CHECK_OWNER(core_);
  if (limit < 1 || limit > kMaxLogLines) {
    return absl::InvalidArgumentError(absl::StrCat("limit: must be 1..", kMaxLogLines));
  }
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kLogsBefore));
  stmt->Bind(1, run_id)
      .Bind(2, before > 0 ? before : std::numeric_limits<int64_t>::max())
      .Bind(3, static_cast<int64_t>(limit));
  LogPage page;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    page.lines.push_back(ReadLogLine(*stmt));
  }
  std::reverse(page.lines.begin(), page.lines.end());
  page.next = page.lines.empty() ? 0 : page.lines.back().cursor;
  page.run_finished = before <= 0 && model::IsFinal(run.state);
  return page;
}

absl::StatusOr<std::vector<MetricSeries>> Query::Metrics(const MetricsRequest& request) {
  TAE_CHECK_OWNER(core_);
  if (request.max_points < 0) {
    return absl::InvalidArgumentError("max_points: must be >= 0 (0: every point)");
  }
  if (request.experiment.empty() == request.run_ids.empty()) {
    return absl::InvalidArgumentError("experiment or run_ids: give exactly one of the two");
  }
  std::vector<model::RunRecord> runs;
  if (!request.experiment.empty()) {
    ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(request.experiment));
    ASSIGN_OR_RETURN(runs, store_->ListRuns(id));
  } else {
    for (int64_t run_id : request.run_ids) {
      ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
      runs.push_back(std::move(run));
    }
  }
  std::vector<MetricSeries> out;
  for (const model::RunRecord& run : runs) {
    std::vector<std::string> keys = request.keys;
    if (keys.empty()) {
      ASSIGN_OR_RETURN(std::vector<model::MetricSummary> summaries, Summaries(run.id));
      for (const model::MetricSummary& summary : summaries) {
        keys.push_back(summary.key);
      }
    }
    for (const std::string& key : keys) {
      ASSIGN_OR_RETURN(std::vector<model::MetricPoint> points,
                       QueryMetric(run.id, key, request.max_points));
      if (!points.empty()) {
        out.push_back({run, key, std::move(points)});
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<SnapshotView>> Query::Snapshots() {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(std::vector<model::SnapshotRecord> snapshots, store_->ListSnapshots());
  ASSIGN_OR_RETURN(auto usages, store_->SnapshotUsages());
  std::vector<SnapshotView> out;
  out.reserve(snapshots.size());
  for (model::SnapshotRecord& snapshot : snapshots) {
    const model::SnapshotUsage usage = usages[snapshot.id];
    out.push_back({std::move(snapshot), usage});
  }
  return out;
}

absl::StatusOr<SnapshotView> Query::Snapshot(const std::string& id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(model::SnapshotRecord snapshot, store_->GetSnapshot(id));
  ASSIGN_OR_RETURN(auto usages, store_->SnapshotUsages());
  const model::SnapshotUsage usage = usages[id];
  return SnapshotView{std::move(snapshot), usage};
}

absl::StatusOr<std::string> Query::Manifest(const std::string& id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(model::SnapshotRecord snapshot, store_->GetSnapshot(id));
  return std::move(snapshot.manifest);
}

absl::StatusOr<std::vector<model::TransitionRecord>> Query::ListTransitions(int64_t run_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kTransitions));
  stmt->Bind(1, run_id);
  std::vector<model::TransitionRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out.push_back({static_cast<int>(stmt->Int(0)), stmt->Text(1), stmt->Text(2), stmt->Text(3),
                   stmt->Double(4)});
  }
  return out;
}

absl::StatusOr<std::vector<model::MetricSummary>> Query::Summaries(int64_t run_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kRunSummaries));
  stmt->Bind(1, run_id);
  std::vector<model::MetricSummary> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out.push_back(ReadSummary(*stmt, 0));
  }
  return out;
}

absl::StatusOr<std::map<int64_t, std::vector<model::MetricSummary>>> Query::ExperimentSummaries(
    int64_t experiment_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kExperimentSummaries));
  stmt->Bind(1, experiment_id);
  std::map<int64_t, std::vector<model::MetricSummary>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out[stmt->Int(0)].push_back(ReadSummary(*stmt, 1));
  }
  return out;
}

absl::StatusOr<std::vector<model::FinalValue>> Query::FinalValues(
    int64_t experiment_id, const std::vector<std::string>& keys) {
  return store_->FinalValues(experiment_id, keys);
}

absl::StatusOr<std::vector<std::string>> Query::MetricNames(int64_t experiment_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kMetricNames));
  stmt->Bind(1, experiment_id);
  std::vector<std::string> names;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    names.push_back(stmt->Text(0));
  }
  return names;
}

absl::StatusOr<std::vector<model::MetricPoint>> Query::QueryMetric(int64_t run_id,
                                                                   const std::string& key,
                                                                   int64_t max_points) {
  std::vector<model::MetricPoint> out;
  ASSIGN_OR_RETURN(CachedStatement range, db_->Cached(kMetricRange));
  range->Bind(1, run_id).Bind(2, key);
  ASSIGN_OR_RETURN(bool has_row, range->Step());
  const int64_t count = has_row ? range->Int(2) : 0;
  if (count == 0) {
    return out;
  }
  const int64_t first = range->Int(0);
  const int64_t last = range->Int(1);
  range->Reset();
  if (max_points <= 0 || count <= max_points) {
    ASSIGN_OR_RETURN(std::vector<model::SeriesPoint> raw,
                     QueryMetricAfter(run_id, key, std::numeric_limits<int64_t>::min()));
    out.reserve(raw.size());
    for (const model::SeriesPoint& p : raw) {
      out.push_back({p.step, p.value, p.value, p.value, p.wall_time, 1});
    }
    return out;
  }
  ASSIGN_OR_RETURN(CachedStatement buckets, db_->Cached(kMetricBuckets));
  buckets->Bind(1, run_id)
      .Bind(2, key)
      .Bind(3, first)
      .Bind(4, max_points)
      .Bind(5, last - first + 1);
  while (true) {
    ASSIGN_OR_RETURN(bool more, buckets->Step());
    if (!more) {
      break;
    }
    out.push_back({buckets->Int(0), buckets->Double(1), buckets->Double(2), buckets->Double(3),
                   buckets->Double(4), buckets->Int(5)});
  }
  return out;
}

absl::StatusOr<std::pair<std::vector<model::CheckpointRecord>, int>> Query::Checkpoints(
    int64_t run_id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  ASSIGN_OR_RETURN(std::vector<model::CheckpointRecord> list, store_->ListCheckpoints(run_id));
  return std::make_pair(std::move(list), run.keep_checkpoints);
}

absl::StatusOr<model::CheckpointRecord> Query::Checkpoint(int64_t run_id,
                                                          std::optional<int64_t> step) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(auto listed, Checkpoints(run_id));
  const std::vector<model::CheckpointRecord>& list = listed.first;
  if (list.empty()) {
    return absl::NotFoundError(absl::StrCat("run_id: r", run_id, " has no checkpoints"));
  }
  int64_t id = list.front().id;
  if (step.has_value()) {
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const model::CheckpointRecord& c) { return c.step == *step; });
    if (it == list.end()) {
      std::vector<std::string> steps;
      for (const model::CheckpointRecord& c : list) {
        steps.push_back(absl::StrCat(c.step));
      }
      return absl::NotFoundError(absl::StrCat("step: r", run_id, " has no checkpoint at step ",
                                              *step, "; it has steps ",
                                              absl::StrJoin(steps, ", ")));
    }
    id = it->id;
  }
  ASSIGN_OR_RETURN(std::optional<model::CheckpointRecord> latest, store_->GetCheckpoint(id));
  if (!latest.has_value()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", id, " is gone"));
  }
  return *std::move(latest);
}

absl::StatusOr<std::vector<model::CheckpointRecord>> Query::Artifacts(int64_t run_id) {
  TAE_CHECK_OWNER(core_);
  if (run_id != 0) {
    RETURN_IF_ERROR(store_->GetRun(run_id).status());
  }
  return store_->ListCheckpoints(run_id, /*artifacts=*/true);
}

absl::StatusOr<model::CheckpointRecord> Query::Artifact(int64_t run_id, const std::string& name) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(std::optional<model::CheckpointRecord> found,
                   store_->FindArtifact(run_id, name));
  if (found.has_value()) {
    return *std::move(found);
  }
  ASSIGN_OR_RETURN(std::vector<model::CheckpointRecord> list, Artifacts(run_id));
  std::vector<std::string> names;
  for (const model::CheckpointRecord& a : list) {
    names.push_back(a.artifact);
  }
  return absl::NotFoundError(
      absl::StrCat("artifact: r", run_id, " has no artifact '", name, "'",
                   names.empty() ? std::string("; it has none")
                                 : absl::StrCat("; it has ", absl::StrJoin(names, ", "))));
}

absl::StatusOr<std::map<int64_t, StoredSeries>> Query::ExperimentSeries(
    int64_t experiment_id, const std::string& key, const std::map<int64_t, int64_t>& expected) {
  TAE_CHECK_OWNER(core_);
  std::map<int64_t, StoredSeries> out;
  auto reserve = [&](int64_t run_id, std::vector<model::SeriesPoint>* points) {
    if (auto size = expected.find(run_id); size != expected.end() && size->second > 0) {
      points->reserve(static_cast<size_t>(size->second));  // one allocation per run
    }
  };
  // An ended experiment's column file (store/column_file.h: every run's pack, in order), else
  // the ended runs' packs (store/series_pack.h), then the rows of the runs without one.
  std::vector<int64_t> damaged;
  std::vector<std::pair<int64_t, StoredSeries*>> unchecked;
  int64_t bytes = 0;
  // The file's bytes are its runs' packs: each series a view into them, none copied.
  auto column = std::make_shared<std::string>();
  std::vector<std::pair<int64_t, std::string_view>> column_packs;
  ASSIGN_OR_RETURN(bool from_column,
                   store_->ReadColumn(experiment_id, key, column.get(), &column_packs));
  for (const auto& [run_id, pack] : column_packs) {
    StoredSeries& series = out[run_id];
    series.pack = pack;
    series.pack_bytes = column;
    bytes += static_cast<int64_t>(pack.size());
    unchecked.emplace_back(run_id, &series);
  }
  column_packs.clear();
  if (!from_column) {
    ASSIGN_OR_RETURN(CachedStatement packs, db_->Cached(kExperimentPacks));
    packs->Bind(1, key).Bind(2, experiment_id);
    while (true) {
      ASSIGN_OR_RETURN(bool more, packs->Step());
      if (!more) {
        break;
      }
      const int64_t run_id = packs->Int(0);
      StoredSeries& series = out[run_id];
      auto blob = std::make_shared<const std::string>(packs->Blob(1));
      series.pack = *blob;
      series.pack_bytes = std::move(blob);
      bytes += static_cast<int64_t>(series.pack.size());
      unchecked.emplace_back(run_id, &series);
    }
  }
  // Checked once copied, on a few threads where there are megabytes of them (a pure pass over
  // bytes nothing else touches meanwhile: common/thread/parallel.h).
  std::vector<absl::Status> checks(unchecked.size());
  const int parts = static_cast<int>((unchecked.size() + kPacksPerPart - 1) / kPacksPerPart);
  thread::ParallelFor(parts, bytes >= kPackBytesPerThread ? thread::UsefulThreads(4) : 1,
                      [&](int part) {
                        const size_t end = std::min(unchecked.size(), (part + 1) * kPacksPerPart);
                        for (size_t i = part * kPacksPerPart; i < end; ++i) {
                          StoredSeries& series = *unchecked[i].second;
                          absl::StatusOr<store::PackInfo> info = store::CheckPack(series.pack);
                          if (info.ok()) {
                            series.packed = *info;
                          } else {
                            checks[i] = info.status();
                          }
                        }
                      });
  for (size_t i = 0; i < unchecked.size(); ++i) {
    if (!checks[i].ok()) {
      const int64_t run_id = unchecked[i].first;
      spdlog::warn("run r{}, {}: {}; reading its rows", run_id, key,
                   std::string(checks[i].message()));
      damaged.push_back(run_id);
      out.erase(run_id);
    }
  }
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kExperimentSeries));
  stmt->Bind(1, key).Bind(2, experiment_id);
  std::vector<model::SeriesPoint>* current = nullptr;
  int64_t current_id = -1;
  // A column holds every series of the key its ended experiment has: no rows to look for.
  while (!from_column) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    const int64_t run_id = stmt->Int(0);
    if (run_id != current_id) {
      current = &out[run_id].points;
      current_id = run_id;
      reserve(run_id, current);
    }
    current->push_back({stmt->Int(1), stmt->Double(2), stmt->Double(3)});
  }
  for (int64_t run_id : damaged) {
    ASSIGN_OR_RETURN(std::vector<model::SeriesPoint> points, QueryMetricAfter(run_id, key, -1));
    if (!points.empty()) {
      out[run_id].points = std::move(points);
    }
  }
  return out;
}

absl::StatusOr<std::vector<model::SeriesPoint>> Query::QueryMetricAfter(int64_t run_id,
                                                                        const std::string& key,
                                                                        int64_t after_step) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kMetricPointsAfter));
  stmt->Bind(1, run_id).Bind(2, key).Bind(3, after_step);
  std::vector<model::SeriesPoint> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out.push_back({stmt->Int(0), stmt->Double(1), stmt->Double(2)});
  }
  return out;
}

int64_t Query::DataVersion() {
  TAE_CHECK_OWNER(core_);
  return db_->total_changes();
}

absl::StatusOr<std::string> Query::ExperimentVersion(int64_t experiment_id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kExperimentVersion));
  stmt->Bind(1, experiment_id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row) {
    return std::string();
  }
  std::string version =
      absl::StrCat(stmt->Int(0), ":", stmt->Int(1), ":", stmt->Int(2), ":", stmt->Int(3));
  return version;
}

absl::StatusOr<std::vector<int64_t>> Query::SearchLogs(int64_t run_id, const std::string& text,
                                                       int limit) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kSearchLogs));
  stmt->Bind(1, run_id).Bind(2, text).Bind(3, int64_t{limit});
  std::vector<int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    out.push_back(stmt->Int(0));
  }
  return out;
}

absl::StatusOr<Query::SearchSlice> Query::SearchLogsSlice(int64_t run_id, const std::string& text,
                                                          int64_t after, int scan) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(CachedStatement stmt, db_->Cached(kSearchLogsSlice));
  stmt->Bind(1, run_id).Bind(2, text).Bind(3, after).Bind(4, int64_t{scan});
  SearchSlice out;
  out.last = after;
  int rows = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    ++rows;
    out.last = stmt->Int(0);
    if (stmt->Int(1) != 0) {
      out.matches.push_back(out.last);
    }
  }
  out.end = rows < scan;
  return out;
}

}  // namespace tae::query
