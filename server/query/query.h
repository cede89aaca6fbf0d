#pragma once

// Query: the read side. What the adapters (Control RPCs, the agent link's snapshot fetch) show is
// read here, never from the store's writers: experiments with their run counts, runs with their
// metric summaries, a run with its transitions, log pages, metric series, reports, the queue and
// snapshots with their usage. A listing is a constant number of statements however many
// experiments or runs there are (tests/unit/store_listing_test.cc counts them), and every
// statement is prepared once per connection (Db::Cached). Reads run on taed's core thread, over
// the store's connection (docs/threading.md); nothing here writes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread/owner.h"
#include "server/model/records.h"
#include "server/query/stored_series.h"
#include "server/report/frontier.h"
#include "server/report/report.h"
#include "server/report/savings.h"
#include "server/report/scale.h"
#include "server/report/tuned.h"
#include "server/store/store.h"

namespace tae::query {

// A run with the summary (last/min/max/count) of each of its metrics.
struct RunView {
  model::RunRecord run;
  std::vector<model::MetricSummary> summaries;
};

// A page of an experiment's runs (Query::ListRunsPage).
struct RunsPage {
  std::vector<RunView> runs;  // in id order
  int64_t total = 0;          // the experiment's runs, all pages
  int64_t next_after = 0;     // the `after` of the next page; 0: this is the last
};

// One run in full: its view and every transition it took.
struct RunDetail {
  RunView view;
  std::vector<model::TransitionRecord> transitions;
  std::vector<std::string> command_keys;  // GetRunResponse.command_keys
  std::vector<std::string> warnings;      // GetRunResponse.warnings
};

struct LogPage {
  std::vector<model::LogRecord> lines;
  int64_t next = 0;           // the cursor to ask after next time
  bool run_finished = false;  // the run is final and this page holds its last line
};

struct MetricsRequest {
  std::string experiment;         // every run of it, or
  std::vector<int64_t> run_ids;   // these runs (exactly one of the two)
  std::vector<std::string> keys;  // empty: every metric each run has
  int64_t max_points = 0;         // 0: every raw point (Query::QueryMetric)
};

struct MetricSeries {
  model::RunRecord run;
  std::string key;
  std::vector<model::MetricPoint> points;
};

struct ReportResult {
  model::ExperimentRecord experiment;
  std::vector<std::string> metrics;
  std::string metrics_source;  // "asked", "default" or "runs" (ReportResponse.metrics_source)
  std::string baseline;
  std::vector<report::Row> rows;
  std::vector<std::string> banners;              // report::Banners
  report::FamilySummary correction;              // what the verdicts control
  bool adaptive = false;                         // decided by train.seeds = { min, max }
  std::string view;                              // "tuned" or "grid"
  std::string search_metric;                     // tuned: chosen on this metric, in this direction
  std::string search_goal;                       // "min" | "max"
  int search_confirm = 0;                        // tuned: search.confirm
  std::string estimates;                         // tuned: report::TunedEstimates
  std::optional<report::SearchSavings> savings;  // an asha [search] only
  std::vector<model::SearchDecisionRecord> decisions;  // an asha [search] only, in decision order
  std::optional<report::Frontier> frontier;            // asked for a frontier only
  std::vector<report::ScaleFit> scale;                 // asked for the ladder fit only
  // ReportResponse.no_metrics, sample_run, sample_output.
  bool no_metrics = false;
  int64_t sample_run = 0;
  std::vector<std::string> sample_output;
};

struct SnapshotView {
  model::SnapshotRecord snapshot;
  model::SnapshotUsage usage;
};

class Query {
 public:
  // Reads through store->db(); the store outlives the query.
  explicit Query(store::Store* store);

  // Experiments. ref: "12", "e12" or a name (the newest experiment with that name).
  absl::StatusOr<int64_t> ResolveExperiment(const std::string& ref);
  absl::StatusOr<model::ExperimentRecord> GetExperiment(int64_t id);
  // Newest first (limit <= 0: all); three statements however many experiments and runs.
  absl::StatusOr<std::vector<model::ExperimentRecord>> ListExperiments(int limit);

