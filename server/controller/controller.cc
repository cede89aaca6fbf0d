#include "server/controller/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/names.h"
#include "common/snapshot/snapshot.h"
#include "common/spec/spec.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"
#include "server/lifecycle/lifecycle.h"
#include "server/scheduler/scheduler.h"
#include "server/seeds/confirm.h"
#include "server/seeds/seeds.h"
#include "spdlog/spdlog.h"

namespace tae::controller {
namespace {

model::Labels LabelsOf(const nlohmann::json& config) {
  model::Labels labels;
  auto it = config.find("resources.labels");
  if (it != config.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      labels[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  return labels;
}

int IntOf(const nlohmann::json& config, const char* key, int fallback) {
  auto it = config.find(key);
  return it != config.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

std::string StringOf(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  return it != config.end() && it->is_string() ? it->get<std::string>() : "";
}

// The one reading of a run's resolved config for what it asks of the fleet (store::RunResources).
model::RunResources ResourcesOf(const nlohmann::json& config) {
  model::RunResources r;
  r.max_attempts = std::max(1, IntOf(config, "resources.max_attempts", 1));
  r.priority = IntOf(config, "resources.priority", 0);
  r.slots = IntOf(config, "resources.slots", 1);
  r.labels = LabelsOf(config);
  r.max_concurrent = IntOf(config, "resources.max_concurrent", 0);
  r.hosts = IntOf(config, "resources.hosts", 1);
  r.command = StringOf(config, "job.command");
  r.snapshot_id = StringOf(config, "job.snapshot");
  r.keep_checkpoints = std::max(0, IntOf(config, "resources.keep_checkpoints", 2));
  r.retry_on = StringOf(config, "resources.retry_on") == "any" ? "any" : "infra";
  if (auto it = config.find("resources.max_disk"); it != config.end() && it->is_number_integer()) {
    r.max_disk = std::max<int64_t>(0, it->get<int64_t>());
  }
  return r;
}

// What the report reads from the file: [report] and how train.seeds decides comparisons.
model::ExperimentReport ReportOf(const spec::Spec& spec) {
  model::ExperimentReport report;
  report.metrics = spec.report_metrics;
  report.goal = spec.report_goal;
  report.floor = spec.report_floor;
  report.correction = spec.report_correction;
  report.pairing = spec.report_pairing;
  if (spec.seeds_design.adaptive) {
    report.min_seeds = spec.seeds_design.min;
    report.max_seeds = spec.seeds_design.max;
    report.alpha = spec.seeds_design.alpha;
    report.margin = spec.seeds_design.margin;
  }
  for (const nlohmann::json& rung : spec.scale.rungs) {
    std::vector<std::string> parts;
    for (const auto& [key, value] : rung.items()) {
      parts.push_back(absl::StrCat(key, "=", value.is_string() ? value.get<std::string>()
                                                               : value.dump()));
    }
    report.scale.rungs.push_back(absl::StrJoin(parts, " "));
  }
  report.scale.params = spec.scale.params;
  report.scale.stop_rungs = spec.scale.stop_if.rungs;
  report.scale.stop_band = spec.scale.stop_if.band;
  const spec::SearchPlan& search = spec.search;
  report.search.declared = search.declared;
  report.search.method = search.asha() ? "asha" : "grid";
  report.search.metric = search.metric;
  report.search.goal = search.goal;
  report.search.min_steps = search.min_steps;
  report.search.reduction = search.reduction;
  report.search.bootstrap = search.bootstrap;
  report.search.within = search.within == spec::SearchWithin::kStudy ? "study" : "variant";
  report.search.confirm = static_cast<int>(search.confirm);
  return report;
}

model::NewExperiment ToNewExperiment(const SubmitInput& input, const spec::Spec& spec) {
  model::NewExperiment exp;
  exp.name = spec.name;
  exp.description = spec.description;
  exp.spec_hash = spec::SpecHash(spec);
  exp.spec_path = input.spec_path;
  exp.spec_text = input.spec_text;
  exp.overrides_json = nlohmann::json(input.overrides).dump();
  exp.report = ReportOf(spec);
  for (const spec::RunPlan& plan : spec::ExpandRuns(spec)) {
    model::NewRun run;
    run.variant = plan.variant;
    run.seed = plan.seed;
    run.config_json = plan.config.dump();
    run.resources = ResourcesOf(plan.config);
    // scale.stop_if: the larger rungs wait until the first K have ended and been judged.
    const int rung = spec::RungOf(plan.variant);
    if (spec.scale.stop_if.rungs > 0 && rung >= spec.scale.stop_if.rungs) {
      run.not_before = model::kHeldNotBefore;
      run.reason = absl::StrCat("submitted, held by scale.stop_if until rungs 0-",
                                spec.scale.stop_if.rungs - 1, " have ended");
    }
    exp.runs.push_back(std::move(run));
  }
  return exp;
}

}  // namespace

Controller::Controller(boost::asio::io_context* io, store::Store* store, Options options)
    : io_(io), store_(store), options_(options), liveness_timer_(*io), pack_timer_(*io) {}

absl::StatusOr<SubmitResult> Controller::Submit(const SubmitInput& input) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(spec::Spec spec,
                   spec::ParseSpec(input.spec_text, input.spec_path, input.overrides));
  if (!spec.job_code.empty() && input.snapshot_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot_id: the spec's [job] code = \"", spec.job_code,
                     "\" needs a snapshot; taectl submit mounts it and passes its id"));
  }
  if (!input.snapshot_id.empty()) {
    absl::StatusOr<model::SnapshotRecord> snapshot = store_->GetSnapshot(input.snapshot_id);
    if (!snapshot.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot_id: no snapshot ", input.snapshot_id, " (mount it first)"));
    }
    spec.snapshot_id = input.snapshot_id;
  }
  std::string hash = spec::SpecHash(spec);
  if (!input.force_new) {
    ASSIGN_OR_RETURN(std::optional<int64_t> existing, store_->FindExperimentByHash(hash));
    if (existing.has_value()) {
      // The same runs; the file's [report] may have changed, and the latest is what it shows.
      RETURN_IF_ERROR(store_->SetExperimentReport(*existing, ReportOf(spec)));
      return SubmitResult{*existing, true};
    }
  }
  ASSIGN_OR_RETURN(int64_t id, store_->CreateExperiment(ToNewExperiment(input, spec), Now()));
  spdlog::info("experiment e{} '{}' submitted", id, spec.name);
  if (spec.search.asha()) {
    StartSearch(id, false);
  }
  Schedule();
  return SubmitResult{id, false};
}

absl::StatusOr<int> Controller::Cancel(const std::string& target, const std::string& reason) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, RunsOfTarget(target));
  int affected = 0;
  for (const model::RunRecord& run : runs) {
    if (model::IsFinal(run.state)) {
      continue;
    }
    RETURN_IF_ERROR(CancelRun(run, reason.empty() ? "cancelled by user" : reason));
    ++affected;
  }
  Schedule();
  return affected;
}

