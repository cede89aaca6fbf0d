#pragma once

// Controller: what changes runs' state goes through here (agent events, Control requests,
// lost agents). Which transition a run takes is decided by server/lifecycle's pure functions and
// written by Store::Apply; the controller owns the agent registry, runs the scheduler, and
// turns Control requests and agent events into Store transactions and messages to agents. It is
// the write side: what the adapters show is read by server/query, never through here. Every
// method runs on taed's core thread (checked: a call from another thread aborts;
// docs/threading.md); nothing here blocks on the network.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/clock/clock.h"
#include "common/log/limiter.h"
#include "common/thread/owner.h"
#include "server/controller/demand.h"
#include "server/controller/queue_cache.h"
#include "server/provider/demand.h"
#include "server/provider/provider_log.h"
#include "server/registry/credentials.h"
#include "server/registry/placement.h"
#include "server/registry/registry.h"
#include "server/search/asha.h"
#include "server/store/store.h"

namespace tae::controller {

struct Options {
  double agent_grace_s = 30;  // a lost agent's runs are requeued after this long
  // A run lost with its agent (crash, preemption) waits retry_backoff_s * 2^(attempt - 1) seconds,
  // at most retry_backoff_max_s, before its next attempt; runs stopped by an agent shutting down
  // are requeued at once.
  double retry_backoff_s = 10;
  double retry_backoff_max_s = 300;
  // An agent heard from (any message, heartbeats every 5 s) less recently than this is treated
  // as disconnected, e.g. a SIGSTOPed process whose connection stays open.
  double agent_timeout_s = 20;
  // The wall clock (seconds since the epoch) every decision reads; empty: the system clock.
  // Tests pass a fixed one to assert exact times.
  std::function<double()> clock;
  // TPU pools: after every scheduling pass and liveness check the controller publishes what they
  // are wanted for (TpuDemandOf) to `demand`, which the provider's thread reads without waiting.
  std::vector<DemandPool> demand_pools;
  provider::DemandBoard* demand = nullptr;
  // A checkpoint larger than this is refused; 0: no cap.
  int64_t max_checkpoint_bytes = 0;
  // The agent link's credential table (server/registry/credentials.h), which Enrol, the
  // providers' keys and Revoke keep current; loaded from the store at construction. Null: agent
  // identity is not tracked (unit tests of other parts).
  registry::CredentialTable* credentials = nullptr;
  // How long after a run's attempt ended its agent's last lines and artifacts are still taken
  // (lifecycle::MayReport).
  double report_tail_s = 60;
  // The same for a checkpoint's offer and commit (a large final checkpoint uploads after its
  // job exited).
  double checkpoint_tail_s = 3600;
  // How long a gang's first failure is held for a host of it to be found lost (which makes the
  // failure the worker's; lifecycle::OnGangExit). 0: long enough for a silent host to be
  // declared lost: agent_timeout_s + agent_grace_s + 10 s.
  double gang_blame_window_s = 0;
};

// A checkpoint an agent offers or commits (its manifest parsed by the caller).
struct CheckpointOffer {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t step = 0;
  std::string manifest_id;  // SHA-256 of manifest
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  std::vector<std::string> hashes;  // distinct
  std::string artifact;             // set: a run artifact of this name (docs/profiles.md)
};

// A commit's answer when `missing` of its `of` blobs are not stored, or not shown held: the same
// words either way.
absl::Status UnstoredBlobs(size_t missing, size_t of);

// Which checkpoints a scrap removes (ScrapInput's ids name runs "r12" or experiments).
struct CheckpointScrap {
  std::vector<std::string> removed;  // "r12 step 40" (dry run: would be)
  std::vector<std::string> kept;     // "r12: why"
  int checkpoints = 0;
  // Every blob a remaining checkpoint names: garbage collection removes all others (also those
  // of an upload that never committed).
  std::set<std::string> referenced;
};

// Profiles on demand (controller_profiles.cc; docs/profiles.md).
enum class ProfileState { kPending, kDone, kFailed };

struct ProfileTicket {
  std::string id;        // "p3f9a2c"
  std::string artifact;  // "profile-p3f9a2c"
};

struct ProfileStatus {
  ProfileState state = ProfileState::kPending;
  std::string error;                 // kFailed
  model::CheckpointRecord artifact;  // kDone (with its manifest)
};

struct SubmitInput {
  std::string spec_text;
  std::string spec_path;
  std::vector<std::string> overrides;
  bool force_new = false;
  std::string snapshot_id;  // of the spec's [job] code, mounted by taectl
};

struct SubmitResult {
  int64_t experiment_id = 0;
  bool existing = false;
};

struct ScrapInput {
  std::vector<std::string> ids;  // full ids or unique prefixes (>= 8 hex digits)
  bool all = false;
  double older_than_s = 0;  // > 0: those created longer ago than this
  bool dry_run = false;
  bool artifacts = false;  // ScrapCheckpoints: the runs' artifacts instead of checkpoints
};

struct ScrapPlan {
  std::vector<std::string> removed;  // ids removed (dry run: that would be)
  std::vector<std::string> kept;     // "id: why"
  // Every blob hash a remaining snapshot references: garbage collection keeps these.
  std::set<std::string> referenced;
  int agents_notified = 0;
};

// What an agent says when it (re)connects.
struct AgentHello {
  registry::Agent agent;                      // id, host, slots, labels, version
  std::vector<std::pair<int64_t, int>> held;  // (run id, attempt) it still supervises
};

class Controller {
 public:
  Controller(boost::asio::io_context* io, store::Store* store, Options options);

