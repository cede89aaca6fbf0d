#include "server/lifecycle/lifecycle.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tae::lifecycle {
namespace {

using model::IsFinal;
using model::RunField;

RunTransition Begin(const RunRecord& run, int attempt, double at) {
  RunTransition t;
  t.run_id = run.id;
  t.attempt = attempt;
  t.at = at;
  return t;
}

// The one-row transition that ends an attempt in `to` with the process's exit code.
RunTransition End(const RunRecord& run, RunState to, const std::string& reason, int exit_code,
                  double at) {
  RunTransition t = Begin(run, run.attempt, at);
  t.rows.push_back({run.state, to, reason});
  t.state = to;
  t.reason = RunField<std::string>::Set(reason);
  t.exit_code = RunField<int64_t>::Set(exit_code);
  t.finished_at = RunField<double>::Set(at);
  return t;
}

std::string ExitText(const Exit& exit) {
  if (!exit.text.empty()) {
    return exit.text;
  }
  return exit.signal != 0 ? absl::StrCat("killed by signal ", exit.signal)
                          : absl::StrCat("exit code ", exit.exit_code);
}

// An exit report that still matters: the run's current attempt, not final, not requeued (a late
// exit of one of a requeued gang's ranks must not end the run).
bool Current(const RunRecord& run, int attempt) {
  return !IsFinal(run.state) && run.state != RunState::kQueued && run.attempt == attempt;
}

// A job's own failure, retried when the run asks for it (resources.retry_on = "any") and has
// attempts left; nothing otherwise.
std::optional<RunTransition> RetryJobFailure(const RunRecord& run, const std::string& reason,
                                             int exit_code, double at) {
  if (run.retry_on != "any" || run.attempt >= run.max_attempts) {
    return std::nullopt;
  }
  const std::string next = absl::StrCat(
      "retrying the job's failure (resources.retry_on = any; "
      "attempt ",
      run.attempt, " of ", run.max_attempts, " spent)");
  RunTransition t = Begin(run, run.attempt, at);
  t.rows.push_back({run.state, RunState::kFailed, reason});
  t.rows.push_back({RunState::kFailed, RunState::kQueued, next});
  t.state = RunState::kQueued;
  t.reason = RunField<std::string>::Set(next);
  t.exit_code = RunField<int64_t>::Set(exit_code);
  t.not_before = RunField<double>::Set(0.0);
  return t;
}

}  // namespace

absl::StatusOr<RunTransition> OnAssign(const RunRecord& run, const std::vector<std::string>& agents,
                                       double at) {
  if (agents.empty()) {
    return absl::InvalidArgumentError("assign: no agents");
  }
  if (run.state != RunState::kQueued) {
    return absl::FailedPreconditionError(
        absl::StrCat("run r", run.id, " is ", model::ToString(run.state), ", not queued"));
  }
  RunTransition t = Begin(run, run.attempt + 1, at);
  t.rows.push_back({RunState::kQueued, RunState::kAssigned,
                    agents.size() > 1 ? absl::StrCat("placed on ", absl::StrJoin(agents, ", "),
                                                     " (ranks 0..", agents.size() - 1, ")")
                                      : absl::StrCat("placed on ", agents[0])});
  t.state = RunState::kAssigned;
  t.reason = RunField<std::string>::Set("");
  t.attempt_column = RunField<int64_t>::Set(run.attempt + 1);
  t.agent_id = RunField<std::string>::Set(agents[0]);
  t.pid = RunField<int64_t>::Set(0);
  t.exit_code = RunField<int64_t>::Null();
  t.gang_failure = RunField<std::string>::Set("");
  if (agents.size() > 1) {
    t.hosts = agents;
  }
  return t;
}

std::optional<RunTransition> OnStarted(const RunRecord& run, int attempt, int64_t pid,
                                       const std::string& agent, double at) {
  if (run.state != RunState::kAssigned || run.attempt != attempt) {
    return std::nullopt;
  }
  RunTransition t = Begin(run, attempt, at);
  t.rows.push_back(
      {run.state, RunState::kRunning, absl::StrCat("started as pid ", pid, " on ", agent)});
  t.state = RunState::kRunning;
  t.pid = RunField<int64_t>::Set(pid);
  t.started_at = RunField<double>::Set(at);
  if (run.start_faults > 0) {  // the job ran: a start fault after this one is not "in a row"
    t.start_fault = RunField<std::string>::Set("");
    t.start_faults = RunField<int64_t>::Set(0);
  }
  return t;
}

