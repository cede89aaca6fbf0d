#pragma once

// Run lifecycle: every change of a run's state, decided by a pure function of the run as stored
// and what happened. Each returns the RunTransition to write (Store::Apply writes the runs row
// and its transition rows together), or nothing when the event changes nothing (a late or
// duplicate report, a run already final). No I/O, no clock: `at` is passed in. The controller
// hands them to the store bound to what happened (Assign, Lost, Finish, Retry, IngestRules at the
// end): the store reads the run, asks, and writes in one transaction.
//
//   queued --Assign--> assigned --Started--> running --Exit--> succeeded | failed | cancelled
//   running --Exit (failed, resources.retry_on = "any", attempts left)--> failed --> queued
//   assigned/running --Lost--> lost --> queued (after a backoff) | failed
//
// Faults are blamed on the right side (docs/reliability.md): a loss (the agent lost, shut down,
// revoked) and an exit the agent marks `infra` (the code could not be staged, the run directory
// or disk failed) are the worker's, never the job's: the run is requeued and the attempt does
// not count against resources.max_attempts. Only after kMaxInfraFaults such attempts does the
// run fail, or sooner when its start fails deterministically: the same fault (StartFaultKey) on
// the same agent, before the job ran, kMaxRepeatedStartFaults attempts in a row ends it failed
// with that cause. The job's own failure ends the run failed unless resources.retry_on = "any".
//   any non-final --Finish--> cancelled | failed
//   failed | cancelled | lost --Retry--> queued
//
// A gang (hosts > 1) ends as one: when every rank exited 0, or when a rank was cancelled, or is
// requeued as a whole when a rank was interrupted or its host lost. A rank's own failure is held
// first (OnGangExit), because on a multi-host job the loss of one host makes the others fail
// with collective errors long before the lost host is noticed: the failure ends the run only
// once every rank has reported (the agents that reported are alive), or when the blame window
// after it closes (OnGangWindowEnd) with no host lost; a host lost or interrupted before then
// makes it the worker's fault (requeued, not counted).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/decide.h"
#include "server/model/records.h"