  // Control API.
  absl::StatusOr<SubmitResult> Submit(const SubmitInput& input);
  // target: "r57" (a run) or an experiment reference. Returns how many runs were affected.
  absl::StatusOr<int> Cancel(const std::string& target, const std::string& reason);
  // Pause: the experiment's queued runs stay queued (running ones go on); resume undoes it.
  // Returns the experiment's id.
  absl::StatusOr<int64_t> SetPaused(const std::string& experiment, bool paused);
  // Requeues the experiment's failed, cancelled and lost runs (never succeeded or unfinished ones),
  // keeping their history. Returns how many.
  absl::StatusOr<int> Retry(const std::string& experiment);
  // A drained agent takes no new runs; its running runs finish. drain = false undoes it and
  // lifts a quarantine.
  absl::Status Drain(const std::string& agent_id, bool drain);
  // Records the snapshot `id`: `fresh` (its blobs checked by the caller) unless a snapshot with
  // that id exists. Returns whether it existed; NotFound when it does not and `fresh` is empty.
  absl::StatusOr<bool> AddSnapshot(const std::string& id,
                                   const std::optional<model::SnapshotRecord>& fresh);
  // Removes snapshots (not those of queued or running runs) and tells every connected agent to
  // drop them from its cache. Blob garbage collection is the caller's (on the blob thread).
  absl::StatusOr<ScrapPlan> Scrap(const ScrapInput& input);

  // Checkpoints (controller_checkpoints.cc; docs/checkpoints.md). The caller moves blobs.
  // OK when taed takes `offer`: the run exists, `attempt` is its current one (an older one is
  // FailedPrecondition: superseded), it keeps checkpoints, and the size is within the cap. An
  // artifact is also taken for report_tail_s after the attempt ended.
  // `agent`: the caller, which must be a host of the run's current, live attempt
  // (lifecycle::MayCheckpoint; an artifact: lifecycle::MayReport); PermissionDenied otherwise.
  absl::Status CheckCheckpoint(const CheckpointOffer& offer, const std::string& agent);
  // The offer's blobs that none of its run's complete checkpoints or artifacts names: those the
  // agent must upload (UploadGrants) to show it holds them, stored already or not.
  absl::StatusOr<std::vector<std::string>> NewBlobs(const CheckpointOffer& offer);
  // CheckCheckpoint, then records it incomplete; returns its id (the caller verifies its blobs).
  // Every blob in NewBlobs must be in `held` (the hashes the agent uploaded in full); one that is
  // not gets FailedPrecondition, the answer of a blob that is not stored, so a commit cannot
  // claim a blob another run stored by naming its hash (and then fetch it).
  absl::StatusOr<int64_t> BeginCheckpoint(const CheckpointOffer& offer, const std::string& agent,
                                          const std::set<std::string>& held);
  // Its blobs are all stored: it is offered from now on; older ones beyond the run's
  // keep_checkpoints go. Returns what went.
  absl::StatusOr<model::CheckpointsDropped> CompleteCheckpoint(int64_t run_id, int64_t id);
  // Its blobs are not all stored: forgotten.
  absl::Status AbandonCheckpoint(int64_t id);
  // Of `hashes` (blobs whose upload grants expired), those no checkpoint row names: stored by an
  // upload no commit followed, for the caller to remove.
  absl::StatusOr<std::vector<std::string>> UncommittedBlobs(const std::vector<std::string>& hashes);
  // Removes checkpoints: of the named runs or experiments, all, or older than older_than_s;
  // without named runs, those of queued or running runs stay.
  absl::StatusOr<CheckpointScrap> ScrapCheckpoints(const ScrapInput& input);

