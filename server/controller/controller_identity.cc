// Controller: agent identity (docs/security.md, "Agents"): enrolment with the shared token,
// credentials minted by the providers, revocation, and which events an agent may report.

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth/credential.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "spdlog/spdlog.h"

namespace tae::controller {
namespace {

// InvalidArgument unless `id` is 1-128 of [A-Za-z0-9._:-].
absl::Status CheckAgentId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 128;
  for (char c : id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-' || c == ':');
  }
  return ok ? absl::OkStatus()
            : absl::InvalidArgumentError(absl::StrCat("agent_id: '", id.substr(0, 80),
                                                      "' is not 1-128 of [A-Za-z0-9._:-]"));
}

}  // namespace

absl::StatusOr<std::string> Controller::Enrol(const std::string& agent_id,
                                              const std::string& request_id) {
  TAE_CHECK_OWNER(core_);
  RETURN_IF_ERROR(CheckAgentId(agent_id));
  ASSIGN_OR_RETURN(std::vector<model::CredentialRecord> all, store_->ListCredentials());
  for (const model::CredentialRecord& c : all) {
    if (!absl::EqualsIgnoreCase(c.agent_id, agent_id)) {
      continue;
    }
    if (c.agent_id != agent_id) {
      return absl::AlreadyExistsError(
          absl::StrCat("agent ", agent_id, ": ", c.agent_id,
                       " is enrolled already, and ids are compared without case: give this "
                       "worker another --id"));
    }
    if (c.revoked_at.has_value()) {
      return absl::PermissionDeniedError(
          absl::StrCat("agent ", agent_id, " was revoked (", c.revoked_reason,
                       "); it cannot enrol again: give this worker another --id"));
    }
    auto retry = enrolments_.find(agent_id);
    if (!request_id.empty() && retry != enrolments_.end() &&
        auth::SecretEquals(retry->second.first, registry::SecretHash(request_id)) &&
        Now() - retry->second.second <= kEnrolRetryS) {
      // The same enrolment again: its answer was lost. A fresh credential replaces that one.
      spdlog::info("agent {} enrolled again by a retry of its enrolment", agent_id);
      return IssueCredential(agent_id, "token");
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "agent ", agent_id,
        " is enrolled already and holds its credential in its work dir (agent.credential); a "
        "second worker needs another --id, and a worker that lost its work dir: `taectl agents "
        "revoke ",
        agent_id, "`, then another --id"));
  }
  ASSIGN_OR_RETURN(std::string credential, IssueCredential(agent_id, "token"));
  if (!request_id.empty()) {
    enrolments_[agent_id] = {registry::SecretHash(request_id), Now()};
  }
  spdlog::info("agent {} enrolled with the enrolment token", agent_id);
  return credential;
}

absl::StatusOr<std::string> Controller::MintCredential(const std::string& agent_id,
                                                       const std::string& how,
                                                       const registry::PlacementLabels& placement) {
  TAE_CHECK_OWNER(core_);
  RETURN_IF_ERROR(CheckAgentId(agent_id));
  ASSIGN_OR_RETURN(std::vector<model::CredentialRecord> all, store_->ListCredentials());
  for (const model::CredentialRecord& c : all) {
    if (c.agent_id == agent_id && c.revoked_at.has_value()) {
      return absl::PermissionDeniedError(
          absl::StrCat("agent ", agent_id, " was revoked (", c.revoked_reason, ")"));
    }
  }
  return IssueCredential(agent_id, how, registry::PlacementOf(placement));
}