std::optional<RunTransition> OnExit(const RunRecord& run, const Exit& exit) {
  if (!Current(run, exit.attempt)) {
    return std::nullopt;
  }
  if (exit.infra && exit.not_started && !exit.interrupted && !exit.cancelled) {
    return OnStartFault(run, run.agent_id, exit.text, exit.at);
  }
  if ((exit.interrupted || exit.infra) && !exit.cancelled) {
    return OnLost(run, exit.text.empty() ? "interrupted" : exit.text, exit.at,
                  exit.infra && exit.by_other_job ? OtherJobRetryDelay(run) : 0);
  }
  const RunState to = exit.cancelled        ? RunState::kCancelled
                      : exit.exit_code == 0 ? RunState::kSucceeded
                                            : RunState::kFailed;
  if (to == RunState::kFailed) {
    if (std::optional<RunTransition> retry =
            RetryJobFailure(run, ExitText(exit), exit.exit_code, exit.at)) {
      return retry;
    }
  }
  return End(run, to, ExitText(exit), exit.exit_code, exit.at);
}

bool CleanExit(const Exit& exit) {
  return !exit.interrupted && !exit.infra && !exit.cancelled && exit.exit_code == 0 &&
         exit.signal == 0;
}

int RankExitCode(const Exit& exit) {
  return CleanExit(exit) ? 0 : (exit.exit_code != 0 ? exit.exit_code : -1);
}

namespace {

// Ends a gang's attempt with its held failure: the job's own, unless retried by retry_on = any.
RunTransition EndHeldFailure(const RunRecord& run, const std::string& how, double at) {
  const std::string reason = absl::StrCat(run.gang_failure, how);
  if (std::optional<RunTransition> retry =
          RetryJobFailure(run, reason, run.gang_failure_code, at)) {
    retry->gang_failure = RunField<std::string>::Set("");
    return *retry;
  }
  RunTransition t = End(run, RunState::kFailed, reason, run.gang_failure_code, at);
  t.gang_failure = RunField<std::string>::Set("");
  return t;
}

}  // namespace

std::optional<RunTransition> OnGangExit(const RunRecord& run, int rank, const std::string& agent,
                                        const Exit& exit, const model::GangTally& tally) {
  if (!Current(run, exit.attempt)) {
    return std::nullopt;
  }
  const bool all_exited = tally.exited >= tally.size;
  const std::string host = absl::StrCat("rank ", rank, " on ", agent);
  if (exit.infra && exit.not_started && !exit.interrupted && !exit.cancelled) {
    return OnStartFault(run, agent, absl::StrCat(host, ": ", exit.text), exit.at);
  }
  if ((exit.interrupted || exit.infra) && !exit.cancelled) {
    // One host went away with its agent, or its worker failed it: the whole gang goes back to
    // the queue together.
    return OnLost(run, absl::StrCat(host, ": ", exit.text.empty() ? "interrupted" : exit.text),
                  exit.at, exit.infra && exit.by_other_job ? OtherJobRetryDelay(run) : 0);
  }
  if (!run.gang_failure.empty()) {
    // A failure is held: the others were asked to stop (their exits say cancelled) or fail in
    // turn. Every rank has reported, so every host is alive: the failure is the job's.
    return all_exited ? std::optional<RunTransition>(EndHeldFailure(
                            run, absl::StrCat(" (all ", tally.size, " hosts reported)"), exit.at))
                      : std::nullopt;
  }
  if (exit.cancelled) {
    return End(run, RunState::kCancelled,
               absl::StrCat(host, ": ", exit.text.empty() ? "cancelled" : exit.text),
               exit.exit_code, exit.at);
  }
  if (!CleanExit(exit)) {
    RunRecord held = run;
    held.gang_failure = absl::StrCat(host, ": ", ExitText(exit), "; the other hosts are stopped");
    held.gang_failure_code = exit.exit_code;
    held.gang_failure_at = exit.at;
    if (all_exited) {
      return EndHeldFailure(held, "", exit.at);
    }
    RunTransition t = Begin(run, run.attempt, exit.at);
    t.state = run.state;
    t.reason = RunField<std::string>::Set(
        absl::StrCat(held.gang_failure, "; waiting for them to report (a host lost meanwhile ",
                     "makes it the worker's fault)"));
    t.gang_failure = RunField<std::string>::Set(held.gang_failure);
    t.gang_failure_code = RunField<int64_t>::Set(exit.exit_code);
    t.gang_failure_at = RunField<double>::Set(exit.at);
    return t;
  }
  if (tally.clean < tally.size) {
    return std::nullopt;  // the others are still running
  }
  return End(run, RunState::kSucceeded,
             absl::StrCat("every host exited 0 (", tally.size, " hosts)"), exit.exit_code, exit.at);
}