  // Profiles (controller_profiles.cc; docs/profiles.md).
  // Asks the job of running run `run_id` (its rank 0) for a profile over `steps` steps or
  // `seconds` seconds (neither: 5 steps). FailedPrecondition when the run is not running or
  // already has a request unanswered, Unavailable when its agent is not connected.
  absl::StatusOr<ProfileTicket> RequestProfile(int64_t run_id, int steps, double seconds);
  // Where request `id` is: done once its artifact is stored; failed when the job or agent said
  // so or the attempt ended (30 s before, without the artifact); NotFound when taed does not
  // know it.
  absl::StatusOr<ProfileStatus> GetProfile(int64_t run_id, const std::string& id);
  // Reads are bound like writes: an agent reads only the snapshots and checkpoints of the runs
  // it holds for their current attempt (lifecycle::MayRead). A snapshot or blob it may not read
  // and one that does not exist get the same answer, NotFound with the same text, so the answer
  // tells nothing about other runs.
  absl::Status MayReadSnapshot(const std::string& agent_id, const std::string& snapshot_id);
  // Every hash must name a file of a snapshot (checkpoints: of the newest checkpoint) of such a
  // run.
  absl::Status MayFetchBlobs(const std::string& agent_id, bool checkpoints,
                             const std::vector<std::string>& hashes);
  // The agent could not get the profile (no such run on it, the job refused). Taken only from a
  // host of the run's attempt (lifecycle::MayReport); anyone else's is ignored and logged.
  void OnProfileFailed(const std::string& agent_id, int64_t run_id, int attempt,
                       const std::string& id, const std::string& error);

  // A provider's last listing of a pool's slices (gke): shown by `taectl agents` and the
  // dashboard, and in the reasons of the runs that wait for them (a pass runs when they change).
  void SetPoolSlices(const std::string& pool, std::vector<provider::CloudVm> slices);

  const registry::AgentRegistry& registry() const { return registry_; }
  provider::ProviderLog* provider_log() { return &provider_log_; }
  // Store writes that failed where there is no caller to return the error to (logged each time).
  int64_t unreported_store_failures() const { return store_failures_; }
  // Events refused because their agent may not report on that run (see OnEvents).
  int64_t refused_events() const { return refused_events_; }

  // Agent identity (controller_identity.cc; docs/security.md).
  // A new agent presenting the shared enrolment token: its credential "ID.SECRET". An id that
  // holds a credential already (AlreadyExists) or was revoked (PermissionDenied) is refused,
  // as is an id that is not 1-128 of [A-Za-z0-9._:-].
  // request_id: the same for every retry of one enrolment (empty: none); a retry within
  // kEnrolRetryS of the first answer gets a fresh credential (the lost one stops working).
  // Ids are compared without case: `LOCAL-0` beside `local-0` is refused.
  absl::StatusOr<std::string> Enrol(const std::string& agent_id,
                                    const std::string& request_id = "");
  static constexpr double kEnrolRetryS = 600;
  // A provider starting agent `agent_id`: a fresh credential, replacing any earlier one (a
  // recreated VM comes back under its id). PermissionDenied for a revoked id.
  // `how` is what it is minted for: "provider" (an agent taed starts and supervises, which never
  // outlives taed) or "gke" (a slice's pod, which may).
  // `placement`: the placement labels the provider gives the agent, which it must register with
  // (server/registry/placement.h).
  absl::StatusOr<std::string> MintCredential(const std::string& agent_id,
                                             const std::string& how = "provider",
                                             const registry::PlacementLabels& placement = {});
  // Credentials that die with what they were minted for: every live one minted as `how`, or with
  // `ids` only those of them, stops working at once (its streams end) without the agent being
  // revoked: a provider may mint the id a new one later. "provider" ones at taed's start and
  // clean stop (their agents died or stop with taed); a gke slice's when it is deleted. Returns
  // how many were retired.
  int RetireCredentials(const std::string& how, const std::vector<std::string>& ids,
                        const std::string& reason);
  // Locks the agent out: its credential stops working, its link closes, its runs are requeued
  // (without spending their attempts' user budget), and its id cannot enrol again. Returns how
  // many runs went back to the queue.
  absl::StatusOr<int> Revoke(const std::string& agent_id, const std::string& reason);