  // Runs. The experiment's runs with their summaries: two statements however many runs.
  absl::StatusOr<std::vector<RunView>> ListRuns(const std::string& experiment);
  // The experiment's runs after run `after_id` (0: from the first) in id order, at most `limit`
  // (0: all of them): the runs of a large study a page at a time, each page costing its own runs.
  absl::StatusOr<RunsPage> ListRunsPage(const std::string& experiment, int64_t after_id,
                                        int64_t limit);
  // What curves of `key` need of the experiment's runs, in id order: each run brief
  // (Store::ListRunsBrief: the config of each variant's first run only) with the summary of
  // `key` alone, where it has one.
  absl::StatusOr<std::vector<RunView>> CurveRuns(int64_t experiment_id, const std::string& key);
  absl::StatusOr<RunDetail> GetRun(int64_t run_id);
  // Queued runs in the scheduler's order, each with why it waits.
  absl::StatusOr<std::vector<model::RunRecord>> Queue();
  // limit: 1..kMaxLogLines lines after the cursor `after`.
  absl::StatusOr<LogPage> Logs(int64_t run_id, int64_t after, int limit);
  // The last `limit` lines before the cursor `before` (0: the end), in cursor order; `next` is
  // the last line's cursor (the end when `before` is 0), to follow the log from there.
  absl::StatusOr<LogPage> LogsBefore(int64_t run_id, int64_t before, int limit);
  absl::StatusOr<std::vector<MetricSeries>> Metrics(const MetricsRequest& request);
  // sort: "effect" (default when empty) or "spec" (report::SortByEffect); metrics default to
  // metrics::DefaultMetrics of what the runs have (eval/loss and eval/acc for tae-train's), the
  // baseline to "baseline". view: "tuned" (each variant at its own best grid point on the
  // [search] metric, else on the first metric; report/tuned.h), "grid" (every point), or ""
  // (tuned when the experiment declares a [search]).
  // frontier: a bar ("eval/acc>=0.99", report::ParseBar) adds the cost frontier on the `cost`
  // axis (report::ParseCost) over the rows, and the bar's metric to `metrics` when missing; view
  // "" is then tuned when the experiment has grid points (each variant at its tuned point). A
  // metric no run has is InvalidArgument listing those they have. scale: a [scale] ladder's fit
  // of the first metric (a loss) per grid point (report/scale.h), with each variant's effect at
  // N = scale_at when > 0; the view of a ladder is "grid" (the tuned view is refused on one).
  absl::StatusOr<ReportResult> Report(const std::string& experiment,
                                      std::vector<std::string> metrics, std::string baseline,
                                      std::string sort = "", std::string view = "",
                                      const std::string& frontier = "",
                                      const std::string& cost = "", bool scale = false,
                                      double scale_at = 0);
  // What an asha [search] saved so far (report/savings.h); nullopt for any other experiment.
  // Three statements however many runs.
  absl::StatusOr<std::optional<report::SearchSavings>> SearchSavings(
      const model::ExperimentRecord& experiment);

  // Snapshots, newest first, without manifests, with how many runs pin each.
  absl::StatusOr<std::vector<SnapshotView>> Snapshots();
  // One snapshot, its manifest included.
  absl::StatusOr<SnapshotView> Snapshot(const std::string& id);
  // Only its manifest (an agent fetching it: no usage counts).
  absl::StatusOr<std::string> Manifest(const std::string& id);

  // A run's complete checkpoints, newest first, without manifests, and how many it keeps.
  absl::StatusOr<std::pair<std::vector<model::CheckpointRecord>, int>> Checkpoints(int64_t run_id);
  // One complete checkpoint with its manifest: at `step`, or the newest. NotFound naming the steps
  // there are.
  absl::StatusOr<model::CheckpointRecord> Checkpoint(int64_t run_id, std::optional<int64_t> step);
  // The run's artifacts (run_id 0: every run's), newest first, without manifests
  // (docs/profiles.md).
  absl::StatusOr<std::vector<model::CheckpointRecord>> Artifacts(int64_t run_id);
  // The run's artifact of that name, with its manifest; NotFound lists the names it has.
  absl::StatusOr<model::CheckpointRecord> Artifact(int64_t run_id, const std::string& name);