absl::StatusOr<std::vector<model::RunRecord>> Controller::RunsOfTarget(const std::string& target) {
  std::vector<model::RunRecord> runs;
  int64_t run_id = 0;
  if (target.size() > 1 && (target[0] == 'r' || target[0] == 'R') &&
      absl::SimpleAtoi(target.substr(1), &run_id)) {
    ASSIGN_OR_RETURN(model::RunRecord run, store_->GetRun(run_id));
    runs.push_back(std::move(run));
    return runs;
  }
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(target));
  return store_->ListRuns(id);
}

absl::Status Controller::CancelRun(const model::RunRecord& run, const std::string& reason) {
  const std::vector<std::string> agents = AgentsOfRun(run);
  bool on_agent = run.state == model::RunState::kAssigned || run.state == model::RunState::kRunning;
  // The agents kill the process groups and report `exited` with cancelled = true; the first such
  // exit ends the run (and, for a gang, stops the other ranks).
  if (on_agent && StopRanks(run.id, run.attempt, agents, "", reason) > 0) {
    return absl::OkStatus();
  }
  Release(run.id, agents);
  RETURN_IF_ERROR(
      store_->Transition(run.id, lifecycle::Finish(model::RunState::kCancelled, reason, Now()))
          .status());
  RunFinal(run.id, run.experiment_id);
  return absl::OkStatus();
}