std::optional<RunTransition> OnGangWindowEnd(const RunRecord& run, double at, double window_s) {
  if (run.gang_failure.empty() ||
      (run.state != RunState::kAssigned && run.state != RunState::kRunning) ||
      at < run.gang_failure_at + window_s) {
    return std::nullopt;
  }
  return EndHeldFailure(
      run,
      absl::StrFormat(" (no host lost within %.0f s; the hosts that did not report were "
                      "stopped)",
                      window_s),
      at);
}

double OtherJobRetryDelay(const RunRecord& run) {
  return std::min(kOtherJobRetryMaxS,
                  kOtherJobRetryS * static_cast<double>(1 << std::min(run.infra_faults, 8)));
}

std::optional<RunTransition> OnLost(const RunRecord& run, const std::string& reason, double at,
                                    double retry_delay_s) {
  if (run.state != RunState::kAssigned && run.state != RunState::kRunning) {
    return std::nullopt;
  }
  // The worker's fault, not the job's: the attempt does not count against max_attempts. Only a
  // run that keeps meeting broken workers ends, after kMaxInfraFaults of them.
  const bool retry = run.infra_faults < kMaxInfraFaults;
  const RunState next = retry ? RunState::kQueued : RunState::kFailed;
  const std::string next_reason =
      retry ? absl::StrCat(
                  "requeued: attempt ", run.attempt,
                  " ended by the worker, not the job (not counted against max_attempts)",
                  retry_delay_s > 0 ? absl::StrFormat("; retry in %.0fs", retry_delay_s) : "")
            : absl::StrCat("failed after ", kMaxInfraFaults,
                           " attempts ended by workers' faults; the last: ", reason);
  RunTransition t = Begin(run, run.attempt, at);
  // A gang's failure held before its host was lost is put down to the loss (collective errors
  // on the other hosts are what a lost host causes).
  t.rows.push_back(
      {run.state, RunState::kLost,
       run.gang_failure.empty()
           ? reason
           : absl::StrCat(reason, absl::StrFormat(" (%.0f s after ", at - run.gang_failure_at),
                          run.gang_failure, ": that failure is put down to this)")});
  t.rows.push_back({RunState::kLost, next, next_reason});
  if (!run.gang_failure.empty()) {
    t.gang_failure = RunField<std::string>::Set("");
  }
  t.state = next;
  t.reason = RunField<std::string>::Set(next_reason);
  t.finished_at = retry ? RunField<double>::Null() : RunField<double>::Set(at);
  t.not_before = RunField<double>::Set(retry ? at + retry_delay_s : 0.0);
  t.infra_faults = RunField<int64_t>::Set(run.infra_faults + 1);
  if (retry) {
    t.max_attempts = RunField<int64_t>::Set(run.max_attempts + 1);
  }
  return t;
}

std::string StartFaultKey(const std::string& agent, const std::string& cause) {
  std::string key = absl::StrCat(agent, ": ");
  for (size_t i = 0; i < cause.size(); ++i) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(cause[i]))) {
      if (i == 0 || !absl::ascii_isdigit(static_cast<unsigned char>(cause[i - 1]))) {
        key += '#';
      }
    } else {
      key += cause[i];
    }
  }
  return key;
}

std::optional<RunTransition> OnStartFault(const RunRecord& run, const std::string& agent,
                                          const std::string& cause, double at) {
  const std::string reason = cause.empty() ? "the worker could not start the job" : cause;
  const std::string key = StartFaultKey(agent, reason);
  const int in_a_row = run.start_fault == key ? run.start_faults + 1 : 1;
  std::optional<RunTransition> t;
  if (in_a_row < kMaxRepeatedStartFaults) {
    t = OnLost(run, reason, at);
  } else if (run.state == RunState::kAssigned || run.state == RunState::kRunning) {
    const std::string failed = absl::StrCat(
        "failed: the same start fault on ", agent, " in ", in_a_row,
        " attempts in a row, before the job ran (it would fail the same way again): ", reason);
    t = Begin(run, run.attempt, at);
    t->rows.push_back({run.state, RunState::kLost, reason});
    t->rows.push_back({RunState::kLost, RunState::kFailed, failed});
    t->state = RunState::kFailed;
    t->reason = RunField<std::string>::Set(failed);
    t->finished_at = RunField<double>::Set(at);
    t->not_before = RunField<double>::Set(0.0);
    t->infra_faults = RunField<int64_t>::Set(run.infra_faults + 1);
  }
  if (t) {
    t->start_fault = RunField<std::string>::Set(key);
    t->start_faults = RunField<int64_t>::Set(in_a_row);
  }
  return t;
}

std::optional<RunTransition> OnFinish(const RunRecord& run, RunState to, const std::string& reason,
                                      double at) {
  if (IsFinal(run.state)) {
    return std::nullopt;
  }
  RunTransition t = Begin(run, run.attempt, at);
  t.rows.push_back({run.state, to, reason});
  t.state = to;
  t.reason = RunField<std::string>::Set(reason);
  t.finished_at = RunField<double>::Set(at);
  if (!run.gang_failure.empty()) {
    t.gang_failure = RunField<std::string>::Set("");
  }
  return t;
}

