// taectl pause / resume / retry / queue / agents drain: steering the scheduler.

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/output/table.h"
#include "client/rpc/control_client.h"
#include "common/api/json.h"

namespace tae::client {
namespace {

int SetPaused(const CommandEnv& env, const Args& args, bool paused) {
  bool json = false;
  cli::FlagSet flags(
      paused ? "usage: taectl pause EXP [--json]\n\n"
               "Pauses an experiment: its queued runs stay queued; running runs go on. `taectl "
               "resume EXP` lets the queued ones start again."
             : "usage: taectl resume EXP [--json]\n\nResumes a paused experiment.");
  flags.Bool("json", &json, "print the experiment as JSON");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  tae::v1::SetPausedRequest request;
  request.set_experiment(rest[0]);
  request.set_paused(paused);
  tae::v1::Experiment exp;
  absl::Status s =
      client.Check(client.stub()->SetPaused(ControlClient::Context().get(), request, &exp));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    std::printf("%s\n", api::ExperimentJson(exp).dump(2).c_str());
    return 0;
  }
  std::printf("e%ld %s %s: %d queued, %d running\n", static_cast<long>(exp.id()),
              exp.name().c_str(), paused ? "paused" : "resumed", exp.counts().queued(),
              exp.counts().running());
  return 0;
}

}  // namespace

int Pause(const CommandEnv& env, const Args& args) { return SetPaused(env, args, true); }

int Resume(const CommandEnv& env, const Args& args) { return SetPaused(env, args, false); }

int Retry(const CommandEnv& env, const Args& args) {
  bool failed = false;
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl retry EXP --failed [--json]\n\n"
      "Requeues the experiment's failed, cancelled and lost runs, each with as many attempts\n"
      "again as resources.max_attempts gives. Succeeded runs are never rerun; every run keeps\n"
      "its history (transitions, earlier attempts). --failed is required, to say so.");
  flags.Bool("failed", &failed, "requeue the failed, cancelled and lost runs");
  flags.Bool("json", &json, "print {\"requeued\": N}");
  Args rest;
  if (int code = ParseOrExit(flags, args, 1, 1, &rest); code >= 0) {
    return code;
  }
  if (!failed) {
    return Fail(absl::InvalidArgumentError(
        "retry requeues the failed, cancelled and lost runs only; pass --failed to do that"));
  }
  ControlClient client(env.home);
  tae::v1::RetryRequest request;
  request.set_experiment(rest[0]);
  tae::v1::RetryResponse response;
  absl::Status s =
      client.Check(client.stub()->Retry(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    std::printf("{\"requeued\": %d}\n", response.requeued());
    return 0;
  }
  std::printf("requeued %d run(s) of %s\n", response.requeued(), rest[0].c_str());
  return 0;
}

int Queue(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl queue [--json]\n\n"
      "Every queued run, in the order the scheduler considers them (priority, then fair share\n"
      "between experiments), and why it waits: no agent with its labels, its experiment paused\n"
      "or at resources.max_concurrent, a retry backoff, no free slot.");
  flags.Bool("json", &json, "print a JSON array of runs");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, 0, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  tae::v1::ListQueueRequest request;
  tae::v1::ListRunsResponse response;
  absl::Status s =
      client.Check(client.stub()->ListQueue(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const tae::v1::Run& run : response.runs()) {
      out.push_back(api::RunJson(run));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (response.runs_size() == 0) {
    std::printf("nothing queued\n");
    return 0;
  }
  Table table({"RUN", "EXP", "VARIANT", "SEED", "ATTEMPT", "WAITING BECAUSE"});
  for (const tae::v1::Run& run : response.runs()) {
    table.Add({absl::StrCat("r", run.id()), absl::StrCat("e", run.experiment_id()), run.variant(),
               absl::StrCat(run.seed()), absl::StrCat(run.attempt()), run.reason()});
  }
  std::fputs(table.Render().c_str(), stdout);
  return 0;
}

int DrainAgent(const CommandEnv& env, const std::string& agent_id, bool drain) {
  ControlClient client(env.home);
  tae::v1::DrainAgentRequest request;
  request.set_agent_id(agent_id);
  request.set_drain(drain);
  tae::v1::DrainAgentResponse response;
  absl::Status s =
      client.Check(client.stub()->DrainAgent(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  std::printf(drain ? "agent %s is draining: no new runs; its running runs finish\n"
                    : "agent %s takes runs again\n",
              agent_id.c_str());
  return 0;
}

int RevokeAgent(const CommandEnv& env, const std::string& agent_id, const std::string& reason,
                bool json) {
  ControlClient client(env.home);
  tae::v1::RevokeAgentRequest request;
  request.set_agent_id(agent_id);
  request.set_reason(reason);
  tae::v1::RevokeAgentResponse response;
  absl::Status s =
      client.Check(client.stub()->RevokeAgent(ControlClient::Context().get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    std::printf("%s\n", nlohmann::json{{"agent", agent_id},
                                       {"revoked", true},
                                       {"runs_requeued", response.runs_requeued()}}
                            .dump(2)
                            .c_str());
    return 0;
  }
  std::printf(
      "agent %s revoked: its credential no longer works and its id cannot enrol again; %d of "
      "its runs went back to the queue\n",
      agent_id.c_str(), response.runs_requeued());
  return 0;
}

}  // namespace tae::client
