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
// A gang (hosts > 1) ends as one: when every rank exited 0, or when the first rank did not
// (failed or cancelled; an interrupted rank loses the whole gang, which is requeued together).

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

// Rank `rank` (on `agent`) of a gang exited; `clean_ranks` is how many ranks of this attempt
// have now exited 0, this one included, of `gang_size`. Nothing while the others still run.
std::optional<RunTransition> OnGangExit(const RunRecord& run, int rank, const std::string& agent,
                                        const Exit& exit, int clean_ranks, int gang_size);

// Whether a gang rank's exit was clean (exit 0, no signal, neither cancelled nor interrupted),
// and the exit code recorded for the rank in run_hosts.
bool CleanExit(const Exit& exit);
int RankExitCode(const Exit& exit);

// A run fails after this many attempts ended by workers' faults.
inline constexpr int kMaxInfraFaults = 20;

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
// OnRetry with as many attempts again as the run's spec gives (resources.max_attempts).
model::Decide Retry(std::string reason, double at);
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