std::vector<std::string> Controller::AgentsOfRun(const model::RunRecord& run) {
  absl::StatusOr<std::vector<std::string>> agents = store_->AgentsOf(run);
  if (!agents.ok()) {
    spdlog::error("run r{}: {}", run.id, agents.status().ToString());
    return {run.agent_id};
  }
  return *std::move(agents);
}

int Controller::StopRanks(int64_t run_id, int attempt, const std::vector<std::string>& agents,
                          const std::string& except, const std::string& reason) {
  int sent = 0;
  for (const std::string& id : agents) {
    registry::Agent* agent = registry_.Find(id);
    if (id == except || agent == nullptr || !agent->connected) {
      continue;
    }
    tae::v1::TaedMessage message;
    tae::v1::CancelRun* cancel = message.mutable_cancel_run();
    cancel->set_run_id(run_id);
    cancel->set_attempt(attempt);
    cancel->set_reason(reason);
    agent->channel->Send(message);
    ++sent;
  }
  return sent;
}

void Controller::Release(int64_t run_id, const std::vector<std::string>& agents) {
  for (const std::string& id : agents) {
    registry_.RemoveRun(id, run_id);
  }
}

int MasterPort(int64_t run_id, int attempt) {
  // Deterministic, so every rank is told the same port without a round trip; differs between
  // attempts so a new attempt never meets the old one's listener.
  return 20000 + static_cast<int>((run_id * 8 + attempt) % 30000);
}

double Controller::Now() const { return options_.clock ? options_.clock() : WallNow(); }

void Controller::Noted(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    ++store_failures_;
    spdlog::error("cannot {}: {} ({} such failures so far)", what, status.ToString(),
                  store_failures_);
  }
}

void Controller::Schedule() {
  TAE_CHECK_OWNER(core_);
  EndHeldGangs();
  AddDueSeeds();
  DecideDueLadders();
  PlaceQueued();
  PublishDemand();
  MaybePack();
}

bool Controller::RefreshQueue() {
  model::QueueChanges changes = store_->TakeQueueChanges();
  if (changes.all || !queue_.loaded()) {
    absl::StatusOr<std::vector<model::QueueRow>> rows = store_->QueueRows();
    absl::StatusOr<std::set<int64_t>> paused = store_->PausedExperiments();
    if (!rows.ok() || !paused.ok()) {
      Noted(rows.ok() ? paused.status() : rows.status(), "read the queue");
      queue_.Invalidate();  // read it whole next time
      return false;
    }
    queue_.Reset(std::move(*rows));
    queue_.SetPaused(std::move(*paused));
    return true;
  }
  if (!changes.runs.empty()) {
    absl::StatusOr<std::vector<model::QueueRow>> rows = store_->QueueRows(changes.runs);
    if (!rows.ok()) {
      Noted(rows.status(), "read the queue's changes");
      queue_.Invalidate();
      return false;
    }
    queue_.Update(changes.runs, std::move(*rows));
  }
  if (changes.paused) {
    absl::StatusOr<std::set<int64_t>> paused = store_->PausedExperiments();
    if (!paused.ok()) {
      Noted(paused.status(), "read the paused experiments");
      queue_.Invalidate();
      return false;
    }
    queue_.SetPaused(std::move(*paused));
  }
  return true;
}

void Controller::SetPoolSlices(const std::string& pool, std::vector<provider::CloudVm> slices) {
  core_.Check("Controller::SetPoolSlices");
  if (provider_log_.SetVms(pool, std::move(slices))) {
    Schedule();
  }
}

void Controller::PublishDemand() {
  if (options_.demand == nullptr) {
    return;
  }
  if (!RefreshQueue()) {
    // Nothing is published: the provider skips its rounds rather than act on a wrong picture.
    return;
  }
  options_.demand->Publish(TpuDemandOf(options_.demand_pools, queue_.Runs(), registry_));
}