  // The tables the views are made of.
  absl::StatusOr<std::vector<model::TransitionRecord>> ListTransitions(int64_t run_id);
  absl::StatusOr<std::vector<model::MetricSummary>> Summaries(int64_t run_id);
  // Every run's summaries in the experiment, by run id, in one statement.
  absl::StatusOr<std::map<int64_t, std::vector<model::MetricSummary>>> ExperimentSummaries(
      int64_t experiment_id);
  absl::StatusOr<std::vector<model::FinalValue>> FinalValues(int64_t experiment_id,
                                                             const std::vector<std::string>& keys);
  // The names of every metric some run of the experiment has, in one statement.
  absl::StatusOr<std::vector<std::string>> MetricNames(int64_t experiment_id);
  // The points of one run's metric `key` in step order: every raw point when max_points is 0 or
  // the series has no more; else at most max_points buckets of equal step ranges, each with the
  // mean, min and max of its points (a plot never pulls points it cannot draw). Empty for an
  // unknown key.
  absl::StatusOr<std::vector<model::MetricPoint>> QueryMetric(int64_t run_id,
                                                              const std::string& key,
                                                              int64_t max_points);

  // Every point of metric `key` of every run of the experiment, by run id, in step order (the
  // dashboard's curves): the ended runs' packs as stored (store/series_pack.h) and the other
  // runs' rows, two statements however many runs; a damaged pack is logged and its run's rows
  // read instead. `expected`: points a run is known to have (its summary's count), reserved up
  // front.
  absl::StatusOr<std::map<int64_t, StoredSeries>> ExperimentSeries(
      int64_t experiment_id, const std::string& key,
      const std::map<int64_t, int64_t>& expected = {});
  // The raw points of one run's metric `key` with step > after_step, in step order.
  absl::StatusOr<std::vector<model::SeriesPoint>> QueryMetricAfter(int64_t run_id,
                                                                   const std::string& key,
                                                                   int64_t after_step);
  // Changes whenever anything is stored (Db::total_changes).
  int64_t DataVersion();
  // Changes when the experiment's runs change state or gain metric points: its run counts by
  // state, attempts, and points stored.
  absl::StatusOr<std::string> ExperimentVersion(int64_t experiment_id);
  // The cursors of the run's log lines containing `text` (ASCII case-insensitive), ascending, at
  // most `limit`.
  absl::StatusOr<std::vector<int64_t>> SearchLogs(int64_t run_id, const std::string& text,
                                                  int limit);
  // One slice of a search: the lines of the run after `after` (a line id), at most `scan` of
  // them, and which of those contain `text`. A caller that has the core for others searches a
  // long log slice by slice, `after` = the slice's `last`.
  struct SearchSlice {
    std::vector<int64_t> matches;
    int64_t last = 0;  // the last line id looked at (the next slice's `after`)
    bool end = false;  // no lines after `last`
  };
  absl::StatusOr<SearchSlice> SearchLogsSlice(int64_t run_id, const std::string& text,
                                              int64_t after, int scan);

  // The largest page Logs gives.
  static constexpr int kMaxLogLines = 10000;

 private:
  // Sets result's no_metrics, sample_run and sample_output (ReportResponse) for the
  // experiment's runs, given the metrics they have (`present`, MetricNames).
  absl::Status ExplainNoMetrics(const std::vector<std::string>& present,
                                const std::vector<model::RunRecord>& runs, ReportResult* result);
  // SearchSavings, and the stored decisions it was computed from into `decisions` (not null).
  absl::StatusOr<std::optional<report::SearchSavings>> SearchSavings(
      const model::ExperimentRecord& experiment,
      std::vector<model::SearchDecisionRecord>* decisions);

  thread::ThreadOwner core_;  // the views are read on taed's core thread (checked)
  store::Store* store_;
  store::Db* db_;
};

}  // namespace tae::query