  // Agent link.
  void OnRegister(std::shared_ptr<registry::AgentChannel> channel, AgentHello hello);
  // Events that arrived on `channel`; acks go back on it. Batches from a stream the agent has
  // since replaced are still stored (idempotently) but not acked there. Only the events the
  // agent may report (lifecycle::MayReport) are stored; the others are dropped, logged and
  // counted (refused_events()), and still acked so the agent does not resend them.
  absl::Status OnEvents(const std::string& agent_id, registry::AgentChannel* channel,
                        const std::vector<model::IngestEvent>& events, uint64_t last_seq);
  void OnHeartbeat(const std::string& agent_id);
  // The agent cannot go on (its work dir or journal cannot be written) and stops: it is
  // quarantined and its runs are requeued at once, their attempts not counted.
  void OnAgentFault(const std::string& agent_id, const std::string& reason);
  // The agent is shutting down: nothing more is placed on it until it registers again.
  void OnDraining(const std::string& agent_id);
  void OnDisconnected(const std::string& agent_id, const registry::AgentChannel* channel);

  // At start-up: runs left assigned/running by a previous taed get the grace period to be
  // re-claimed by their agent.
  void Recover();
  // Places queued runs on free agent slots, then publishes the TPU pools' demand.
  void Schedule();

  // options_.clock, or WallNow(). Any thread: it reads only the clock fixed at construction.
  double Now() const;

 private:
  // Refused registrations are logged once a minute per agent id.
  log::LineLimiter registration_refusals_{60.0, 1024};
  // A store write whose failure has no caller to go to: logged with `what`, and counted.
  void Noted(const absl::Status& status, const char* what);
  // Adaptive seeds: the experiments a run of which ended since the last Schedule(); it asks
  // server/seeds what each adds and adds it in one transaction.
  // search.confirm (server/seeds/confirm.h) takes the same path: once the search is over, the
  // experiment's next pass adds the confirmation runs.
  void SeedsDue(int64_t experiment_id) { seeds_due_.insert(experiment_id); }
  void AddDueSeeds();
  // scale.stop_if: the experiments a run of which ended since the last Schedule(); once the
  // first K rungs of one have ended, report::PlanScaleStop decides which ablations skip their
  // larger rungs (their held runs end pruned) and the rest are released (controller_scale.cc).
  void DecideDueLadders();
  void DecideLadder(int64_t experiment_id);
  void GrowSeeds(int64_t experiment_id);
  // Runs at new seeds, each a copy of a run's config at its seed (spec::ConfigAtSeed), added in
  // one transaction.
  struct SeedsToAdd {
    std::string variant;
    std::vector<int64_t> seeds;
    int64_t like_run = 0;  // the run whose config each copies
    std::string reason;    // the first transition's
    bool confirm = false;  // confirmation runs (RunRecord::confirm)
  };
  void AddRunsAtSeeds(int64_t experiment_id, const model::ExperimentSource& source,
                      const std::vector<model::RunRecord>& runs,
                      const std::vector<SeedsToAdd>& adds);
  // A run of `experiment_id` reached a final state: adaptive seeds and the search hear of it.
  void RunFinal(int64_t run_id, int64_t experiment_id);
  // [search] method = "asha" (controller_search.cc): an experiment's server/search::GridSearch,
  // fed every stored point of its metric and every run's end; its decisions are stored with
  // their effect (pruned runs end in `pruned`, and their agents are told to stop them).
  // `replay`: after a restart, the stored decisions are restored and the stored points replayed.
  void StartSearch(int64_t experiment_id, bool replay);
  void ObserveSearch(const std::vector<model::IngestEvent>& events);
  void EndSearchRun(int64_t run_id);
  void ApplySearch(int64_t experiment_id, std::vector<search::Decision> decisions);
  // Schedule's first half: the scheduler's decision, carried out.
  // Brings queue_ up to date with the store's changes; false (and logged) when it cannot read
  // them, and the next call reads the queue whole.
  bool RefreshQueue();
  void PlaceQueued();
  // Gangs whose first failure is held (lifecycle::OnGangExit): those whose window has closed
  // end now (lifecycle::OnGangWindowEnd); a wake-up is set for the next.
  void EndHeldGangs();
  double GangBlameWindow() const;
  // Computes the TPU pools' demand and publishes it (when there is a board).
  void PublishDemand();
  void StartGraceTimer(const std::string& agent_id);
  void CheckLiveness();
  // Packs the series of ended runs (Store::PackSome), then writes the column files of ended
  // experiments (Store::ColumnSome), a slice of about kPackSliceS at a time,
  // with as long a pause between, while any is due: ingest and the rest of the core's work never
  // wait for a whole study's packing. Started at Recover and whenever the store has packs due
  // (MaybePack, after ingest and scheduling).
  void PackSlice();
  void MaybePack();
  static constexpr double kPackSliceS = 0.05;
  // Runs Schedule() at `at` (wall time) unless a wake-up is already due by then.
  void WakeAt(double at);
  double RetryDelay(int attempt) const;
  void LoseUnclaimedRuns(const std::string& agent_id, const std::string& reason);
  // Keeps the agent from taking runs until `taectl agents undrain` (stored: survives restarts).
  void Quarantine(const std::string& agent_id, const std::string& why);
  // Counts the infrastructure faults among an agent's run exits; quarantines it after
  // kQuarantineAfter in a row (a clean exit starts the count again).
  void CountInfraFaults(const std::string& agent_id, const std::vector<model::IngestEvent>& events);
  // A new secret for the agent, stored (its hash) and put in the credential table; returns the
  // credential "ID.SECRET". `how`: "token" or "provider".
  // nullopt `placement`: bound at the agent's first registration (an enrolment).
  absl::StatusOr<std::string> IssueCredential(
      const std::string& agent_id, const std::string& how,
      const std::optional<registry::PlacementLabels>& placement = std::nullopt);
  // Whether the agent may register with its declared slots and labels (registry::
  // JudgeRegistration against what the store holds); binds an enrolled agent's placement labels
  // at its first registration.
  absl::Status JudgeRegistration(const registry::Agent& agent);
  // The events of `events` that `agent_id` may report (lifecycle::MayReport), logging the
  // others: nullopt when it may report them all (the batch as it is: no copy of 12,000 values on
  // the core), else a copy of those it may.
  std::optional<std::vector<model::IngestEvent>> OwnEvents(
      const std::string& agent_id, const std::vector<model::IngestEvent>& events);
  // "r57" (that run) or an experiment reference (its runs).
  absl::StatusOr<std::vector<model::RunRecord>> RunsOfTarget(const std::string& target);
  absl::Status CancelRun(const model::RunRecord& run, const std::string& reason);
  // The agents of the run's current attempt (a gang's, by rank).
  std::vector<std::string> AgentsOfRun(const model::RunRecord& run);
  // The runs `agent_id` may read from (lifecycle::MayRead), among those placed on it.
  std::vector<model::RunRecord> ReadableRuns(const std::string& agent_id);
  // Asks every connected agent of `agents` but `except` to stop the attempt. Returns how many
  // were asked.
  int StopRanks(int64_t run_id, int attempt, const std::vector<std::string>& agents,
                const std::string& except, const std::string& reason);
  // Frees the run's slots on `agents`.
  void Release(int64_t run_id, const std::vector<std::string>& agents);

