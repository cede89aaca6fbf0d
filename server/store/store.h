#pragma once

// Store: taed's one system of record. Owns the SQLite connection (WAL, foreign keys, STRICT
// tables, migrations applied at open). Every run transition is one transaction with a reason;
// which transition happens is decided above the store (server/lifecycle's pure functions, handed
// in as server/model/decide.h's values: Transition, Ingest, RecordSearch), and Apply writes it.
// It reads only what its writers and the controller's decisions need; what is shown to people
// (listings, summaries, logs, metric series, reports) is read by server/query.
// Single-threaded: only taed's core thread calls it (docs/threading.md).

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fs/fs.h"
#include "server/model/decide.h"
#include "server/model/records.h"
#include "server/store/column_file.h"
#include "server/store/db.h"
#include "server/store/migrations.h"

namespace tae::store {

class Store {
 public:
  // Opens path (":memory:" works) and migrates it with `migrations`.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, const std::vector<Migration>& migrations = EmbeddedMigrations());

  // Experiments.
  absl::StatusOr<int64_t> CreateExperiment(const model::NewExperiment& experiment, double now);
  absl::StatusOr<std::optional<int64_t>> FindExperimentByHash(const std::string& spec_hash);
  // ref: "12", "e12" or a name (the newest experiment with that name).
  absl::StatusOr<int64_t> ResolveExperiment(const std::string& ref);

  // What it was submitted from (its spec text, --set overrides and [report]).
  absl::StatusOr<model::ExperimentSource> GetExperimentSource(int64_t experiment_id);
  // Experiments with adaptive seeds (train.seeds = { min, max }), oldest first.
  absl::StatusOr<std::vector<int64_t>> AdaptiveExperiments();
  // Experiments with search.confirm > 0 (server/seeds/confirm.h), oldest first.
  absl::StatusOr<std::vector<int64_t>> ConfirmingExperiments();
  // Experiments with an asha [search] and runs that are not final yet, oldest first.
  absl::StatusOr<std::vector<int64_t>> SearchedExperiments();
  // Adds queued runs to an experiment in one transaction, each with a first transition that says
  // its `reason`. A (variant, seed) the experiment already has is refused (AlreadyExists) and
  // nothing is added.
  absl::Status AddRuns(int64_t experiment_id, const std::vector<model::NewRun>& runs, double now);

  // Runs.
  absl::StatusOr<std::vector<model::RunRecord>> ListRuns(int64_t experiment_id);
  // The same, brief: only id, experiment_id, variant, seed, state, attempt and confirm are read
  // (from the runs_listing index, not the rows), and config_json of each variant's first run;
  // every other field is its default. What a report needs of a 10,000-run study.
  absl::StatusOr<std::vector<model::RunRecord>> ListRunsBrief(int64_t experiment_id);
  absl::StatusOr<model::RunRecord> GetRun(int64_t run_id);
  // Queued runs, highest priority first, then oldest first.
  absl::StatusOr<std::vector<model::RunRecord>> QueuedRuns();
  // The final values (last, min, max of the series) of `keys` for every run of the experiment
  // that reported them, by key then run id.
  absl::StatusOr<std::vector<model::FinalValue>> FinalValues(int64_t experiment_id,
                                                             const std::vector<std::string>& keys);
  // Runs in assigned or running state (all agents).
  absl::StatusOr<std::vector<model::RunRecord>> ActiveRuns();
  // How many runs of each experiment are assigned or running (experiments with none left out).
  absl::StatusOr<std::map<int64_t, int>> ActiveCounts();

  // The scheduler's view of the queue, which the controller keeps between passes: the scheduling
  // fields of every queued run (highest priority first, then oldest), or of those of `ids` that
  // are queued (in no order).
  absl::StatusOr<std::vector<model::QueueRow>> QueueRows();
  absl::StatusOr<std::vector<model::QueueRow>> QueueRows(const std::set<int64_t>& ids);
  // What was written through this store since the last call that may change those views: runs
  // inserted or transitioned, experiments paused or resumed; `all` after open and reset. A
  // superset: a write its transaction rolled back is named too.
  model::QueueChanges TakeQueueChanges();