absl::Status Controller::JudgeRegistration(const registry::Agent& agent) {
  registry::Registration registration{agent.id, agent.slots, agent.labels, true,
                                      registry::PlacementOf(agent.labels)};
  std::vector<registry::PlacementHolder> others;
  if (options_.credentials != nullptr) {
    ASSIGN_OR_RETURN(std::vector<model::CredentialRecord> all, store_->ListCredentials());
    bool found = false;
    for (const model::CredentialRecord& c : all) {
      if (c.revoked_at.has_value() || c.secret_sha256.empty()) {
        continue;  // revoked or retired: holds nothing
      }
      if (c.agent_id == agent.id) {
        found = true;
        registration.minted = c.how != "token";
        registration.bound = c.placement;
      } else if (c.placement.has_value()) {
        others.push_back({c.agent_id, c.how != "token", *c.placement});
      }
    }
    if (!found) {
      return absl::PermissionDeniedError(
          absl::StrCat("agent ", agent.id, ": its credential is no longer valid"));
    }
  }
  RETURN_IF_ERROR(registry::JudgeRegistration(registration, others));
  if (!registration.bound.has_value()) {
    RETURN_IF_ERROR(store_->BindCredentialPlacement(agent.id, registry::PlacementOf(agent.labels)));
  }
  return absl::OkStatus();
}

int Controller::RetireCredentials(const std::string& how, const std::vector<std::string>& ids,
                                  const std::string& reason) {
  TAE_CHECK_OWNER(core_);
  absl::StatusOr<std::vector<model::CredentialRecord>> all = store_->ListCredentials();
  if (!all.ok()) {
    spdlog::warn("credentials of {} agents not retired ({}): {}", how, reason,
                 std::string(all.status().message()));
    return 0;
  }
  const std::set<std::string> only(ids.begin(), ids.end());
  int retired = 0;
  for (const model::CredentialRecord& c : *all) {
    if (c.how != how || c.revoked_at.has_value() || c.secret_sha256.empty() ||
        (!only.empty() && only.count(c.agent_id) == 0)) {
      continue;
    }
    if (absl::Status stored = store_->RetireCredential(c.agent_id); !stored.ok()) {
      Noted(stored, "retire an agent's credential");
      continue;
    }
    if (options_.credentials != nullptr) {
      options_.credentials->Revoke(c.agent_id);
      for (const std::shared_ptr<registry::AgentChannel>& stream :
           options_.credentials->TakeStreams(c.agent_id)) {
        stream->Close();
      }
    }
    ++retired;
  }
  if (retired > 0) {
    spdlog::info("{} agent credential(s) minted as {} retired: {}", retired, how, reason);
  }
  return retired;
}

absl::StatusOr<std::string> Controller::IssueCredential(
    const std::string& agent_id, const std::string& how,
    const std::optional<registry::PlacementLabels>& placement) {
  ASSIGN_OR_RETURN(std::string secret, registry::NewSecret());
  model::CredentialRecord record{agent_id, registry::SecretHash(secret), how, Now(), {}, "",
                                 placement};
  RETURN_IF_ERROR(store_->PutCredential(record));
  if (options_.credentials != nullptr) {
    options_.credentials->Put(agent_id, record.secret_sha256);
  }
  return registry::Credential{agent_id, secret}.Text();
}

absl::StatusOr<int> Controller::Revoke(const std::string& agent_id, const std::string& reason) {
  TAE_CHECK_OWNER(core_);
  RETURN_IF_ERROR(CheckAgentId(agent_id));
  const std::string why = reason.empty() ? "revoked with taectl agents revoke" : reason;
  RETURN_IF_ERROR(store_->RevokeCredential(agent_id, why, Now()));
  if (options_.credentials != nullptr) {
    options_.credentials->Revoke(agent_id);
    // Every open stream of the id ends now, registered or idle: none can register it again.
    for (const std::shared_ptr<registry::AgentChannel>& stream :
         options_.credentials->TakeStreams(agent_id)) {
      stream->Close();
    }
  }
  int requeued = 0;
  if (registry::Agent* agent = registry_.Find(agent_id); agent != nullptr) {
    requeued = static_cast<int>(agent->runs.size());
    if (agent->channel != nullptr) {
      agent->channel->Close();
    }
    registry_.Disconnect(agent_id, agent->channel.get(), Now());
    agent->revoked = why;
  }
  Noted(store_->SetAgentState(agent_id, "revoked", Now()), "store an agent's state");
  // Its runs go elsewhere now, as after a loss the agent caused, not the job.
  LoseUnclaimedRuns(agent_id, absl::StrCat("agent ", agent_id, " revoked: ", why));
  spdlog::warn("agent {} revoked: {}", agent_id, why);
  return requeued;
}

