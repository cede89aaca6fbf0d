// server/lifecycle: the run state machine as pure functions, table by table.

#include "server/lifecycle/lifecycle.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using tae::lifecycle::Exit;
using tae::model::RunField;
using tae::model::RunRecord;
using tae::model::RunState;
using tae::model::RunTransition;
namespace lifecycle = tae::lifecycle;

RunRecord Run(RunState state, int attempt = 1, int max_attempts = 1, int hosts = 1) {
  RunRecord run;
  run.id = 7;
  run.state = state;
  run.attempt = attempt;
  run.max_attempts = max_attempts;
  run.hosts = hosts;
  return run;
}

Exit Exited(int code, int attempt = 1) {
  Exit exit;
  exit.attempt = attempt;
  exit.exit_code = code;
  exit.at = 100;
  return exit;
}

std::string Rows(const RunTransition& t) {
  std::string out;
  for (const RunTransition::Row& row : t.rows) {
    out += std::string(tae::model::ToString(row.from)) + ">" + tae::model::ToString(row.to) + " " +
           row.reason + ";";
  }
  return out;
}

}  // namespace

TEST_CASE("lifecycle: a one-host exit ends the attempt by its exit") {
  struct Case {
    const char* what;
    RunState state;
    Exit exit;
    std::optional<RunState> to;  // nullopt: ignored
    std::string reason;
  };
  Exit signal = Exited(0);
  signal.signal = 9;
  signal.exit_code = -1;
  Exit cancelled = Exited(143);
  cancelled.cancelled = true;
  cancelled.text = "cancelled by taectl";
  Exit interrupted = Exited(143);
  interrupted.interrupted = true;
  Exit infra = Exited(-1);
  infra.infra = true;
  infra.text = "cannot stage snapshot";
  const std::vector<Case> cases = {
      {"exit 0", RunState::kRunning, Exited(0), RunState::kSucceeded, "exit code 0"},
      {"exit 3", RunState::kRunning, Exited(3), RunState::kFailed, "exit code 3"},
      {"a signal", RunState::kRunning, signal, RunState::kFailed, "killed by signal 9"},
      {"cancelled", RunState::kRunning, cancelled, RunState::kCancelled, "cancelled by taectl"},
      {"exit before started", RunState::kAssigned, Exited(0), RunState::kSucceeded, "exit code 0"},
      {"interrupted on its only attempt", RunState::kRunning, interrupted, RunState::kQueued,
       "requeued: attempt 1 ended by the worker, not the job (not counted against "
       "max_attempts)"},
      {"the worker failed it on its only attempt", RunState::kAssigned, infra, RunState::kQueued,
       "requeued: attempt 1 ended by the worker, not the job (not counted against "
       "max_attempts)"},
      {"another attempt's exit", RunState::kRunning, Exited(0, 2), std::nullopt, ""},
      {"already final", RunState::kSucceeded, Exited(1), std::nullopt, ""},
      {"requeued meanwhile", RunState::kQueued, Exited(1), std::nullopt, ""},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    std::optional<RunTransition> t = lifecycle::OnExit(Run(c.state), c.exit);
    REQUIRE(t.has_value() == c.to.has_value());
    if (!t) {
      continue;
    }
    CHECK(t->state == *c.to);
    CHECK(t->reason.value == c.reason);
    CHECK(t->rows.back().to == *c.to);
    CHECK(t->finished_at.op ==
          (*c.to == RunState::kQueued ? RunField<double>::Op::kNull : RunField<double>::Op::kSet));
    CHECK(t->at == 100);
  }
}