  // Reads the run, asks `decide` (e.g. lifecycle::Assign(agents, now), lifecycle::Lost(why,
  // now)) and writes the transition it returns, all in one transaction. Returns the run as it is
  // afterwards (unchanged when the decision was nothing); `decide`'s error is returned and
  // nothing is written.
  absl::StatusOr<model::RunRecord> Transition(int64_t run_id, const model::Decide& decide);
  // The same for every run of the experiment, in one transaction (lifecycle::Retry: taectl
  // retry). Returns how many runs changed.
  absl::StatusOr<int> TransitionAll(int64_t experiment_id, const model::Decide& decide);
  // The agents of a gang's attempt by rank (empty if that attempt was not a gang).
  absl::StatusOr<std::vector<std::string>> Gang(int64_t run_id, int attempt);
  // The agents of the run's current attempt: its gang, or {agent_id} (empty if never placed).
  absl::StatusOr<std::vector<std::string>> AgentsOf(const model::RunRecord& run);
  // Replaces the experiment's [report] (a resubmit that changed only it).
  absl::Status SetExperimentReport(int64_t experiment_id, const model::ExperimentReport& report);
  // Paused experiments keep their runs queued (running ones go on).
  absl::Status SetExperimentPaused(int64_t experiment_id, bool paused);
  absl::StatusOr<std::set<int64_t>> PausedExperiments();
  // Why queued runs are still waiting (shown by `taectl runs`), in one transaction; no
  // transition is recorded, and a run no longer queued is left as it is.
  absl::Status SetWaitingReasons(const std::vector<std::pair<int64_t, std::string>>& reasons);
  // Writes a decided transition: the runs row's changed columns, its transition rows and a
  // gang's hosts. Atomic only inside the caller's transaction (every caller here holds one).
  absl::Status Apply(const model::RunTransition& transition);

  // Writes one batch of agent events in one transaction; the state changes they bring are
  // decided by `rules` (lifecycle::IngestRules()). Runs that ended are returned.
  absl::StatusOr<std::vector<model::RunEnded>> Ingest(const std::string& agent_id,
                                                      const std::vector<model::IngestEvent>& events,
                                                      const model::IngestRules& rules);

  // [search] (store_search.cc). Writes a search's decisions in their order and, in the same
  // transaction, applies to each run of `prune` its decision (lifecycle::Finish(kPruned, why,
  // now)). A run of another experiment is refused.
  absl::Status RecordSearch(int64_t experiment_id,
                            const std::vector<model::SearchDecisionRecord>& decisions,
                            const std::vector<std::pair<int64_t, model::Decide>>& prune);
  // An experiment's stored decisions, in the order they were made.
  absl::StatusOr<std::vector<model::SearchDecisionRecord>> SearchDecisions(int64_t experiment_id);
  // Every stored point of `metric` of the experiment's runs, by run id then step.
  absl::StatusOr<std::vector<model::RunPoint>> MetricPoints(int64_t experiment_id,
                                                            const std::string& metric);

  // Snapshots. Creating one that exists keeps the first row (same id, same content).
  absl::Status PutSnapshot(const model::SnapshotRecord& snapshot);
  absl::StatusOr<model::SnapshotRecord> GetSnapshot(const std::string& id);
  // Newest first, without manifests.
  absl::StatusOr<std::vector<model::SnapshotRecord>> ListSnapshots();
  // Returns whether it existed.
  absl::StatusOr<bool> DeleteSnapshot(const std::string& id);
  // By snapshot id: the runs whose config pins it ("job.snapshot"), and how many are active.
  absl::StatusOr<std::map<std::string, model::SnapshotUsage>> SnapshotUsages();

  // Checkpoints (docs/checkpoints.md; store_checkpoints.cc).
  // Inserts `checkpoint` incomplete, with its distinct blob hashes; returns its id. From here on
  // blob garbage collection keeps those hashes.
  absl::StatusOr<int64_t> BeginCheckpoint(const model::CheckpointRecord& checkpoint,
                                          const std::vector<std::string>& hashes);
  // Marks it complete, then deletes the run's other checkpoints of the same step and all but the
  // newest `keep` complete ones (an artifact: only an older one of the same name). Returns what
  // that freed.
  absl::StatusOr<model::CheckpointsDropped> CompleteCheckpoint(int64_t id, int keep);
  // Deletes checkpoints by id (an incomplete one whose blobs failed verification; scrap).
  absl::StatusOr<model::CheckpointsDropped> DeleteCheckpoints(const std::vector<int64_t>& ids);
  // Deletes every incomplete checkpoint (at start: uploads a crash interrupted). Returns how many.
  absl::StatusOr<int> DeleteIncompleteCheckpoints();
  // A complete checkpoint with its manifest; nullopt when there is none with that id.
  absl::StatusOr<std::optional<model::CheckpointRecord>> GetCheckpoint(int64_t id);
  // The run's newest complete checkpoint, with its manifest; nullopt when it has none.
  absl::StatusOr<std::optional<model::CheckpointRecord>> LatestCheckpoint(int64_t run_id);
  // Complete checkpoints (or, with `artifacts`, artifacts), newest first, without manifests: of
  // one run, or (run_id 0) of all runs.
  absl::StatusOr<std::vector<model::CheckpointRecord>> ListCheckpoints(int64_t run_id,
                                                                       bool artifacts = false);
  // The run's complete artifact of that name, with its manifest; nullopt when it has none.
  absl::StatusOr<std::optional<model::CheckpointRecord>> FindArtifact(int64_t run_id,
                                                                      const std::string& name);
  // Every blob hash any checkpoint row names.
  absl::StatusOr<std::set<std::string>> CheckpointBlobs();
  // Those of `hashes` that no checkpoint row (complete or not) names.
  absl::StatusOr<std::vector<std::string>> UnnamedCheckpointBlobs(
      const std::vector<std::string>& hashes);
  // The blob hashes the run's complete checkpoints and artifacts name.
  absl::StatusOr<std::set<std::string>> RunCheckpointBlobs(int64_t run_id);