void Controller::PlaceQueued() {
  if (!RefreshQueue()) {
    return;
  }
  const std::vector<scheduler::QueuedRun>& queue = queue_.Runs();
  if (queue.empty()) {
    return;
  }
  const double now = Now();
  scheduler::Context context;
  context.now = now;
  absl::StatusOr<std::map<int64_t, int>> active = store_->ActiveCounts();
  if (!active.ok()) {
    Noted(active.status(), "count the active runs");
    return;
  }
  context.active = std::move(*active);
  context.pool_notes = PoolNotesOf(options_.demand_pools, provider_log_.vms());
  std::vector<scheduler::AgentCapacity> capacity;
  for (const registry::Agent* agent : registry_.Connected()) {
    capacity.push_back({agent->id, agent->free_slots(),
                        agent->draining || !agent->quarantine.empty() ? 0 : agent->slots,
                        agent->labels});
  }
  scheduler::Decision decision = scheduler::Decide(queue, capacity, context);
  const std::vector<scheduler::Placement>& placements = decision.placements;
  if (absl::Status stored = store_->SetWaitingReasons(queue_.ChangedReasons(decision.waiting));
      !stored.ok()) {
    Noted(stored, "store why runs wait");
    queue_.Invalidate();  // what is stored is not known: read it again
  }
  if (decision.wake_at > 0) {
    WakeAt(decision.wake_at);
  }
  for (const scheduler::Placement& placement : placements) {
    const std::vector<std::string> agents =
        placement.gang.empty() ? std::vector<std::string>{placement.agent_id} : placement.gang;
    absl::StatusOr<model::RunRecord> run =
        store_->Transition(placement.run_id, lifecycle::Assign(agents, Now()));
    if (!run.ok()) {
      spdlog::error("scheduler: {}", run.status().ToString());
      continue;
    }
    for (const std::string& id : agents) {
      registry_.AddRun(id, run->id, run->slots);
    }
    tae::v1::TaedMessage message;
    tae::v1::StartRun* start = message.mutable_start_run();
    start->set_run_id(run->id);
    start->set_attempt(run->attempt);
    start->set_experiment_id(run->experiment_id);
    start->set_variant(run->variant);
    start->set_seed(run->seed);
    start->set_config_json(run->config_json);
    start->set_command(run->command);
    start->set_snapshot_id(run->snapshot_id);
    start->set_max_disk_bytes(run->max_disk);
    // Every rank restores the run's last checkpoint (rank 0 uploaded it).
    absl::StatusOr<std::optional<model::CheckpointRecord>> checkpoint =
        store_->LatestCheckpoint(run->id);
    if (!checkpoint.ok()) {
      spdlog::error("run r{}: its checkpoint: {}", run->id, checkpoint.status().ToString());
    } else if (checkpoint->has_value()) {
      start->mutable_checkpoint()->set_step((*checkpoint)->step);
      start->mutable_checkpoint()->set_manifest((*checkpoint)->manifest);
    }
    if (agents.size() > 1) {
      // A gang: every rank starts now (all hosts were free together); the processes meet at
      // rank 0's rendezvous (c10d's TCPStore for tae-train).
      const std::string& master = registry_.Find(agents[0])->address;
      start->set_world_size(static_cast<int>(agents.size()));
      start->set_master_addr(master.empty() ? "127.0.0.1" : master);
      start->set_master_port(MasterPort(run->id, run->attempt));
      for (const std::string& id : agents) {
        const std::string& address = registry_.Find(id)->address;
        start->add_host_addrs(address.empty() ? "127.0.0.1" : address);
      }
    }
    for (size_t rank = 0; rank < agents.size(); ++rank) {
      start->set_rank(static_cast<int>(rank));
      registry_.Find(agents[rank])->channel->Send(message);
    }
    spdlog::info("run r{} (attempt {}) -> {}", run->id, run->attempt, absl::StrJoin(agents, ", "));
  }
}

