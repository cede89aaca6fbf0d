// Controller: profiles on demand (docs/profiles.md). A request goes to the agent of the run's
// rank 0; the job writes the profile and the agent uploads it as the artifact "profile-<id>"
// through the checkpoint path. Requests are remembered here, on the core: a stored artifact of
// that name answers DONE, a ProfileFailed from the agent answers FAILED, and so does the end of
// the attempt once kEndGraceS have passed without the artifact (the job may answer on its last
// step, and the upload then finishes after the run). One request per run at a time. Answered
// requests, and any older than kForgetS, are forgotten when a new one comes. A taed restart
// forgets pending requests (the artifact still arrives).

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/macros.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "spdlog/spdlog.h"

namespace tae::controller {
namespace {

constexpr size_t kMaxPendingProfiles = 1024;
constexpr double kEndGraceS = 30;
constexpr double kForgetS = 3600;

std::string NewProfileId() {
  static std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("p%06x", rng() & 0xffffff);
}

}  // namespace

absl::StatusOr<ProfileTicket> Controller::RequestProfile(int64_t run_id, int steps,
                                                         double seconds) {
  TAE_CHECK_OWNER(core_);
  if (steps < 0 || seconds < 0 || (steps > 0 && seconds > 0)) {
    return absl::InvalidArgumentError("steps, seconds: give one of them (> 0), or neither");
  }
  if (steps == 0 && seconds == 0) {
    steps = 5;
  }
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  if (run.state != model::RunState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("run_id: r", run.id, " is ", model::ToString(run.state),
                     "; only a running run can be profiled",
                     model::IsFinal(run.state) ? " (its artifacts: taectl artifacts r" : "",
                     model::IsFinal(run.state) ? absl::StrCat(run.id, ")") : ""));
  }
  const std::vector<std::string> agents = AgentsOfRun(run);
  registry::Agent* agent = agents.empty() ? nullptr : registry_.Find(agents.front());
  if (agent == nullptr || !agent->connected) {
    return absl::UnavailableError(absl::StrCat("run_id: r", run.id, "'s agent ",
                                               agents.empty() ? run.agent_id : agents.front(),
                                               " is not connected; try again when it is"));
  }
  const double now = Now();
  for (auto it = profiles_.begin(); it != profiles_.end();) {
    const bool forget =
        it->second.state != ProfileState::kPending || now - it->second.requested_at > kForgetS;
    it = forget ? profiles_.erase(it) : std::next(it);
  }
  for (const auto& [id, pending] : profiles_) {
    if (pending.run_id == run.id && pending.attempt == run.attempt) {
      return absl::FailedPreconditionError(
          absl::StrCat("run_id: r", run.id, " already has profile ", id,
                       " asked for and not yet answered; wait for it (or ", kForgetS, " s)"));
    }
  }
  if (profiles_.size() >= kMaxPendingProfiles) {
    return absl::ResourceExhaustedError("taed already waits for too many profiles");
  }
  ProfileTicket ticket;
  while (true) {
    ticket.id = NewProfileId();
    // Unique among the requests here and the run's stored profiles (ids outlive a restart).
    ASSIGN_OR_RETURN(std::optional<model::CheckpointRecord> taken,
                     store_->FindArtifact(run.id, absl::StrCat("profile-", ticket.id)));
    if (profiles_.count(ticket.id) == 0 && !taken.has_value()) {
      break;
    }
  }
  ticket.artifact = absl::StrCat("profile-", ticket.id);
  PendingProfile& pending = profiles_[ticket.id];
  pending.run_id = run.id;
  pending.attempt = run.attempt;
  pending.requested_at = now;
  tae::v1::TaedMessage message;
  tae::v1::ProfileRun* ask = message.mutable_profile_run();
  ask->set_run_id(run.id);
  ask->set_attempt(run.attempt);
  ask->set_id(ticket.id);
  ask->set_steps(steps);
  ask->set_seconds(seconds);
  agent->channel->Send(message);
  return ticket;
}

absl::StatusOr<ProfileStatus> Controller::GetProfile(int64_t run_id, const std::string& id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  ProfileStatus status;
  ASSIGN_OR_RETURN(std::optional<model::CheckpointRecord> stored,
                   store_->FindArtifact(run.id, absl::StrCat("profile-", id)));
  auto it = profiles_.find(id);
  if (stored.has_value()) {
    if (it != profiles_.end()) {
      it->second.state = ProfileState::kDone;
    }
    status.state = ProfileState::kDone;
    status.artifact = *std::move(stored);
    return status;
  }
  if (it == profiles_.end() || it->second.run_id != run.id) {
    return absl::NotFoundError(
        absl::StrCat("id: taed has no profile request '", id, "' of r", run.id,
                     " (taed restarted since? its artifact appears in taectl artifacts r", run.id,
                     " if the job still delivers it)"));
  }
  PendingProfile& pending = it->second;
  if (pending.state == ProfileState::kPending &&
      (run.attempt != pending.attempt || run.state != model::RunState::kRunning)) {
    if (pending.ended_seen_at == 0) {
      pending.ended_seen_at = Now();
    } else if (Now() - pending.ended_seen_at > kEndGraceS) {
      pending.state = ProfileState::kFailed;
      pending.error = absl::StrCat("r", run.id, " attempt ", pending.attempt,
                                   " ended before its job delivered the profile");
    }
  }
  status.state = pending.state;
  status.error = pending.error;
  return status;
}

void Controller::OnProfileFailed(const std::string& agent_id, int64_t run_id, int attempt,
                                 const std::string& id, const std::string& error) {
  TAE_CHECK_OWNER(core_);
  auto it = profiles_.find(id);
  if (it == profiles_.end() || it->second.run_id != run_id || it->second.attempt != attempt) {
    return;  // a request taed no longer remembers, or a self-initiated capture
  }
  absl::StatusOr<model::RunRecord> run = store_->GetRun(run_id);
  if (!run.ok() || !lifecycle::MayReport(*run, AgentsOfRun(*run), agent_id, attempt, Now(),
                                         options_.report_tail_s)) {
    ++refused_events_;
    spdlog::warn("agent {}: a profile failure for r{} it does not hold refused", agent_id, run_id);
    return;
  }
  it->second.state = ProfileState::kFailed;
  it->second.error = error;
}

}  // namespace tae::controller