std::optional<RunTransition> OnRetry(const RunRecord& run, const std::string& reason, double at,
                                     int budget) {
  if (run.state != RunState::kFailed && run.state != RunState::kCancelled &&
      run.state != RunState::kLost) {
    return std::nullopt;
  }
  // Its history (transitions, attempt numbers, stored points) stays.
  RunTransition t = Begin(run, run.attempt, at);
  t.rows.push_back({run.state, RunState::kQueued, reason});
  t.state = RunState::kQueued;
  t.reason = RunField<std::string>::Set(reason);
  t.agent_id = RunField<std::string>::Null();
  t.pid = RunField<int64_t>::Set(0);
  t.exit_code = RunField<int64_t>::Null();
  t.started_at = RunField<double>::Null();
  t.finished_at = RunField<double>::Null();
  t.not_before = RunField<double>::Set(0);
  t.max_attempts = RunField<int64_t>::Set(run.attempt + budget);
  t.start_fault = RunField<std::string>::Set("");  // a retry starts afresh
  t.start_faults = RunField<int64_t>::Set(0);
  t.gang_failure = RunField<std::string>::Set("");
  return t;
}

model::Decide Assign(std::vector<std::string> agents, double at) {
  return [agents = std::move(agents),
          at](const RunRecord& run) -> absl::StatusOr<std::optional<RunTransition>> {
    absl::StatusOr<RunTransition> t = OnAssign(run, agents, at);
    if (!t.ok()) {
      return t.status();
    }
    return std::optional<RunTransition>(*std::move(t));
  };
}

model::Decide Lost(std::string reason, double at, double retry_delay_s) {
  return [reason = std::move(reason), at,
          retry_delay_s](const RunRecord& run) -> absl::StatusOr<std::optional<RunTransition>> {
    return OnLost(run, reason, at, retry_delay_s);
  };
}

model::Decide Finish(RunState to, std::string reason, double at) {
  return [to, reason = std::move(reason),
          at](const RunRecord& run) -> absl::StatusOr<std::optional<RunTransition>> {
    return OnFinish(run, to, reason, at);
  };
}

model::Decide GangWindowEnd(double at, double window_s) {
  return [at, window_s](const RunRecord& run) -> absl::StatusOr<std::optional<RunTransition>> {
    return OnGangWindowEnd(run, at, window_s);
  };
}

model::Decide Retry(std::string reason, double at) {
  return [reason = std::move(reason),
          at](const RunRecord& run) -> absl::StatusOr<std::optional<RunTransition>> {
    return OnRetry(run, reason, at, run.attempts_granted);
  };
}

const model::IngestRules& IngestRules() {
  static constexpr model::IngestRules kRules{&OnStarted, &OnExit, &OnGangExit, &RankExitCode};
  return kRules;
}

namespace {

bool HostOf(const std::vector<std::string>& hosts, const std::string& agent) {
  return !agent.empty() && std::find(hosts.begin(), hosts.end(), agent) != hosts.end();
}

bool Live(RunState state) { return state == RunState::kAssigned || state == RunState::kRunning; }

}  // namespace

bool MayReport(const RunRecord& run, const std::vector<std::string>& hosts,
               const std::string& agent, int attempt, double now, double tail_s) {
  if (attempt != run.attempt || attempt <= 0 || !HostOf(hosts, agent)) {
    return false;
  }
  if (Live(run.state)) {
    return true;
  }
  return model::IsFinal(run.state) && run.finished_at.has_value() &&
         now - *run.finished_at <= tail_s;
}

bool MayCheckpoint(const RunRecord& run, const std::vector<std::string>& hosts,
                   const std::string& agent, int attempt, double now, double tail_s) {
  return MayReport(run, hosts, agent, attempt, now, tail_s);
}

bool MayRead(const RunRecord& run, const std::vector<std::string>& hosts,
             const std::string& agent) {
  return run.attempt > 0 && Live(run.state) && HostOf(hosts, agent);
}

model::Decide Release(std::string reason, double at) {
  return [reason = std::move(reason), at](const RunRecord& run)
             -> absl::StatusOr<std::optional<RunTransition>> {
    if (run.state != RunState::kQueued || run.not_before < model::kHeldNotBefore) {
      return std::nullopt;
    }
    RunTransition t = Begin(run, run.attempt, at);
    t.state = RunState::kQueued;
    t.reason = RunField<std::string>::Set(reason);
    t.not_before = RunField<double>::Set(0.0);
    return t;
  };
}

}  // namespace tae::lifecycle