  // Packed series (series_pack.h, migration 0019). A (run, metric)'s pack is dropped when a point
  // of it is stored afterwards (the run is then due again) or the run is queued again. PackSome
  // packs, in one transaction of about `budget_s` (at least one run when one is due), the runs
  // that ended (or had a late point) since the store was opened, oldest first, then those that
  // ended before and have a series without a pack (a scan by run id, once per open: runs from
  // before packs existed); returns packs_due(). Ingest never waits on it: the controller calls it
  // in slices.
  absl::StatusOr<bool> PackSome(double budget_s);
  bool packs_due() const { return !packs_due_.empty() || !pack_scan_done_; }

  // Column files (column_file.h, migration 0021), beside the database (none for one in memory):
  // once every run of an experiment of at least min_column_runs() runs has ended and is packed,
  // each of its metrics' packs are written as one file in run order, so that the metric's curve
  // reads in order from a cold page cache. ColumnSome writes them a window of runs at a time for
  // about `budget_s` (the controller calls it once PackSome has nothing due; at least one window
  // a call), the experiments whose runs ended since first, then once per open every experiment;
  // returns columns_due(). A column is dropped (row and file) when its experiment gets a run, one
  // of its runs is queued again or a point of the metric is stored for one of them; one being
  // written then is abandoned.
  absl::StatusOr<bool> ColumnSome(double budget_s);
  bool columns_due() const;
  // The experiment's packs of `key` in run id order, as views into `*bytes` (the file), from its
  // column file: false when it has none. A file that is not the one its row names (missing, cut,
  // another generation) is logged and its row dropped, and false returned: the packs say the same.
  absl::StatusOr<bool> ReadColumn(int64_t experiment_id, const std::string& key, std::string* bytes,
                                  std::vector<std::pair<int64_t, std::string_view>>* packs);
  int64_t min_column_runs() const { return min_column_runs_; }
  void set_min_column_runs(int64_t runs) { min_column_runs_ = runs; }  // for tests

  // Agents.
  absl::Status UpsertAgent(const model::AgentRecord& agent);
  absl::Status SetAgentState(const std::string& id, const std::string& state, double now);
  // Quarantine: non-empty `why` keeps the agent from taking runs (across restarts); "" lifts it.
  absl::Status SetAgentQuarantine(const std::string& id, const std::string& why);
  // The worker's faults in a row among the agent's run exits (controller::kQuarantineAfter): kept
  // across its reconnects and taed's restarts. 0 for an agent never seen.
  absl::Status SetAgentInfraFaults(const std::string& id, int faults);
  absl::StatusOr<int> AgentInfraFaults(const std::string& id);
  // Every agent's quarantine reason, by id (those with one).
  absl::StatusOr<std::map<std::string, std::string>> AgentQuarantines();

  // Agent credentials (migration 0010).
  absl::Status PutCredential(const model::CredentialRecord& credential);
  absl::Status RevokeCredential(const std::string& agent_id, const std::string& reason, double now);
  // The agent's credential stops working (its secret's hash is cleared, `how` becomes
  // "retired"); unlike a revocation, a provider may mint the id a new one later.
  absl::Status RetireCredential(const std::string& agent_id);
  // Binds placement labels to the agent's live credential (an enrolled agent's first
  // registration).
  absl::Status BindCredentialPlacement(const std::string& agent_id,
                                       const std::map<std::string, std::string>& placement);
  absl::StatusOr<std::vector<model::CredentialRecord>> ListCredentials();

  // The connection, for the read side (server/query) on the same thread, and for tests.
  Db* db() { return &db_; }
  // For fuzzers, which start every input from the same seeded store: MarkSeed copies every table
  // into an attached in-memory schema; ResetToSeed puts every table back as it was then, in one
  // transaction, and forgets what the store caches (metric key ids); nothing to do when nothing
  // changed since.
  absl::Status MarkSeed();
  absl::Status ResetToSeed();