TEST_CASE(
    "lifecycle: the job's own failure is retried only with retry_on = any, within "
    "max_attempts") {
  RunRecord run = Run(RunState::kRunning, 1, 2);
  std::optional<RunTransition> t = lifecycle::OnExit(run, Exited(3));
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);  // retry_on = infra (the default)
  run.retry_on = "any";
  t = lifecycle::OnExit(run, Exited(3));
  REQUIRE(t);
  CHECK(Rows(*t) ==
        "running>failed exit code 3;failed>queued retrying the job's failure "
        "(resources.retry_on = any; attempt 1 of 2 spent);");
  CHECK(t->state == RunState::kQueued);
  CHECK(t->max_attempts.op == RunField<int64_t>::Op::kKeep);
  RunRecord last = Run(RunState::kRunning, 2, 2);
  last.retry_on = "any";
  t = lifecycle::OnExit(last, Exited(3, 2));
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  // A gang's failed rank: the same rule.
  RunRecord gang = Run(RunState::kRunning, 1, 2, 2);
  gang.retry_on = "any";
  t = lifecycle::OnGangExit(gang, 1, "b", Exited(4), {0, 2, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
}

TEST_CASE("lifecycle: only a run's hosts of its live attempt may write into it") {
  RunRecord run = Run(RunState::kRunning, 2, 3);
  const std::vector<std::string> hosts = {"a"};
  CHECK(lifecycle::MayReport(run, hosts, "a", 2, 100, 60));
  CHECK_FALSE(lifecycle::MayReport(run, hosts, "b", 2, 100, 60));  // another agent
  CHECK_FALSE(lifecycle::MayReport(run, hosts, "a", 1, 100, 60));  // an attempt gone by
  CHECK_FALSE(lifecycle::MayReport(run, hosts, "", 2, 100, 60));
  CHECK(lifecycle::MayCheckpoint(run, hosts, "a", 2, 100, 3600));
  CHECK_FALSE(lifecycle::MayCheckpoint(run, hosts, "b", 2, 100, 3600));
  RunRecord ended = Run(RunState::kSucceeded, 2, 3);
  ended.finished_at = 100;
  CHECK(lifecycle::MayReport(ended, hosts, "a", 2, 150, 60));        // its last lines
  CHECK_FALSE(lifecycle::MayReport(ended, hosts, "a", 2, 161, 60));  // too late
  CHECK(lifecycle::MayCheckpoint(ended, hosts, "a", 2, 161, 3600));  // a final upload
  // Requeued: the attempt is over for good, nothing of it is taken.
  CHECK_FALSE(lifecycle::MayReport(Run(RunState::kQueued, 2, 3), hosts, "a", 2, 100, 60));
  CHECK_FALSE(lifecycle::MayCheckpoint(Run(RunState::kQueued, 2, 3), hosts, "a", 2, 100, 3600));
}

TEST_CASE("lifecycle: a lost attempt is requeued without spending an attempt, with its backoff") {
  std::optional<RunTransition> t =
      lifecycle::OnLost(Run(RunState::kRunning, 1, 3), "agent gone", 50, 30);
  REQUIRE(t);
  CHECK(Rows(*t) ==
        "running>lost agent gone;lost>queued requeued: attempt 1 ended by the worker, not the "
        "job (not counted against max_attempts); retry in 30s;");
  CHECK(t->state == RunState::kQueued);
  CHECK(t->not_before.value == 80);
  CHECK(t->finished_at.op == RunField<double>::Op::kNull);
  CHECK(t->max_attempts.value == 4);  // the lost attempt is given back
  CHECK(t->infra_faults.value == 1);

  // Its last attempt lost: still requeued; the job did nothing wrong.
  t = lifecycle::OnLost(Run(RunState::kAssigned, 3, 3), "agent gone", 50);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->max_attempts.value == 4);

  // Only a run that keeps meeting broken workers fails, and says why.
  RunRecord unlucky = Run(RunState::kRunning, 25, 25);
  unlucky.infra_faults = lifecycle::kMaxInfraFaults;
  t = lifecycle::OnLost(unlucky, "agent gone", 50);
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->reason.value ==
        "failed after 20 attempts ended by workers' faults; the last: agent gone");
  CHECK(t->finished_at.value == 50);
  CHECK(t->not_before.value == 0);

  for (RunState state : {RunState::kQueued, RunState::kSucceeded, RunState::kFailed,
                         RunState::kCancelled, RunState::kLost}) {
    CHECK_FALSE(lifecycle::OnLost(Run(state), "x", 1));
  }
}

