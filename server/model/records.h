#pragma once

// taed's domain records and enums, as plain structs: runs, experiments, agents, metrics,
// checkpoints and the transitions between run states. The deciders (server/lifecycle,
// server/scheduler, server/report, server/search, server/seeds), the store that keeps them
// (server/store) and the adapters that show them (server/wire, server/rpc, server/http) all speak
// them; this folder depends on none of those. No SQLite, no proto, no I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tae::model {

// kPruned: stopped early by the experiment's [search] (ASHA, server/search); final, and neither a
// failure nor a cancel.
enum class RunState {
  kQueued,
  kAssigned,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kLost,
  kPruned
};

const char* ToString(RunState state);
std::optional<RunState> RunStateFromString(std::string_view text);
bool IsFinal(RunState state);

using Labels = std::map<std::string, std::string>;
// What a job reported about its runtime: libtorch version, BLAS library, thread counts, ...
using RunMeta = std::map<std::string, std::string>;

struct RunCounts {
  int total = 0;
  int queued = 0;
  int running = 0;  // assigned or running
  int succeeded = 0;
  int failed = 0;
  int cancelled = 0;
  int lost = 0;
  int pruned = 0;
};

// An experiment file's [report]: the metrics shown when none is named (empty: the defaults), and
// which way each is better (metric -> "min" | "max"); its floors; and how its comparisons are
// decided (train.seeds as a table: adaptive seeds).
// An experiment file's [search] as stored (common/spec's SearchPlan, resolved; server/search
// decides with it). Not declared: the file has no [search].
struct SearchSettings {
  bool declared = false;
  std::string method = "grid";  // "grid" | "asha"
  std::string metric = "eval/loss";
  std::string goal = "min";  // "min" | "max"
  int64_t min_steps = 0;
  int64_t reduction = 3;
  // A rung waits for this many points; 1 when absent: what experiments stored before it had.
  int64_t bootstrap = 1;
  std::string within = "variant";  // "variant" | "study"
  // search.confirm: fresh seeds each variant's chosen point gets once the search is over
  // (server/seeds/confirm.h); 0: none, and the tuned table's estimates are optimistic.
  int confirm = 0;
  bool asha() const { return method == "asha"; }
};

// An experiment file's [scale] ladder as stored (common/spec's ScaleLadder): what the scale report
// (server/report/scale.h) fits. Empty rungs: no ladder.
struct ScaleSettings {
  std::vector<std::string> rungs;  // per rung, its overrides as text ("model.d_model=64 ...")
  std::vector<double> params;      // scale.params: N per rung; empty: from the runs
  int stop_rungs = 0;              // scale.stop_if = { rungs, band }; 0: none
  double stop_band = 0;
  bool declared() const { return !rungs.empty(); }
};

struct ExperimentReport {
  std::vector<std::string> metrics;
  std::map<std::string, std::string> goal;
  std::map<std::string, double> floor = {};  // [report] floor: metric -> level
  int min_seeds = 0;                         // train.seeds = { min, max, ... }; 0: a list of seeds
  int max_seeds = 0;
  double alpha = 0.05;
  std::map<std::string, double> margin = {};  // train.seeds.margin: metric -> equivalence margin
  SearchSettings search = {};                 // [search]
  // report.correction: how each metric's family of comparisons is controlled ("holm",
  // "bonferroni", "none"; common/stats/family.h).
  std::string correction = "holm";
  // report.pairing: "none" (Welch) or "seed" (the paired t-test of per-seed differences).
  std::string pairing = "none";
  ScaleSettings scale = {};  // [scale]
};

// One decision of an experiment's ASHA search (server/search's Decision, as stored).
struct SearchDecisionRecord {
  std::string point;
  std::string group;
  int rung = 0;
  int64_t step = 0;
  std::optional<double> value;  // none: no data (or NaN)
  int seeds = 0;
  std::string verdict;  // "keep" | "prune" | "nodata"
  int rank = 0;
  int competitors = 0;
  int keeps = 0;
  std::string reason;
  double at = 0;
};

// A stored metric point of one run (the replay of a search after a restart).
struct RunPoint {
  int64_t run_id = 0;
  int64_t step = 0;
  double value = 0;  // NaN or +-inf: the run's metric diverged here
};