 private:
  Store(Db db, std::string columns_dir)
      : columns_dir_(std::move(columns_dir)), db_(std::move(db)) {}

  absl::Status InsertRuns(int64_t experiment_id, const std::vector<model::NewRun>& runs,
                          double now);
  absl::Status RecordTransition(int64_t run_id, int attempt, model::RunState from,
                                model::RunState to, const std::string& reason, double now);
  // A (run, key)'s run_summaries change in one Ingest batch, written once at its end.
  struct PendingSummary {
    int64_t last_step = 0;
    double last_value = 0;
    double min = 0;
    double max = 0;
    int64_t count = 0;
  };
  // What one Ingest call carries from event to event.
  struct IngestBatch {
    std::map<std::pair<int64_t, int64_t>, PendingSummary> summaries;  // by (run, key)
    // Whether each run a metrics event of the batch named exists: asked once per run, not per
    // line (a run row is never deleted inside an ingest transaction).
    std::map<int64_t, bool> runs;
    // Finite points of consecutive metrics events, not yet written: written in primary-key
    // order (FlushPoints) before any other event of the batch and at its end, so that SQLite's
    // b-tree takes them as a few sequential runs instead of one seek per point.
    struct Point {
      int64_t run_id = 0;
      int64_t key_id = 0;
      int64_t step = 0;
      int64_t attempt = 0;
      double value = 0;
      double wall_time = 0;
    };
    std::vector<Point> points;
  };
  absl::Status IngestOne(const std::string& agent_id, const model::IngestEvent& event,
                         const model::IngestRules& rules, std::vector<model::RunEnded>* ended,
                         IngestBatch* batch);
  absl::Status IngestMetrics(const model::IngestEvent& event, IngestBatch* batch);
  // A rank of a gang exited: the run ends when every rank exited 0 (succeeded) or when one did
  // not (failed, cancelled, or lost and requeued as a whole).
  absl::Status IngestGangExit(const std::string& agent_id, const model::RunRecord& run,
                              const model::RunExit& exit, const model::IngestRules& rules,
                              std::vector<model::RunEnded>* ended);
  absl::Status FlushPoints(IngestBatch* batch);
  absl::Status WriteSummaries(const IngestBatch& batch);
  // Merges event.meta into the run's metadata; a resend changes nothing.
  absl::Status IngestMeta(const model::RunRecord& run, const model::IngestEvent& event);
  absl::StatusOr<int64_t> MetricKeyId(const std::string& name);
  absl::StatusOr<std::vector<model::RunRecord>> QueryRuns(const std::string& where, int64_t arg);
  // Packs every series of `run_id` (replacing its packs).
  absl::Status PackRun(int64_t run_id);
  // Drops every pack of `run_id`.
  absl::Status DropPacks(int64_t run_id);
  model::QueueChanges queue_changes_;
  std::deque<int64_t> packs_due_;  // runs Apply ended, in the order they ended
  int64_t pack_scan_after_ = 0;    // PackSome's scan: run ids up to here are looked at
  bool pack_scan_done_ = false;

  // Column files (store_columns.cc).
  struct ColumnBuild {
    ColumnId id;
    int64_t after_run = 0;  // the last run written
    int64_t runs = 0;
    int64_t bytes = 0;
    fs::Fd fd;
    std::string tmp;
  };
  std::string ColumnPath(int64_t experiment_id, int64_t key_id) const;
  // Drops the experiment's columns of `key_id` (every key: < 0), rows and files; abandons one
  // being written.
  absl::Status DropColumns(int64_t experiment_id, int64_t key_id);
  absl::Status DropColumnsOfRun(int64_t run_id, int64_t key_id);
  // The run was packed: its experiment is looked at by ColumnSome.
  absl::Status ColumnsMayBeDue(int64_t run_id);
  void AbandonColumnBuild();
  // Opens the temporary file of (experiment, key)'s column, its header written: building_.
  absl::Status BeginColumnBuild(int64_t experiment_id, int64_t key_id);
  absl::StatusOr<std::optional<int64_t>> ExperimentOfRun(int64_t run_id);
  std::string columns_dir_;  // empty: no columns (a database in memory)
  std::optional<ColumnBuild> building_;
  std::set<int64_t> columns_due_;  // experiments to look at (a run ended, a column dropped)
  int64_t column_scan_after_ = 0;  // the once-per-open scan: experiment ids up to here looked at
  bool column_scan_done_ = false;
  int64_t min_column_runs_ = 64;

  Db db_;
  std::map<std::string, int64_t> metric_key_ids_;
  std::vector<std::string> seed_sql_;  // MarkSeed's statements that put each table back
  int64_t seed_changes_ = 0;           // db_.total_changes() as of the seed
};

}  // namespace tae::store