std::vector<model::RunRecord> Controller::ReadableRuns(const std::string& agent_id) {
  std::vector<model::RunRecord> out;
  const registry::Agent* agent = registry_.Find(agent_id);
  if (agent == nullptr) {
    return out;
  }
  for (const auto& [run_id, slots] : agent->runs) {
    absl::StatusOr<model::RunRecord> run = store_->GetRun(run_id);
    if (run.ok() && lifecycle::MayRead(*run, AgentsOfRun(*run), agent_id)) {
      out.push_back(*std::move(run));
    }
  }
  return out;
}

absl::Status Controller::MayReadSnapshot(const std::string& agent_id,
                                         const std::string& snapshot_id) {
  TAE_CHECK_OWNER(core_);
  for (const model::RunRecord& run : ReadableRuns(agent_id)) {
    if (!run.snapshot_id.empty() && run.snapshot_id == snapshot_id) {
      return absl::OkStatus();
    }
  }
  spdlog::warn("agent {}: snapshot {} refused (not one of its runs', or none)", agent_id,
               snapshot_id.substr(0, 80));
  return absl::NotFoundError("no such snapshot among the runs this agent holds");
}

absl::Status Controller::MayFetchBlobs(const std::string& agent_id, bool checkpoints,
                                       const std::vector<std::string>& hashes) {
  TAE_CHECK_OWNER(core_);
  std::set<std::string> readable;
  for (const model::RunRecord& run : ReadableRuns(agent_id)) {
    std::string manifest;
    if (checkpoints) {
      absl::StatusOr<std::optional<model::CheckpointRecord>> latest =
          store_->LatestCheckpoint(run.id);
      if (latest.ok() && latest->has_value()) {
        manifest = (*latest)->manifest;
      }
    } else if (!run.snapshot_id.empty()) {
      absl::StatusOr<model::SnapshotRecord> snapshot = store_->GetSnapshot(run.snapshot_id);
      if (snapshot.ok()) {
        manifest = snapshot->manifest;
      }
    }
    absl::StatusOr<std::vector<snapshot::Entry>> entries = snapshot::ParseManifest(manifest);
    if (entries.ok()) {
      for (const snapshot::Entry& entry : *entries) {
        readable.insert(entry.sha256);
      }
    }
  }
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (readable.count(hashes[i]) == 0) {
      spdlog::warn("agent {}: {} blob {} refused (not one of its runs', or none)", agent_id,
                   checkpoints ? "checkpoint" : "snapshot", hashes[i].substr(0, 80));
      return absl::NotFoundError(
          absl::StrCat("hashes[", i, "]: no such blob among the runs this agent holds"));
    }
  }
  return absl::OkStatus();
}

std::optional<std::vector<model::IngestEvent>> Controller::OwnEvents(
    const std::string& agent_id, const std::vector<model::IngestEvent>& events) {
  // Which (run, attempt) pairs this batch may write, decided once per run.
  std::map<std::pair<int64_t, int>, bool> allowed;
  const double now = Now();
  auto may = [&](const model::IngestEvent& event) {
    auto [it, fresh] = allowed.try_emplace({event.run_id, event.attempt}, false);
    if (fresh) {
      absl::StatusOr<model::RunRecord> run = store_->GetRun(event.run_id);
      it->second = run.ok() && lifecycle::MayReport(*run, AgentsOfRun(*run), agent_id,
                                                    event.attempt, now, options_.report_tail_s);
    }
    return it->second;
  };
  if (std::all_of(events.begin(), events.end(), may)) {
    return std::nullopt;  // the usual batch: every event its own
  }
  std::vector<model::IngestEvent> own;
  int64_t refused = 0;
  int64_t example_run = 0;
  for (const model::IngestEvent& event : events) {
    if (may(event)) {
      own.push_back(event);
    } else {
      ++refused;
      example_run = event.run_id;
    }
  }
  refused_events_ += refused;
  spdlog::warn("agent {}: {} events for runs it does not hold (e.g. r{}) refused, not stored",
               agent_id, refused, example_run);
  return own;
}

}  // namespace tae::controller