// The train.steps of a stored run config (RunRecord::config_json), or nullopt when it has none
// (or is not a JSON object).
std::optional<int64_t> TrainSteps(std::string_view config_json);

// A non-finite metric value as stored: "nan", "inf", "-inf"; and back (anything else: NaN).
std::string NonFiniteText(double value);
double NonFiniteFromText(std::string_view text);

struct ExperimentRecord {
  int64_t id = 0;
  std::string name;
  std::string description;
  std::string spec_hash;
  std::string spec_path;
  double created_at = 0;
  RunCounts counts;
  std::vector<std::string> variants;  // in submission order, baseline first
  bool paused = false;                // its queued runs are not started until resumed
  ExperimentReport report;            // its file's [report]
};

// Derived from the run counts: queued, running, succeeded, failed, cancelled.
std::string ExperimentState(const RunCounts& counts);

// What a run's resolved config asks of the fleet and of its agent, read from it once at submit
// (controller's ResourcesOf) and stored as columns: nothing re-parses the config JSON after.
struct RunResources {
  int max_attempts = 1;    // resources.max_attempts: attempts granted (taectl retry: as many again)
  int priority = 0;        // resources.priority
  int slots = 1;           // resources.slots, on each host
  Labels labels{};         // resources.labels: the agent must carry every one
  int max_concurrent = 0;  // resources.max_concurrent: cap on the experiment's active runs
  int hosts = 1;           // resources.hosts: agents of one slice the run spans (a gang)
  std::string command{};   // job.command; empty: tae-train
  std::string snapshot_id{};       // job.snapshot: the code snapshot mounted for it; empty: none
  int keep_checkpoints = 2;        // resources.keep_checkpoints: kept by taed; 0: none uploaded
  std::string retry_on = "infra";  // resources.retry_on: "infra" or "any"
  int64_t max_disk = 0;            // resources.max_disk: bytes a run may write on a worker; 0: any
};

// A queued run's not_before while it is held until a decision releases it (a [scale] ladder's
// larger rungs under scale.stop_if): never started on time alone.
inline constexpr double kHeldNotBefore = 1e300;

struct NewRun {
  std::string variant;
  int64_t seed = 0;
  std::string config_json;
  RunResources resources;
  std::string reason = "submitted";  // its first transition's
  bool confirm = false;              // a confirmation run (RunRecord::confirm)
  double not_before = 0;             // kHeldNotBefore: held (scale.stop_if)
};

// What an experiment was submitted from: enough to parse its spec again.
struct ExperimentSource {
  std::string spec_text;
  std::string spec_path;
  std::vector<std::string> overrides;  // taectl submit --set, in order
  ExperimentReport report;
};

struct NewExperiment {
  std::string name;
  std::string description;
  std::string spec_hash;
  std::string spec_path;
  std::string spec_text;
  std::string overrides_json;
  ExperimentReport report;
  std::vector<NewRun> runs;
};

struct RunRecord {
  int64_t id = 0;
  int64_t experiment_id = 0;
  std::string variant;
  int64_t seed = 0;
  std::string config_json;
  RunState state = RunState::kQueued;
  int attempt = 0;
  int max_attempts = 1;
  int priority = 0;
  int slots = 1;
  Labels labels;
  std::string agent_id;
  int64_t pid = 0;
  std::optional<int> exit_code;
  std::string reason;
  double created_at = 0;
  std::optional<double> started_at;
  std::optional<double> finished_at;
  RunMeta meta;
  double not_before = 0;     // queued: not started before this time (backoff after a lost attempt)
  int max_concurrent = 0;    // at most this many active runs of its experiment; 0: no cap
  int hosts = 1;             // > 1: a gang; its agents per attempt are in Store::Gang
  std::string command;       // job.command; empty: tae-train
  std::string snapshot_id;   // job.snapshot; empty: none
  int attempts_granted = 1;  // resources.max_attempts, what each retry grants again
  int keep_checkpoints = 2;  // resources.keep_checkpoints
  int infra_faults = 0;      // attempts requeued for the worker's faults (never spend attempts)
  // The last attempts' start fault (lifecycle::StartFaultKey: agent and cause) and how many
  // attempts in a row it ended before the job ran; "" and 0 once a job starts.
  std::string start_fault;
  int start_faults = 0;
  std::string retry_on = "infra";  // resources.retry_on: "any" retries the job's failures too
  int64_t max_disk = 0;            // resources.max_disk, bytes; 0: no limit
  // A gang's first job failure of this attempt (lifecycle::OnGangExit), held while the window
  // for a lost host runs: its reason ("" when none), exit code and when it came.
  std::string gang_failure;
  int gang_failure_code = 0;
  double gang_failure_at = 0;
  // Added by search.confirm (server/seeds/confirm.h): a fresh seed at its variant's chosen grid
  // point, after the search. Its seed is not one of the search's: the search, adaptive seeds
  // and every table but the tuned one's confirmed rows leave it out.
  bool confirm = false;
};

