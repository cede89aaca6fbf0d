// Store: ingest of agent events (metrics, logs, exits, meta) in batched transactions.

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"
#include "server/store/store.h"

namespace tae::store {
namespace {

// A run keeps at most this many metadata keys; further new keys are dropped (known keys still
// update), so a job that writes a new key per line cannot grow its run row without bound.
constexpr size_t kMaxRunMetaKeys = 256;

constexpr char kInsertMetricKey[] =
    "INSERT INTO metric_keys (name) VALUES (?) ON CONFLICT(name) DO UPDATE SET name = "
    "excluded.name RETURNING id";
constexpr char kInsertMetric[] =
    "INSERT INTO metrics (run_id, key_id, step, attempt, value, wall_time) VALUES "
    "(?1,?2,?3,?4,?5,?6) ON CONFLICT DO UPDATE SET attempt = excluded.attempt, value = "
    "excluded.value, wall_time = excluded.wall_time WHERE excluded.attempt > attempt";
// One batch's points of one (run, key) at once: count adds, min/max fold, the last value is the
// one at the highest step.
constexpr char kUpsertSummary[] =
    "INSERT INTO run_summaries (run_id, key_id, last_step, last_value, min_value, max_value, "
    "count) VALUES (?1,?2,?3,?4,?5,?6,?7) ON CONFLICT DO UPDATE SET last_value = CASE WHEN "
    "excluded.last_step >= last_step THEN excluded.last_value ELSE last_value END, last_step = "
    "MAX(last_step, excluded.last_step), min_value = MIN(min_value, excluded.min_value), "
    "max_value = MAX(max_value, excluded.max_value), count = count + excluded.count";
// The experiment's list of reported metrics (migration 0018), once per (run, key) of a batch.
constexpr char kNoteExperimentMetric[] =
    "INSERT OR IGNORE INTO experiment_metrics (experiment_id, key_id) SELECT experiment_id, ?2 "
    "FROM runs WHERE id = ?1";
// The earliest non-finite report of a (run, key) stays (migration 0015).
constexpr char kInsertDivergence[] =
    "INSERT INTO metric_divergence (run_id, key_id, step, value, attempt, wall_time) VALUES "
    "(?1,?2,?3,?4,?5,?6) ON CONFLICT DO UPDATE SET step = excluded.step, value = excluded.value, "
    "attempt = excluded.attempt, wall_time = excluded.wall_time WHERE excluded.step < step";
constexpr char kDropPack[] = "DELETE FROM metric_packs WHERE run_id = ?1 AND key_id = ?2";
constexpr char kRunExists[] = "SELECT 1 FROM runs WHERE id = ?";
constexpr char kInsertLog[] =
    "INSERT OR IGNORE INTO logs (run_id, attempt, seq, agent_id, stream, line, wall_time) "
    "VALUES (?,?,?,?,?,?,?)";
constexpr char kUpdateMeta[] = "UPDATE runs SET meta = ? WHERE id = ?";

}  // namespace

absl::StatusOr<int64_t> Store::MetricKeyId(const std::string& name) {
  if (auto it = metric_key_ids_.find(name); it != metric_key_ids_.end()) {
    return it->second;
  }
  ASSIGN_OR_RETURN(CachedStatement insert, db_.Cached(kInsertMetricKey));
  insert->Bind(1, name);
  ASSIGN_OR_RETURN(bool row, insert->Step());
  if (!row) {
    return absl::InternalError("metric key insert returned no id");
  }
  int64_t id = insert->Int(0);
  metric_key_ids_[name] = id;
  return id;
}

absl::Status Store::IngestMetrics(const model::IngestEvent& event, IngestBatch* batch) {
  for (const model::MetricValue& value : event.values) {
    ASSIGN_OR_RETURN(int64_t key_id, MetricKeyId(value.key));
    if (!std::isfinite(value.value)) {
      ASSIGN_OR_RETURN(CachedStatement diverged, db_.Cached(kInsertDivergence));
      diverged->Bind(1, event.run_id)
          .Bind(2, key_id)
          .Bind(3, event.step)
          .Bind(4, model::NonFiniteText(value.value))
          .Bind(5, static_cast<int64_t>(event.attempt))
          .Bind(6, event.wall_time);
      RETURN_IF_ERROR(diverged->Run());
      continue;
    }
    batch->points.push_back({event.run_id, key_id, event.step, static_cast<int64_t>(event.attempt),
                             value.value, event.wall_time});
  }
  return absl::OkStatus();
}

absl::Status Store::FlushPoints(IngestBatch* batch) {
  if (batch->points.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(CachedStatement insert, db_.Cached(kInsertMetric));
  // Stable: two points of one (run, key, step) keep their order, so the later one decides as
  // it would have unsorted.
  std::stable_sort(batch->points.begin(), batch->points.end(),
                   [](const IngestBatch::Point& a, const IngestBatch::Point& b) {
                     return std::tie(a.run_id, a.key_id, a.step) <
                            std::tie(b.run_id, b.key_id, b.step);
                   });
  for (const IngestBatch::Point& point : batch->points) {
    insert->Bind(1, point.run_id)
        .Bind(2, point.key_id)
        .Bind(3, point.step)
        .Bind(4, point.attempt)
        .Bind(5, point.value)
        .Bind(6, point.wall_time);
    RETURN_IF_ERROR(insert->Run());
    if (db_.Changes() == 0) {
      continue;  // a resend of a point already stored
    }
    auto [it, inserted] = batch->summaries.try_emplace({point.run_id, point.key_id});
    PendingSummary& pending = it->second;
    if (inserted || point.step >= pending.last_step) {
      pending.last_step = point.step;
      pending.last_value = point.value;
    }
    pending.min = inserted ? point.value : std::min(pending.min, point.value);
    pending.max = inserted ? point.value : std::max(pending.max, point.value);
    pending.count += 1;
  }
  batch->points.clear();
  return absl::OkStatus();
}

absl::Status Store::WriteSummaries(const IngestBatch& batch) {
  ASSIGN_OR_RETURN(CachedStatement summary, db_.Cached(kUpsertSummary));
  ASSIGN_OR_RETURN(CachedStatement noted, db_.Cached(kNoteExperimentMetric));
  ASSIGN_OR_RETURN(CachedStatement unpack, db_.Cached(kDropPack));
  for (const auto& [key, pending] : batch.summaries) {
    summary->Bind(1, key.first)
        .Bind(2, key.second)
        .Bind(3, pending.last_step)
        .Bind(4, pending.last_value)
        .Bind(5, pending.min)
        .Bind(6, pending.max)
        .Bind(7, pending.count);
    RETURN_IF_ERROR(summary->Run());
    noted->Bind(1, key.first).Bind(2, key.second);
    RETURN_IF_ERROR(noted->Run());
    // A point stored after the run's series were packed: the pack no longer says it all.
    unpack->Bind(1, key.first).Bind(2, key.second);
    RETURN_IF_ERROR(unpack->Run());
    if (db_.Changes() > 0 && (packs_due_.empty() || packs_due_.back() != key.first)) {
      packs_due_.push_back(key.first);  // packed again with its late point (if still ended)
    }
    // Nor its experiment's column of the metric, nor one being written.
    RETURN_IF_ERROR(DropColumnsOfRun(key.first, key.second));
  }
  return absl::OkStatus();
}

absl::Status Store::IngestMeta(const model::RunRecord& run, const model::IngestEvent& event) {
  if (run.attempt != event.attempt) {
    return absl::OkStatus();  // from an attempt the run has moved past
  }
  model::RunMeta merged = run.meta;
  for (const auto& [key, value] : event.meta) {
    if (merged.size() >= kMaxRunMetaKeys && merged.count(key) == 0) {
      continue;
    }
    merged[key] = value;
  }
  if (merged == run.meta) {
    return absl::OkStatus();  // a resend, or nothing new
  }
  ASSIGN_OR_RETURN(CachedStatement stmt, db_.Cached(kUpdateMeta));
  // The agent's JSON parser only passes valid UTF-8; replace, never throw, should one slip by.
  stmt->Bind(1,
             nlohmann::json(merged).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .Bind(2, event.run_id);
  return stmt->Run();
}

absl::Status Store::IngestOne(const std::string& agent_id, const model::IngestEvent& event,
                              const model::IngestRules& rules, std::vector<model::RunEnded>* ended,
                              IngestBatch* batch) {
  if (event.kind == model::IngestEvent::Kind::kMetrics) {
    // The hot path: only whether the run exists matters, not the whole row, and that once a
    // batch.
    auto [known, first] = batch->runs.try_emplace(event.run_id, false);
    if (first) {
      ASSIGN_OR_RETURN(CachedStatement exists, db_.Cached(kRunExists));
      exists->Bind(1, event.run_id);
      ASSIGN_OR_RETURN(known->second, exists->Step());
    }
    return known->second ? IngestMetrics(event, batch) : absl::OkStatus();  // not ours: drop it
  }
  // Whatever this event does sees every point before it stored.
  RETURN_IF_ERROR(FlushPoints(batch));
  absl::StatusOr<model::RunRecord> run = GetRun(event.run_id);
  if (absl::IsNotFound(run.status())) {
    return absl::OkStatus();  // not ours (e.g. a run from another data dir): drop it
  }
  if (!run.ok()) {
    return run.status();
  }
  switch (event.kind) {
    case model::IngestEvent::Kind::kMetrics:
      return IngestMetrics(event, batch);
    case model::IngestEvent::Kind::kMeta:
      return IngestMeta(*run, event);
    case model::IngestEvent::Kind::kLog: {
      ASSIGN_OR_RETURN(CachedStatement stmt, db_.Cached(kInsertLog));
      stmt->Bind(1, event.run_id)
          .Bind(2, static_cast<int64_t>(event.attempt))
          .Bind(3, static_cast<int64_t>(event.seq))
          .Bind(4, agent_id)
          .Bind(5, event.stream)
          .Bind(6, event.text)
          .Bind(7, event.wall_time);
      return stmt->Run();
    }
    case model::IngestEvent::Kind::kStarted: {
      std::optional<model::RunTransition> started =
          rules.started(*run, event.attempt, event.pid, agent_id, event.wall_time);
      return started ? Apply(*started) : absl::OkStatus();
    }
    case model::IngestEvent::Kind::kExited: {
      const model::RunExit exit{
          event.attempt, event.exit_code, event.signal, event.cancelled,   event.interrupted,
          event.text,    event.wall_time, event.infra,  event.not_started, event.by_other_job};
      if (run->hosts > 1) {
        return IngestGangExit(agent_id, *run, exit, rules, ended);
      }
      std::optional<model::RunTransition> end = rules.exited(*run, exit);
      if (!end) {
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(Apply(*end));
      ended->push_back(
          {event.run_id, agent_id, end->state, event.attempt, {}, run->experiment_id, false});
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status Store::IngestGangExit(const std::string& agent_id, const model::RunRecord& run,
                                   const model::RunExit& exit, const model::IngestRules& rules,
                                   std::vector<model::RunEnded>* ended) {
  if (run.state == model::RunState::kQueued || IsFinal(run.state) || run.attempt != exit.attempt) {
    return absl::OkStatus();  // a late exit of an attempt that is over records nothing
  }
  ASSIGN_OR_RETURN(std::vector<std::string> gang, Gang(run.id, run.attempt));
  const auto member = std::find(gang.begin(), gang.end(), agent_id);
  if (member == gang.end()) {
    return absl::OkStatus();  // not a host of this attempt
  }
  const int rank = static_cast<int>(member - gang.begin());
  ASSIGN_OR_RETURN(Statement record,
                   db_.Prepare("UPDATE run_hosts SET exit_code = ? WHERE run_id = ? AND "
                               "attempt = ? AND rank = ? AND exit_code IS NULL"));
  record.Bind(1, static_cast<int64_t>(rules.rank_exit_code(exit)))
      .Bind(2, run.id)
      .Bind(3, static_cast<int64_t>(run.attempt))
      .Bind(4, static_cast<int64_t>(rank));
  RETURN_IF_ERROR(record.Run());
  ASSIGN_OR_RETURN(Statement done, db_.Prepare("SELECT COALESCE(SUM(exit_code = 0), 0), "
                                               "COUNT(exit_code) FROM run_hosts WHERE run_id = ? "
                                               "AND attempt = ?"));
  done.Bind(1, run.id).Bind(2, static_cast<int64_t>(run.attempt));
  ASSIGN_OR_RETURN(bool row, done.Step());
  const model::GangTally tally{row ? static_cast<int>(done.Int(0)) : 0,
                               row ? static_cast<int>(done.Int(1)) : 0,
                               static_cast<int>(gang.size())};
  std::optional<model::RunTransition> end = rules.gang_exited(run, rank, agent_id, exit, tally);
  if (!end) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Apply(*end));
  const bool held = end->state == run.state;  // a failure held, the run not ended
  ended->push_back({run.id, agent_id, end->state, run.attempt, gang, run.experiment_id, held});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<model::RunEnded>> Store::Ingest(
    const std::string& agent_id, const std::vector<model::IngestEvent>& events,
    const model::IngestRules& rules) {
  std::vector<model::RunEnded> ended;
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  IngestBatch batch;
  for (const model::IngestEvent& event : events) {
    if (absl::Status s = IngestOne(agent_id, event, rules, &ended, &batch); !s.ok()) {
      metric_key_ids_.clear();  // ids assigned inside the rolled-back transaction are void
      return s;
    }
  }
  if (absl::Status s = FlushPoints(&batch); !s.ok()) {
    metric_key_ids_.clear();
    return s;
  }
  if (absl::Status s = WriteSummaries(batch); !s.ok()) {
    metric_key_ids_.clear();
    return s;
  }
  if (absl::Status s = tx.Commit(); !s.ok()) {
    metric_key_ids_.clear();
    return s;
  }
  return ended;
}

}  // namespace tae::store
