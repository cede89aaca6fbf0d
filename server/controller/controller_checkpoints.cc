// Controller: checkpoints off the worker (docs/checkpoints.md). Blob bytes never pass through
// here: the adapter checks the blobs on the checkpoint blob worker between BeginCheckpoint and
// CompleteCheckpoint, and removes what a completion or a scrap leaves unreferenced.

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status/macros.h"
#include "proto/tae/v1/artifact.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"

namespace tae::controller {

absl::Status UnstoredBlobs(size_t missing, size_t of) {
  return absl::FailedPreconditionError(
      absl::StrCat("manifest: ", missing, " of its ", of,
                   " blobs are not stored; upload them and commit again"));
}

absl::Status Controller::CheckCheckpoint(const CheckpointOffer& offer, const std::string& agent) {
  TAE_CHECK_OWNER(core_);
  if (!offer.artifact.empty() && !v1::IsArtifactName(offer.artifact)) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: '", offer.artifact.substr(0, 80),
                     "' is not an artifact name (1-64 of [A-Za-z0-9._-], not starting with .)"));
  }
  // A run the agent is not a host of reads as one that does not exist: the answer tells nothing
  // of other runs (whether they exist, their attempt or state; docs/security.md).
  const absl::Status not_theirs = absl::PermissionDeniedError(
      absl::StrCat("run_id: r", offer.run_id, " is not agent ", agent, "'s"));
  absl::StatusOr<model::RunRecord> found = store_->GetRun(offer.run_id);
  if (absl::IsNotFound(found.status())) {
    return not_theirs;
  }
  RETURN_IF_ERROR(found.status());
  const model::RunRecord& run = *found;
  const std::vector<std::string> hosts = AgentsOfRun(run);
  if (std::find(hosts.begin(), hosts.end(), agent) == hosts.end()) {
    return not_theirs;
  }
  const bool allowed =
      offer.artifact.empty()
          ? lifecycle::MayCheckpoint(run, hosts, agent, offer.attempt, Now(),
                                     options_.checkpoint_tail_s)
          : lifecycle::MayReport(run, hosts, agent, offer.attempt, Now(), options_.report_tail_s);
  if (offer.attempt != run.attempt) {
    return absl::FailedPreconditionError(absl::StrCat("attempt: r", run.id, " is at attempt ",
                                                      run.attempt, "; attempt ", offer.attempt,
                                                      " is superseded"));
  }
  if (!allowed) {
    return absl::FailedPreconditionError(
        absl::StrCat("run_id: r", run.id, " is ", model::ToString(run.state),
                     ": its attempt is over, nothing more is stored for it"));
  }
  if (offer.artifact.empty() && run.keep_checkpoints <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run_id: r", run.id, " keeps no checkpoints (resources.keep_checkpoints = 0)"));
  }
  if (options_.max_checkpoint_bytes > 0 && offer.bytes > options_.max_checkpoint_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "manifest: the checkpoint is ", offer.bytes, " bytes, over taed's cap of ",
        options_.max_checkpoint_bytes, " (taed --max-checkpoint-bytes, TAE_MAX_CHECKPOINT_BYTES)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Controller::NewBlobs(const CheckpointOffer& offer) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(std::set<std::string> named, store_->RunCheckpointBlobs(offer.run_id));
  std::vector<std::string> out;
  for (const std::string& hash : offer.hashes) {
    if (named.count(hash) == 0) {
      out.push_back(hash);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Controller::UncommittedBlobs(
    const std::vector<std::string>& hashes) {
  TAE_CHECK_OWNER(core_);
  return store_->UnnamedCheckpointBlobs(hashes);
}

absl::StatusOr<int64_t> Controller::BeginCheckpoint(const CheckpointOffer& offer,
                                                    const std::string& agent,
                                                    const std::set<std::string>& held) {
  TAE_CHECK_OWNER(core_);
  RETURN_IF_ERROR(CheckCheckpoint(offer, agent));
  ASSIGN_OR_RETURN(std::vector<std::string> fresh, NewBlobs(offer));
  const size_t unheld = std::count_if(fresh.begin(), fresh.end(),
                                      [&](const std::string& h) { return held.count(h) == 0; });
  if (unheld > 0) {
    return UnstoredBlobs(unheld, offer.hashes.size());
  }
  model::CheckpointRecord record;
  record.run_id = offer.run_id;
  record.attempt = offer.attempt;
  record.step = offer.step;
  record.manifest_id = offer.manifest_id;
  record.manifest = offer.manifest;
  record.files = offer.files;
  record.bytes = offer.bytes;
  record.created_at = Now();
  record.artifact = offer.artifact;
  return store_->BeginCheckpoint(record, offer.hashes);
}

absl::StatusOr<model::CheckpointsDropped> Controller::CompleteCheckpoint(int64_t run_id,
                                                                         int64_t id) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
  return store_->CompleteCheckpoint(id, std::max(1, run.keep_checkpoints));
}

absl::Status Controller::AbandonCheckpoint(int64_t id) {
  TAE_CHECK_OWNER(core_);
  return store_->DeleteCheckpoints({id}).status();
}

absl::StatusOr<CheckpointScrap> Controller::ScrapCheckpoints(const ScrapInput& input) {
  TAE_CHECK_OWNER(core_);
  if (input.ids.empty() == !(input.all || input.older_than_s > 0) ||
      (input.all && input.older_than_s > 0)) {
    return absl::InvalidArgumentError(
        "ids, all, older_than_s: give exactly one of runs or experiments, all, or older_than_s");
  }
  // Runs named explicitly lose their checkpoints whatever their state.
  std::map<int64_t, bool> named;  // run id -> named as a run (not through its experiment)
  for (const std::string& target : input.ids) {
    ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, RunsOfTarget(target));
    const bool as_run = runs.size() == 1 && (target[0] == 'r' || target[0] == 'R');
    for (const model::RunRecord& run : runs) {
      named[run.id] = named[run.id] || as_run;
    }
  }
  ASSIGN_OR_RETURN(std::vector<model::CheckpointRecord> checkpoints,
                   store_->ListCheckpoints(0, input.artifacts));
  const double now = Now();
  CheckpointScrap plan;
  std::vector<int64_t> doomed;
  std::map<int64_t, bool> active;  // run id -> queued, assigned or running
  for (const model::CheckpointRecord& c : checkpoints) {
    auto target = named.find(c.run_id);
    if (!input.all && input.older_than_s <= 0 && target == named.end()) {
      continue;
    }
    if (input.older_than_s > 0 && now - c.created_at <= input.older_than_s) {
      continue;
    }
    if (active.count(c.run_id) == 0) {
      ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(c.run_id));
      active[c.run_id] = !model::IsFinal(run.state);
    }
    const bool explicit_run = target != named.end() && target->second;
    if (active[c.run_id] && !explicit_run) {
      const std::string why = absl::StrCat("r", c.run_id, ": active (name the run to remove them)");
      if (plan.kept.empty() || plan.kept.back() != why) {
        plan.kept.push_back(why);
      }
      continue;
    }
    plan.removed.push_back(c.artifact.empty() ? absl::StrCat("r", c.run_id, " step ", c.step)
                                              : absl::StrCat("r", c.run_id, " ", c.artifact));
    doomed.push_back(c.id);
  }
  plan.checkpoints = static_cast<int>(doomed.size());
  if (input.dry_run) {
    return plan;
  }
  RETURN_IF_ERROR(store_->DeleteCheckpoints(doomed).status());
  ASSIGN_OR_RETURN(plan.referenced, store_->CheckpointBlobs());
  return plan;
}

}  // namespace tae::controller