absl::StatusOr<ScrapPlan> Controller::Scrap(const ScrapInput& input) {
  TAE_CHECK_OWNER(core_);
  if (input.ids.empty() == !(input.all || input.older_than_s > 0) ||
      (input.all && input.older_than_s > 0)) {
    return absl::InvalidArgumentError(
        "ids, all, older_than_s: give exactly one of snapshot ids, all, or older_than_s");
  }
  ASSIGN_OR_RETURN(std::vector<model::SnapshotRecord> snapshots, store_->ListSnapshots());
  ASSIGN_OR_RETURN(auto usages, store_->SnapshotUsages());
  std::vector<std::string> chosen;
  const double now = Now();
  for (const std::string& wanted : input.ids) {
    if (wanted.size() < 8 || wanted.size() > 64 ||
        wanted.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ids: '", wanted.substr(0, 80), "' is not a snapshot id (8 to 64 lowercase hex digits)"));
    }
    std::vector<std::string> matches;
    for (const model::SnapshotRecord& snap : snapshots) {
      if (snap.id.compare(0, wanted.size(), wanted) == 0) {
        matches.push_back(snap.id);
      }
    }
    if (matches.empty()) {
      return absl::NotFoundError(absl::StrCat("ids: no snapshot ", wanted));
    }
    if (matches.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("ids: ", wanted, " matches ", matches.size(),
                                                     " snapshots; give more digits"));
    }
    chosen.push_back(matches[0]);
  }
  for (const model::SnapshotRecord& snap : snapshots) {
    if (input.all || (input.older_than_s > 0 && now - snap.created_at > input.older_than_s)) {
      chosen.push_back(snap.id);
    }
  }
  ScrapPlan plan;
  std::set<std::string> removed;
  for (const std::string& id : chosen) {
    auto usage = usages.find(id);
    if (usage != usages.end() && usage->second.active_runs > 0) {
      plan.kept.push_back(
          absl::StrCat(id, ": ", usage->second.active_runs, " queued or running runs use it"));
      continue;
    }
    if (removed.insert(id).second) {
      plan.removed.push_back(id);
    }
  }
  for (const model::SnapshotRecord& snap : snapshots) {
    if (removed.count(snap.id) > 0) {
      continue;
    }
    ASSIGN_OR_RETURN(model::SnapshotRecord full, store_->GetSnapshot(snap.id));
    ASSIGN_OR_RETURN(std::vector<snapshot::Entry> entries, snapshot::ParseManifest(full.manifest));
    for (const snapshot::Entry& entry : entries) {
      plan.referenced.insert(entry.sha256);
    }
  }
  if (input.dry_run) {
    return plan;
  }
  for (const std::string& id : plan.removed) {
    RETURN_IF_ERROR(store_->DeleteSnapshot(id).status());
  }
  tae::v1::TaedMessage message;
  for (const std::string& id : plan.removed) {
    message.mutable_scrap()->add_snapshot_ids(id);
  }
  if (!plan.removed.empty()) {
    for (const registry::Agent* agent : registry_.Connected()) {
      agent->channel->Send(message);
      plan.agents_notified += 1;
    }
    spdlog::info("scrapped {} snapshots; told {} agents", plan.removed.size(),
                 plan.agents_notified);
  }
  return plan;
}

void Controller::AddDueSeeds() {
  std::set<int64_t> due;
  due.swap(seeds_due_);
  for (int64_t experiment_id : due) {
    GrowSeeds(experiment_id);
  }
}