namespace tae::lifecycle {

using model::RunRecord;
using model::RunState;
using model::RunTransition;

// How a job's process ended, as its agent reported it.
using Exit = model::RunExit;

// queued -> assigned on agents[0] (a gang: rank i on agents[i]); the attempt counts one up.
// FailedPrecondition unless the run is queued.
absl::StatusOr<RunTransition> OnAssign(const RunRecord& run, const std::vector<std::string>& agents,
                                       double at);

// assigned -> running as `pid` on `agent`, for the current attempt only.
std::optional<RunTransition> OnStarted(const RunRecord& run, int attempt, int64_t pid,
                                       const std::string& agent, double at);

// A one-host run's process exited. Ignored for a final or requeued run and for another attempt.
std::optional<RunTransition> OnExit(const RunRecord& run, const Exit& exit);

// Rank `rank` (on `agent`) of a gang exited; `tally` counts this attempt's ranks that have now
// exited, this one included. Nothing while the others still run. The first rank that fails of
// its own accord is held, not ended: the transition keeps the run's state and records the
// failure (gang_failure, its code and time) for OnGangWindowEnd, and the caller stops the other
// ranks. The held failure ends the run once every rank has exited; a later interrupted rank or
// lost host requeues it instead (OnLost says why).
std::optional<RunTransition> OnGangExit(const RunRecord& run, int rank, const std::string& agent,
                                        const Exit& exit, const model::GangTally& tally);

// The window after a gang's held failure closed (at >= gang_failure_at + window_s) and no host
// was lost: the failure is the job's, and ends the run failed (or requeued by retry_on = "any").
// Nothing for a run without a held failure, or before then.
std::optional<RunTransition> OnGangWindowEnd(const RunRecord& run, double at, double window_s);

// Whether a gang rank's exit was clean (exit 0, no signal, neither cancelled nor interrupted),
// and the exit code recorded for the rank in run_hosts.
bool CleanExit(const Exit& exit);
int RankExitCode(const Exit& exit);

// A run fails after this many attempts ended by workers' faults.
inline constexpr int kMaxInfraFaults = 20;

// A run hurt by another job on its worker (it filled the disk) waits this long before its next
// attempt, doubling with each such fault up to kOtherJobRetryMaxS: the other job may hold the
// disk a while, and the run must not spend its kMaxInfraFaults meanwhile.
inline constexpr double kOtherJobRetryS = 1;
inline constexpr double kOtherJobRetryMaxS = 120;
double OtherJobRetryDelay(const RunRecord& run);

// assigned/running -> lost -> queued (not before at + retry_delay_s; the attempt not counted
// against max_attempts) or, after kMaxInfraFaults, failed. Nothing for a run in any other state.
std::optional<RunTransition> OnLost(const RunRecord& run, const std::string& reason, double at,
                                    double retry_delay_s = 0);

// A start fault repeated this many attempts in a row (the same StartFaultKey) fails the run:
// it would fail the same way again. It is also where an agent's quarantine starts
// (controller::kQuarantineAfter), so a run on a lone broken agent ends instead of waiting.
inline constexpr int kMaxRepeatedStartFaults = 2;

// What makes two start faults the same: the agent, and the cause with every number in it
// written '#' (pids, attempt numbers and run ids in paths differ between attempts).
std::string StartFaultKey(const std::string& agent, const std::string& cause);

// The worker failed attempt run.attempt on `agent` before the job's program ran (`cause`): like
// OnLost, unless the same start fault ended the attempts before it, kMaxRepeatedStartFaults in
// all: then lost -> failed with the cause.
std::optional<RunTransition> OnStartFault(const RunRecord& run, const std::string& agent,
                                          const std::string& cause, double at);

// A non-final run straight to `to` (cancelled or failed). Nothing for a final run.
std::optional<RunTransition> OnFinish(const RunRecord& run, RunState to, const std::string& reason,
                                      double at);

// failed / cancelled / lost -> queued with `budget` more attempts (resources.max_attempts).
// Nothing for a succeeded or unfinished run.
std::optional<RunTransition> OnRetry(const RunRecord& run, const std::string& reason, double at,
                                     int budget);

// The deciders above, bound to what happened, as the store takes them (server/model/decide.h).
// queued -> assigned (OnAssign; a gang's hosts by rank go into the transition's `hosts`).
model::Decide Assign(std::vector<std::string> agents, double at);
// OnLost.
model::Decide Lost(std::string reason, double at, double retry_delay_s = 0);
// OnFinish.
model::Decide Finish(RunState to, std::string reason, double at);
// OnGangWindowEnd.
model::Decide GangWindowEnd(double at, double window_s);
// OnRetry with as many attempts again as the run's spec gives (resources.max_attempts).
model::Decide Retry(std::string reason, double at);
// A queued run held until a decision (not_before = model::kHeldNotBefore: scale.stop_if)
// released: it may start now, `reason` its runs row's; nothing for any other run.
model::Decide Release(std::string reason, double at);
// OnStarted, OnExit, OnGangExit and RankExitCode, for Store::Ingest.
const model::IngestRules& IngestRules();

// Who may write into a run (docs/security.md): an agent's events, logs, checkpoints and
// artifacts for attempt `attempt` of `run` are taken only when it is a host of the run's current
// attempt (`hosts`: AgentsOf(run)) and that attempt is live (assigned or running), or ended
// (final) at most `tail_s` before `now`: the last lines and a profile that follow an exit or a
// cancel. Everything else (another agent's run, an attempt the run has moved past, a run that
// was requeued) is refused.
bool MayReport(const RunRecord& run, const std::vector<std::string>& hosts,
               const std::string& agent, int attempt, double now, double tail_s);

// Checkpoints: the same rule with its own tail (an upload of a large final checkpoint may take a
// while after the job exited). What it never allows is a checkpoint of an attempt the run has
// left for the queue, so a stale commit can never replace (or, through keep_checkpoints, delete)
// what a later attempt restores from.
bool MayCheckpoint(const RunRecord& run, const std::vector<std::string>& hosts,
                   const std::string& agent, int attempt, double now, double tail_s);

// Who may read from a run (docs/security.md): its code snapshot and its checkpoints go only to
// a host of its current attempt (`hosts`: AgentsOf(run)) while that attempt is live.
bool MayRead(const RunRecord& run, const std::vector<std::string>& hosts, const std::string& agent);

}  // namespace tae::lifecycle