// A queued run as a scheduling pass reads it (Store::QueueRows): its scheduling fields only.
struct QueueRow {
  int64_t id = 0;
  int64_t experiment_id = 0;
  int priority = 0;
  int slots = 1;
  Labels labels;
  double not_before = 0;
  int max_concurrent = 0;
  int hosts = 1;
  std::string reason;  // as stored: the last waiting reason, or the transition's
};

// What may have changed for the scheduler since it last asked (Store::TakeQueueChanges).
struct QueueChanges {
  bool all = true;         // anything may have: read everything again
  std::set<int64_t> runs;  // inserted or transitioned
  bool paused = false;     // an experiment was paused or resumed
};

struct TransitionRecord {
  int attempt = 0;
  std::string from_state;
  std::string to_state;
  std::string reason;
  double at = 0;
};

struct MetricSummary {
  std::string key;
  int64_t last_step = 0;
  double last_value = 0;
  double min_value = 0;
  double max_value = 0;
  int64_t count = 0;
};

// One point of a metric series; a bucket of several raw points when downsampled (value = mean,
// step = the bucket's last step, wall_time = its latest).
struct MetricPoint {
  int64_t step = 0;
  double value = 0;
  double min = 0;
  double max = 0;
  double wall_time = 0;
  int64_t count = 1;  // raw points in the bucket
};

// One raw point of a series as curves read it: what a chart needs and no more (a metric of a
// 10,000-run study is 10 million of these in memory).
struct SeriesPoint {
  int64_t step = 0;
  double value = 0;
  double wall_time = 0;
  bool operator==(const SeriesPoint& o) const {
    return step == o.step && value == o.value && wall_time == o.wall_time;
  }
};

struct SnapshotRecord {
  std::string id;        // SHA-256 of the manifest text
  std::string manifest;  // "mode size sha256 path" lines
  int64_t files = 0;
  int64_t bytes = 0;
  std::string source;
  double created_at = 0;
};

// A checkpoint of a run (docs/checkpoints.md): its checkpoint directory's manifest as the job
// marked it complete at `step`. Only complete ones (every blob verified stored) are offered.
struct CheckpointRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  int attempt = 0;
  int64_t step = 0;
  std::string manifest_id;  // SHA-256 of the manifest text
  std::string manifest;     // empty in listings
  int64_t files = 0;
  int64_t bytes = 0;
  bool complete = false;
  double created_at = 0;
  // Non-empty: a run artifact of this name (a profile; migration 0009), not a checkpoint.
  std::string artifact;
};

// What completing a checkpoint or deleting checkpoints freed.
struct CheckpointsDropped {
  int checkpoints = 0;                    // rows deleted
  std::vector<std::string> unreferenced;  // their blobs that no remaining row names
};

struct SnapshotUsage {
  int64_t runs = 0;
  int64_t active_runs = 0;  // queued, assigned or running
};

struct LogRecord {
  int64_t cursor = 0;
  int attempt = 0;
  std::string stream;
  std::string text;
  double wall_time = 0;
};

// The last value of one metric of one run, for reports.
struct FinalValue {
  int64_t run_id = 0;
  std::string variant;
  int64_t seed = 0;
  RunState state = RunState::kQueued;
  std::string key;
  double value = 0;      // the last point's; NaN when the run diverged
  double min_value = 0;  // over the run's finite points (NaN: none)
  double max_value = 0;
  bool confirm = false;  // the run is a confirmation run (RunRecord::confirm)
  // Its first non-finite report of the key: the run diverged, and `value` is NaN, never the last
  // finite value before it.
  std::optional<int64_t> diverged_step;
};