void Controller::GrowSeeds(int64_t experiment_id) {
  absl::StatusOr<model::ExperimentSource> source = store_->GetExperimentSource(experiment_id);
  if (!source.ok()) {
    Noted(source.status(), "read an experiment for adaptive seeds");
    return;
  }
  const model::ExperimentReport& report = source->report;
  const bool adaptive = report.min_seeds > 0;
  if (!adaptive && report.search.confirm <= 0) {
    return;  // a list of seeds and no confirmation: nothing to add
  }
  const std::string metric = adaptive ? seeds::PrimaryMetric(report) : report.search.metric;
  absl::StatusOr<std::vector<model::RunRecord>> runs = store_->ListRuns(experiment_id);
  absl::StatusOr<std::vector<model::FinalValue>> values =
      runs.ok() ? store_->FinalValues(experiment_id, {metric})
                : absl::StatusOr<std::vector<model::FinalValue>>(runs.status());
  if (!values.ok()) {
    Noted(values.status(), "read an experiment's runs for adaptive seeds");
    return;
  }
  std::vector<SeedsToAdd> adds;
  std::string held;
  if (adaptive) {
    seeds::Plan plan = seeds::PlanSeeds(report, *runs, *values);
    held = absl::StrJoin(plan.held, "; ");
    for (seeds::NewSeeds& add : plan.add) {
      spdlog::info("e{}: adaptive seeds add {} seed(s) to {}: {}", experiment_id, add.seeds.size(),
                   add.variant, add.why);
      adds.push_back({std::move(add.variant), std::move(add.seeds), add.like_run,
                      absl::StrCat("added by adaptive seeds: ", add.why), false});
    }
  } else {
    seeds::ConfirmPlan plan = seeds::PlanConfirm(report.search, *runs, *values);
    held = std::move(plan.held);
    for (seeds::ConfirmRuns& add : plan.add) {
      spdlog::info("e{}: search.confirm adds {} fresh seed(s) to {}: {}", experiment_id,
                   add.seeds.size(), add.variant, add.why);
      adds.push_back({std::move(add.variant), std::move(add.seeds), add.like_run,
                      absl::StrCat("confirms the search: ", add.why), true});
    }
  }
  if (std::string& before = seeds_held_[experiment_id]; before != held) {
    if (!held.empty()) {
      spdlog::warn("e{}: {} hold back {}", experiment_id,
                   adaptive ? "adaptive seeds" : "search.confirm", held);
    }
    before = std::move(held);
  }
  if (!adds.empty()) {
    AddRunsAtSeeds(experiment_id, *source, *runs, adds);
  }
}

void Controller::AddRunsAtSeeds(int64_t experiment_id, const model::ExperimentSource& source,
                                const std::vector<model::RunRecord>& runs,
                                const std::vector<SeedsToAdd>& adds) {
  std::map<int64_t, const model::RunRecord*> by_id;
  for (const model::RunRecord& run : runs) {
    by_id[run.id] = &run;
  }
  std::vector<model::NewRun> added;
  std::optional<std::string> job_command;
  for (const SeedsToAdd& add : adds) {
    const nlohmann::json like =
        nlohmann::json::parse(by_id.at(add.like_run)->config_json, nullptr, false);
    if (!like.is_object()) {
      spdlog::error("e{}: r{}'s stored config is not JSON; no seeds added to {}", experiment_id,
                    add.like_run, add.variant);
      continue;
    }
    // The [job] command template (a command may name {train.seed}), read once per call.
    if (like.contains("job.command") && !job_command.has_value()) {
      absl::StatusOr<spec::Spec> spec =
          spec::ParseSpec(source.spec_text, source.spec_path, source.overrides);
      if (!spec.ok()) {
        spdlog::error("e{}: cannot read its spec again, so add no seeds: {}", experiment_id,
                      spec.status().ToString());
        return;
      }
      job_command = spec->job_command;
    }
    for (int64_t seed : add.seeds) {
      const nlohmann::json config = spec::ConfigAtSeed(
          like, seed, like.contains("job.command") ? *job_command : std::string());
      model::NewRun run;
      run.variant = add.variant;
      run.seed = seed;
      run.config_json = config.dump();
      run.resources = ResourcesOf(config);
      run.reason = add.reason;
      run.confirm = add.confirm;
      added.push_back(std::move(run));
    }
  }
  Noted(store_->AddRuns(experiment_id, added, Now()), "add seeds to an experiment");
}

double Controller::GangBlameWindow() const {
  return options_.gang_blame_window_s > 0 ? options_.gang_blame_window_s
                                          : options_.agent_timeout_s + options_.agent_grace_s + 10;
}