TEST_CASE("lifecycle: a gang ends when every rank exited 0, or when all reported after a failure") {
  const RunRecord gang = Run(RunState::kRunning, 1, 2, 2);
  // rank 0 done, rank 1 still running: nothing yet.
  CHECK_FALSE(lifecycle::OnGangExit(gang, 0, "a", Exited(0), {1, 1, 2}));
  std::optional<RunTransition> t = lifecycle::OnGangExit(gang, 1, "b", Exited(0), {2, 2, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kSucceeded);
  CHECK(t->reason.value == "every host exited 0 (2 hosts)");

  t = lifecycle::OnGangExit(gang, 1, "b", Exited(4), {1, 2, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->reason.value == "rank 1 on b: exit code 4; the other hosts are stopped");
  CHECK(lifecycle::RankExitCode(Exited(4)) == 4);

  Exit killed = Exited(0);
  killed.signal = 9;
  CHECK_FALSE(lifecycle::CleanExit(killed));
  CHECK(lifecycle::RankExitCode(killed) == -1);

  Exit interrupted = Exited(143);
  interrupted.interrupted = true;
  t = lifecycle::OnGangExit(gang, 0, "a", interrupted, {0, 1, 2});
  REQUIRE(t);
  CHECK(Rows(*t) ==
        "running>lost rank 0 on a: interrupted;lost>queued requeued: attempt 1 ended by the "
        "worker, not the job (not counted against max_attempts);");

  Exit cancelled = Exited(143);
  cancelled.cancelled = true;
  t = lifecycle::OnGangExit(gang, 1, "b", cancelled, {0, 1, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kCancelled);
  CHECK(t->reason.value == "rank 1 on b: cancelled");

  // A late exit of a requeued gang's rank ends nothing.
  CHECK_FALSE(lifecycle::OnGangExit(Run(RunState::kQueued, 1, 2, 2), 1, "b", Exited(1), {0, 1, 2}));
}

TEST_CASE(
    "lifecycle: a gang's failure is held until every host reports, a lost host takes the blame") {
  const RunRecord gang = Run(RunState::kRunning, 1, 2, 2);
  Exit failed = Exited(4);
  failed.at = 100;
  // Rank 1 fails while rank 0 still runs: held, the run still running.
  std::optional<RunTransition> t = lifecycle::OnGangExit(gang, 1, "b", failed, {0, 1, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kRunning);
  CHECK(t->rows.empty());
  CHECK(t->gang_failure.value == "rank 1 on b: exit code 4; the other hosts are stopped");
  CHECK(t->gang_failure_code.value == 4);
  CHECK(t->gang_failure_at.value == 100);
  CHECK(t->reason.value.find("waiting for them to report") != std::string::npos);

  RunRecord held = gang;
  held.gang_failure = t->gang_failure.value;
  held.gang_failure_code = 4;
  held.gang_failure_at = 100;
  // Rank 0, stopped by taed, reports: every host is alive, so the failure is the job's.
  Exit stopped = Exited(143);
  stopped.cancelled = true;
  stopped.at = 101;
  t = lifecycle::OnGangExit(held, 0, "a", stopped, {0, 2, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->reason.value ==
        "rank 1 on b: exit code 4; the other hosts are stopped (all 2 hosts reported)");
  CHECK(t->exit_code.value == 4);
  CHECK(t->gang_failure.value.empty());

  // Rank 0's host goes away instead (its agent interrupted, or lost): requeued, not counted.
  Exit interrupted = Exited(143);
  interrupted.interrupted = true;
  interrupted.text = "agent shutting down";
  interrupted.at = 112;
  t = lifecycle::OnGangExit(held, 0, "a", interrupted, {0, 2, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->max_attempts.value == 3);
  CHECK(Rows(*t).find("rank 0 on a: agent shutting down (12 s after rank 1 on b: exit code 4; "
                      "the other hosts are stopped: that failure is put down to this)") !=
        std::string::npos);
  CHECK(t->gang_failure.value.empty());
  t = lifecycle::OnLost(held, "agent a lost", 150);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->max_attempts.value == 3);

  // Nobody reports and nobody is lost: the window ends it as the job's failure.
  CHECK_FALSE(lifecycle::OnGangWindowEnd(held, 159, 60));
  CHECK_FALSE(lifecycle::OnGangWindowEnd(gang, 1000, 60));  // nothing held
  t = lifecycle::OnGangWindowEnd(held, 160, 60);
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->reason.value.find("(no host lost within 60 s;") != std::string::npos);
  RunRecord retried = held;
  retried.retry_on = "any";
  t = lifecycle::OnGangWindowEnd(retried, 160, 60);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->gang_failure.value.empty());

  // A held gang cancelled by its user ends cancelled; a new attempt starts with nothing held.
  t = lifecycle::OnFinish(held, RunState::kCancelled, "cancelled by user", 120);
  REQUIRE(t);
  CHECK(t->gang_failure.value.empty());
  RunRecord queued = Run(RunState::kQueued, 1, 3, 2);
  queued.gang_failure = "stale";
  absl::StatusOr<RunTransition> assigned = lifecycle::OnAssign(queued, {"a", "b"}, 200);
  REQUIRE(assigned.ok());
  CHECK(assigned->gang_failure.op == RunField<std::string>::Op::kSet);
  CHECK(assigned->gang_failure.value.empty());
}

TEST_CASE("lifecycle: a run hurt by another job's disk use backs off before its next attempt") {
  Exit hurt = Exited(1);
  hurt.infra = true;
  hurt.by_other_job = true;
  hurt.text = "exit code 1; the worker's disk was filled by run r9";
  RunRecord run = Run(RunState::kRunning, 1, 1);
  std::optional<RunTransition> t = lifecycle::OnExit(run, hurt);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->not_before.value == 101);  // 1 s after the exit
  CHECK(t->max_attempts.value == 2);  // not counted
  run.infra_faults = 3;
  t = lifecycle::OnExit(run, hurt);
  REQUIRE(t);
  CHECK(t->not_before.value == 108);
  run.infra_faults = 19;
  CHECK(lifecycle::OtherJobRetryDelay(run) == lifecycle::kOtherJobRetryMaxS);
  // Any other fault of the worker is retried at once, as before.
  hurt.by_other_job = false;
  run.infra_faults = 0;
  t = lifecycle::OnExit(run, hurt);
  REQUIRE(t);
  CHECK(t->not_before.value == 100);
}

TEST_CASE("lifecycle: assign, start, finish and retry") {
  absl::StatusOr<RunTransition> assign =
      lifecycle::OnAssign(Run(RunState::kQueued, 1, 3), {"a", "b"}, 5);
  REQUIRE(assign.ok());
  CHECK(assign->attempt == 2);
  CHECK(assign->attempt_column.value == 2);
  CHECK(assign->agent_id.value == "a");
  CHECK(Rows(*assign) == "queued>assigned placed on a, b (ranks 0..1);");
  CHECK(assign->exit_code.op == RunField<int64_t>::Op::kNull);
  CHECK(
      absl::IsFailedPrecondition(lifecycle::OnAssign(Run(RunState::kRunning), {"a"}, 5).status()));
  CHECK(absl::IsInvalidArgument(lifecycle::OnAssign(Run(RunState::kQueued), {}, 5).status()));

  std::optional<RunTransition> started =
      lifecycle::OnStarted(Run(RunState::kAssigned, 2), 2, 4242, "a", 6);
  REQUIRE(started);
  CHECK(Rows(*started) == "assigned>running started as pid 4242 on a;");
  CHECK(started->reason.op == RunField<std::string>::Op::kKeep);
  CHECK(started->started_at.value == 6);
  CHECK_FALSE(lifecycle::OnStarted(Run(RunState::kAssigned, 2), 1, 4242, "a", 6));
  CHECK_FALSE(lifecycle::OnStarted(Run(RunState::kRunning, 2), 2, 4242, "a", 6));

  std::optional<RunTransition> cancel =
      lifecycle::OnFinish(Run(RunState::kQueued), RunState::kCancelled, "cancelled", 7);
  REQUIRE(cancel);
  CHECK(cancel->state == RunState::kCancelled);
  CHECK_FALSE(lifecycle::OnFinish(Run(RunState::kFailed), RunState::kCancelled, "x", 7));

  for (RunState state : {RunState::kFailed, RunState::kCancelled, RunState::kLost}) {
    std::optional<RunTransition> retry = lifecycle::OnRetry(Run(state, 2, 2), "retry", 8, 3);
    REQUIRE(retry);
    CHECK(retry->state == RunState::kQueued);
    CHECK(retry->max_attempts.value == 5);
    CHECK(retry->agent_id.op == RunField<std::string>::Op::kNull);
  }
  for (RunState state : {RunState::kSucceeded, RunState::kQueued, RunState::kRunning}) {
    CHECK_FALSE(lifecycle::OnRetry(Run(state), "retry", 8, 1));
  }
}

TEST_CASE("lifecycle: a start fault that repeats on the same agent fails the run with its cause") {
  // The agent's words, as two attempts of one run give them: only the numbers differ.
  const std::string cause1 =
      "the job's supervisor (pid 4101) could not start the job: tae-job: cannot open "
      "rel/agents/local-0/runs/r3-a1.job/stdout: No such file or directory";
  const std::string cause2 =
      "the job's supervisor (pid 4187) could not start the job: tae-job: cannot open "
      "rel/agents/local-0/runs/r3-a2.job/stdout: No such file or directory";
  CHECK(lifecycle::StartFaultKey("local-0", cause1) == lifecycle::StartFaultKey("local-0", cause2));
  CHECK(lifecycle::StartFaultKey("local-0", cause1) != lifecycle::StartFaultKey("local-1", cause1));
  CHECK(lifecycle::StartFaultKey("a", "x") != lifecycle::StartFaultKey("a", "y"));
  CHECK(lifecycle::StartFaultKey("a", "pid 12 and 7") == "a: pid # and #");

  Exit fault = Exited(-1);
  fault.infra = true;
  fault.not_started = true;
  fault.text = cause1;

  // The first one: requeued like any fault of the worker, and remembered.
  RunRecord run = Run(RunState::kAssigned, 1, 1);
  run.agent_id = "local-0";
  std::optional<RunTransition> t = lifecycle::OnExit(run, fault);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->max_attempts.value == 2);
  CHECK(t->start_fault.value == lifecycle::StartFaultKey("local-0", cause1));
  CHECK(t->start_faults.value == 1);

  // The same fault on the same agent in the next attempt: failed, with the cause.
  run.attempt = 2;
  run.max_attempts = 2;
  run.start_fault = t->start_fault.value;
  run.start_faults = 1;
  fault.attempt = 2;
  fault.text = cause2;
  t = lifecycle::OnExit(run, fault);
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->finished_at.value == 100);
  CHECK(t->reason.value ==
        "failed: the same start fault on local-0 in 2 attempts in a row, before the job ran (it "
        "would fail the same way again): " +
            cause2);
  REQUIRE(t->rows.size() == 2);
  CHECK(t->rows[0].to == RunState::kLost);
  CHECK(t->rows[0].reason == cause2);

  // Another agent, or another fault: a new count, requeued.
  RunRecord elsewhere = run;
  elsewhere.agent_id = "local-1";
  t = lifecycle::OnExit(elsewhere, fault);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->start_faults.value == 1);
  Exit other = fault;
  other.text = "cannot create the run directory: Permission denied";
  t = lifecycle::OnExit(run, other);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);

  // A fault after the job started (a supervisor killed mid-run) is no start fault.
  Exit died = fault;
  died.not_started = false;
  t = lifecycle::OnExit(run, died);
  REQUIRE(t);
  CHECK(t->state == RunState::kQueued);
  CHECK(t->start_fault.op == RunField<std::string>::Op::kKeep);

  // A job that started ends the row; so does a retry.
  t = lifecycle::OnStarted(run, 2, 900, "local-0", 100);
  REQUIRE(t);
  CHECK(t->start_faults.value == 0);
  CHECK(t->start_fault.value.empty());
  RunRecord failed = run;
  failed.state = RunState::kFailed;
  t = lifecycle::OnRetry(failed, "retry", 100, 1);
  REQUIRE(t);
  CHECK(t->start_faults.value == 0);

  // A gang's rank names its host, and the same rule holds per agent.
  RunRecord gang = Run(RunState::kRunning, 2, 2, 2);
  gang.start_fault = lifecycle::StartFaultKey("b", "rank 1 on b: " + cause1);
  gang.start_faults = 1;
  t = lifecycle::OnGangExit(gang, 1, "b", fault, {0, 1, 2});
  REQUIRE(t);
  CHECK(t->state == RunState::kFailed);
  CHECK(t->reason.value.find("on b in 2 attempts in a row") != std::string::npos);
}