  thread::ThreadOwner core_;  // every public method runs on taed's core thread (checked)
  boost::asio::io_context* io_;
  store::Store* store_;
  Options options_;
  registry::AgentRegistry registry_;
  QueueCache queue_;  // the scheduler's view of the queue (RefreshQueue)
  provider::ProviderLog provider_log_;
  struct PendingProfile {
    int64_t run_id = 0;
    int attempt = 0;
    double requested_at = 0;
    double ended_seen_at = 0;  // when GetProfile first saw the attempt over
    ProfileState state = ProfileState::kPending;
    std::string error;
  };
  std::map<std::string, PendingProfile> profiles_;  // by request id
  double wake_at_ = 0;                              // when the pending wake-up timer fires; 0: none
  int64_t store_failures_ = 0;
  // Enrolments by the token in this process's life: id -> SHA-256 of its request_id, when.
  std::map<std::string, std::pair<std::string, double>> enrolments_;
  int64_t refused_events_ = 0;
  boost::asio::steady_timer liveness_timer_;
  boost::asio::steady_timer pack_timer_;
  bool packing_ = false;  // a PackSlice is due on pack_timer_
  std::set<int64_t> seeds_due_;
  std::set<int64_t> ladders_due_;
  // Per experiment, what adaptive seeds or search.confirm last held back (logged when it changes).
  std::map<int64_t, std::string> seeds_held_;
  struct ActiveSearch {
    std::unique_ptr<search::GridSearch> search;
    std::string metric;
    std::map<int64_t, int64_t> last_step;  // run -> its highest stored step of the metric
  };
  std::map<int64_t, ActiveSearch> searches_;  // by experiment, while it is searched
  std::map<int64_t, int64_t> search_of_run_;  // run -> its experiment, for searched runs
  std::set<int64_t> held_gangs_;              // runs whose gang failure is held
};

// An agent whose runs' attempts end by its own fault this many times in a row is quarantined.
inline constexpr int kQuarantineAfter = 2;

// Seconds since the Unix epoch (common/clock).
using clock::WallNow;

// The rendezvous port of a gang's attempt: 20000 + (run_id * 8 + attempt) mod 30000.
int MasterPort(int64_t run_id, int attempt);

}  // namespace tae::controller