struct AgentRecord {
  std::string id;
  std::string host;
  int slots = 0;
  Labels labels;
  std::string version;
  std::string state;
  double first_seen = 0;
  double last_seen = 0;
};

// An agent's credential as stored (migration 0010): only the secret's SHA-256.
struct CredentialRecord {
  std::string agent_id;
  std::string secret_sha256;
  // "token" (enrolled), "provider" (minted for an agent taed starts, which ends with taed),
  // "gke" (minted for a slice's pod), "retired" (no longer valid; may be minted again)
  std::string how;
  double enrolled_at = 0;
  std::optional<double> revoked_at;
  std::string revoked_reason;
  // Its placement labels (server/registry/placement.h); nullopt: none bound yet.
  std::optional<std::map<std::string, std::string>> placement;
};

// What the agent link delivers, already decoded from the wire (see server/rpc).
struct MetricValue {
  std::string key;
  double value = 0;
};

struct IngestEvent {
  enum class Kind { kMetrics, kLog, kStarted, kExited, kMeta };
  Kind kind = Kind::kLog;
  uint64_t seq = 0;
  int64_t run_id = 0;
  int attempt = 0;
  double wall_time = 0;
  int64_t step = 0;                 // kMetrics
  std::vector<MetricValue> values;  // kMetrics
  std::string stream;               // kLog
  std::string text;                 // kLog; kExited: reason
  int64_t pid = 0;                  // kStarted
  int exit_code = 0;                // kExited
  int signal = 0;                   // kExited
  bool cancelled = false;           // kExited
  bool interrupted = false;         // kExited: the agent stopped it as it shut down; requeue
  bool infra = false;               // kExited: the worker failed it, not the job; requeue
  bool not_started = false;         // kExited, with infra: the job's program never ran
  bool by_other_job = false;        // kExited, with infra: another job on the worker caused it
  RunMeta meta;                     // kMeta: keys to merge into the run's metadata
};

// A column of the runs row that a transition may leave, set, or set to NULL.
template <typename T>
struct RunField {
  enum class Op { kKeep, kSet, kNull };
  Op op = Op::kKeep;
  T value{};
  static RunField Set(T v) { return {Op::kSet, std::move(v)}; }
  static RunField Null() { return {Op::kNull, T{}}; }
};

// One decided change of a run's state (server/lifecycle decides, Store::Apply writes): the runs
// row's new state, reason and the columns that change with it, and the transition rows that
// explain it, written together in one statement pair. Lost-then-requeued is two rows.
struct RunTransition {
  struct Row {
    RunState from = RunState::kQueued;
    RunState to = RunState::kQueued;
    std::string reason;
  };
  int64_t run_id = 0;
  int attempt = 0;  // the attempt the transition rows belong to
  double at = 0;    // when (every row's `at`)
  std::vector<Row> rows;
  RunState state = RunState::kQueued;  // runs.state afterwards
  RunField<std::string> reason;        // runs.reason
  RunField<int64_t> attempt_column;    // runs.attempt (assignment counts one up)
  RunField<int64_t> max_attempts;
  RunField<std::string> agent_id;
  RunField<int64_t> pid;
  RunField<int64_t> exit_code;
  RunField<double> started_at;
  RunField<double> finished_at;
  RunField<double> not_before;
  RunField<int64_t> infra_faults;
  RunField<std::string> start_fault;
  RunField<int64_t> start_faults;
  RunField<std::string> gang_failure;
  RunField<int64_t> gang_failure_code;
  RunField<double> gang_failure_at;
  // A gang's assignment: the hosts of `attempt` by rank (run_hosts rows); empty for one host.
  std::vector<std::string> hosts;
};

// A run that reached a final state while ingesting, so the scheduler can free its slot.
struct RunEnded {
  int64_t run_id = 0;
  std::string agent_id;
  RunState state = RunState::kSucceeded;
  int attempt = 0;
  // A gang: the agents of every rank of that attempt (the caller frees them all and stops the
  // ranks still running); empty for a one-host run.
  std::vector<std::string> gang;
  int64_t experiment_id = 0;
  // Not ended yet: a gang's first failure is held (lifecycle::OnGangExit) while the others are
  // stopped and a lost host would make it the worker's fault. The caller stops the other ranks
  // and ends it when the window closes (lifecycle::OnGangWindowEnd).
  bool failure_held = false;
};

}  // namespace tae::model