void Controller::EndHeldGangs() {
  const double now = Now();
  for (auto it = held_gangs_.begin(); it != held_gangs_.end();) {
    absl::StatusOr<model::RunRecord> run = store_->GetRun(*it);
    if (!run.ok() || run->gang_failure.empty()) {
      it = held_gangs_.erase(it);  // ended or requeued meanwhile
      continue;
    }
    const double due = run->gang_failure_at + GangBlameWindow();
    if (now < due) {
      WakeAt(due);
      ++it;
      continue;
    }
    const std::vector<std::string> agents = AgentsOfRun(*run);
    absl::StatusOr<model::RunRecord> next =
        store_->Transition(run->id, lifecycle::GangWindowEnd(now, GangBlameWindow()));
    Noted(next.status(), "end a gang's held failure");
    it = held_gangs_.erase(it);
    if (next.ok() && next->state != run->state) {
      Release(run->id, agents);
      StopRanks(run->id, run->attempt, agents, "", "the gang's run ended (its failure was held)");
      spdlog::info("run r{} {}: {}", run->id, model::ToString(next->state), next->reason);
      if (model::IsFinal(next->state)) {
        RunFinal(run->id, run->experiment_id);
      }
    }
  }
}

double Controller::RetryDelay(int attempt) const {
  const double delay = options_.retry_backoff_s * std::pow(2.0, std::max(0, attempt - 1));
  return std::min(delay, options_.retry_backoff_max_s);
}

void Controller::WakeAt(double at) {
  if (wake_at_ > 0 && wake_at_ <= at) {
    return;  // an earlier wake-up runs Schedule(), which sets the next one
  }
  wake_at_ = at;
  // At most a day ahead: a later wake-up is set again by the Schedule() this one runs.
  const double wait_s = std::clamp(at - Now(), 0.0, 86400.0) + 0.05;
  auto timer = std::make_shared<boost::asio::steady_timer>(
      *io_, std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  timer->async_wait([this, timer, at](const boost::system::error_code& error) {
    if (error || wake_at_ != at) {
      return;  // superseded by an earlier wake-up
    }
    wake_at_ = 0;
    Schedule();
  });
}

absl::StatusOr<int64_t> Controller::SetPaused(const std::string& experiment, bool paused) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(experiment));
  RETURN_IF_ERROR(store_->SetExperimentPaused(id, paused));
  spdlog::info("experiment e{} {}", id, paused ? "paused" : "resumed");
  Schedule();
  return id;
}

absl::StatusOr<bool> Controller::AddSnapshot(const std::string& id,
                                             const std::optional<model::SnapshotRecord>& fresh) {
  TAE_CHECK_OWNER(core_);
  absl::StatusOr<model::SnapshotRecord> existing = store_->GetSnapshot(id);
  if (existing.ok()) {
    return true;
  }
  if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  if (!fresh.has_value()) {
    return absl::NotFoundError(absl::StrCat("id: no snapshot ", id, "; send its manifest"));
  }
  RETURN_IF_ERROR(store_->PutSnapshot(*fresh));
  spdlog::info("snapshot {} from {}: {} files, {} bytes", fresh->id.substr(0, 12), fresh->source,
               fresh->files, fresh->bytes);
  return false;
}

absl::StatusOr<int> Controller::Retry(const std::string& experiment) {
  TAE_CHECK_OWNER(core_);
  ASSIGN_OR_RETURN(int64_t id, store_->ResolveExperiment(experiment));
  ASSIGN_OR_RETURN(int n,
                   store_->TransitionAll(id, lifecycle::Retry("retried (taectl retry)", Now())));
  spdlog::info("experiment e{}: {} run(s) requeued by retry", id, n);
  Schedule();
  return n;
}

absl::Status Controller::Drain(const std::string& agent_id, bool drain) {
  TAE_CHECK_OWNER(core_);
  registry::Agent* agent = registry_.Find(agent_id);
  if (agent == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("agent_id: no agent '", agent_id, "' (taectl agents lists them)"));
  }
  agent->draining = drain;
  RETURN_IF_ERROR(store_->SetAgentState(agent_id, drain ? "draining" : "ready", Now()));
  if (!drain && !agent->quarantine.empty()) {
    spdlog::info("agent {}: quarantine lifted ({})", agent_id, agent->quarantine);
    agent->quarantine.clear();
    agent->infra_faults = 0;
    RETURN_IF_ERROR(store_->SetAgentQuarantine(agent_id, ""));
    RETURN_IF_ERROR(store_->SetAgentInfraFaults(agent_id, 0));
  }
  spdlog::info("agent {} {}", agent_id, drain ? "draining (taectl agents drain)" : "undrained");
  Schedule();
  return absl::OkStatus();
}

}  // namespace tae::controller
