// Controller: the agent side — registration and reconciliation, event ingest, loss and grace.

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "boost/asio/steady_timer.hpp"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "spdlog/spdlog.h"

namespace tae::controller {

void Controller::OnRegister(std::shared_ptr<registry::AgentChannel> channel, AgentHello hello) {
  TAE_CHECK_OWNER(core_);
  registry::Agent& agent = hello.agent;
  if (options_.credentials != nullptr && !options_.credentials->Live(agent.id)) {
    // Revoked between the stream's last check and now: a revoked id never registers again.
    spdlog::warn("agent {}: registering refused: its credential was revoked", agent.id);
    channel->Close();
    return;
  }
  if (absl::Status judged = JudgeRegistration(agent); !judged.ok()) {
    // Once a minute per agent id: a refused agent retries with backoff.
    if (std::optional<int64_t> dropped = registration_refusals_.Admit(agent.id, Now())) {
      spdlog::warn("registering refused: {}{}", std::string(judged.message()),
                   *dropped > 0 ? absl::StrCat(" (and ", *dropped, " more since)") : "");
    }
    channel->Close();
    return;
  }
  double now = Now();
  agent.connected = true;
  agent.connected_at = now;
  agent.last_seen = now;
  agent.channel = channel;
  std::string id = agent.id;
  if (absl::StatusOr<std::map<std::string, std::string>> q = store_->AgentQuarantines(); q.ok()) {
    if (auto it = q->find(id); it != q->end()) {
      agent.quarantine = it->second;  // kept until `taectl agents undrain`
    }
  } else {
    spdlog::error("agent {}: {}", id, q.status().ToString());
  }
  // Its faults in a row so far: a reconnect (or a restart of taed) does not wipe them.
  if (absl::StatusOr<int> faults = store_->AgentInfraFaults(id); faults.ok()) {
    agent.infra_faults = *faults;
  } else {
    spdlog::error("agent {}: {}", id, faults.status().ToString());
  }
  model::AgentRecord record{agent.id,      agent.host, agent.slots, agent.labels,
                            agent.version, "ready",    now,         now};
  if (absl::Status s = store_->UpsertAgent(record); !s.ok()) {
    spdlog::error("agent {}: {}", id, s.ToString());
  }
  if (std::shared_ptr<registry::AgentChannel> previous = registry_.Connect(std::move(agent))) {
    previous->Close();
  }
  spdlog::info("agent {} registered ({} held runs)", id, hello.held.size());

  tae::v1::TaedMessage registered;
  registered.mutable_registered()->set_agent_id(id);
  registered.mutable_registered()->set_heartbeat_s(options_.agent_timeout_s / 4);
  channel->Send(registered);

  // Reconcile: runs the store places on this agent but the agent no longer holds are lost;
  // runs the agent holds that the store has finished are cancelled on the agent.
  std::set<std::pair<int64_t, int>> held(hello.held.begin(), hello.held.end());
  absl::StatusOr<std::vector<model::RunRecord>> active = store_->ActiveRuns();
  if (active.ok()) {
    for (const model::RunRecord& run : *active) {
      const std::vector<std::string> agents = AgentsOfRun(run);
      if (std::find(agents.begin(), agents.end(), id) == agents.end()) {
        continue;
      }
      if (held.erase({run.id, run.attempt}) > 0) {
        registry_.AddRun(id, run.id, run.slots);
      } else {
        // Lost with this host; a gang's other ranks are stopped and it is requeued as a whole.
        const std::string reason = absl::StrCat("agent ", id, " reconnected without it");
        Release(run.id, agents);
        absl::StatusOr<model::RunRecord> next =
            store_->Transition(run.id, lifecycle::Lost(reason, now, RetryDelay(run.attempt)));
        Noted(next.status(), "lose a run of a reconnected agent");
        if (next.ok() && model::IsFinal(next->state)) {
          RunFinal(run.id, run.experiment_id);
        }
        StopRanks(run.id, run.attempt, agents, id, reason);
      }
    }
  }
  for (const auto& [run_id, attempt] : held) {
    tae::v1::TaedMessage cancel;
    cancel.mutable_cancel_run()->set_run_id(run_id);
    cancel.mutable_cancel_run()->set_attempt(attempt);
    cancel.mutable_cancel_run()->set_reason("taed no longer expects this run");
    channel->Send(cancel);
  }
  Schedule();
}

absl::Status Controller::OnEvents(const std::string& agent_id, registry::AgentChannel* channel,
                                  const std::vector<model::IngestEvent>& events,
                                  uint64_t last_seq) {
  TAE_CHECK_OWNER(core_);
  const std::optional<std::vector<model::IngestEvent>> filtered = OwnEvents(agent_id, events);
  const std::vector<model::IngestEvent>& own = filtered ? *filtered : events;
  absl::StatusOr<std::vector<model::RunEnded>> ended =
      store_->Ingest(agent_id, own, lifecycle::IngestRules());
  if (!ended.ok()) {
    // Not acked: the agent keeps the events. Closing the stream makes it reconnect and send
    // them again, so a passing fault (disk full, a locked database) heals by itself.
    spdlog::error("ingest from {} failed: {}; asking it to resend", agent_id,
                  ended.status().ToString());
    channel->Close();
    return ended.status();
  }
  if (registry::Agent* agent = registry_.Find(agent_id); agent != nullptr) {
    agent->last_seen = Now();
  }
  tae::v1::TaedMessage ack;
  ack.mutable_ack()->set_seq(last_seq);
  channel->Send(ack);
  ObserveSearch(own);  // before the ends: a run's last points come first
  for (const model::RunEnded& run : *ended) {
    if (run.failure_held) {
      // Not ended: the other ranks are stopped while a lost host would still take the blame.
      held_gangs_.insert(run.run_id);
      StopRanks(run.run_id, run.attempt, run.gang, run.agent_id,
                absl::StrCat("rank on ", run.agent_id, " of the gang failed"));
      spdlog::info(
          "run r{}: a rank on {} failed; the failure is held up to {:.0f} s for a lost "
          "host",
          run.run_id, run.agent_id, GangBlameWindow());
      WakeAt(Now() + GangBlameWindow());
      continue;
    }
    if (run.gang.empty()) {
      registry_.RemoveRun(run.agent_id, run.run_id);
    } else {
      // The ranks still running (after a failure, a cancel or a loss) are stopped together.
      Release(run.run_id, run.gang);
      StopRanks(run.run_id, run.attempt, run.gang, run.agent_id,
                absl::StrCat("the gang's run ended on ", run.agent_id, " (",
                             model::ToString(run.state), ")"));
    }
    spdlog::info("run r{} {}", run.run_id, model::ToString(run.state));
    RunFinal(run.run_id, run.experiment_id);
  }
  CountInfraFaults(agent_id, own);
  if (!ended->empty()) {
    Schedule();
  }
  return absl::OkStatus();
}

void Controller::CountInfraFaults(const std::string& agent_id,
                                  const std::vector<model::IngestEvent>& events) {
  registry::Agent* agent = registry_.Find(agent_id);
  if (agent == nullptr) {
    return;
  }
  const int before = agent->infra_faults;
  for (const model::IngestEvent& event : events) {
    if (event.kind != model::IngestEvent::Kind::kExited) {
      continue;
    }
    if (event.infra && event.by_other_job) {
      continue;  // another job's doing (it filled the disk): that job fails, not this worker
    }
    if (event.infra) {
      agent->infra_faults += 1;
      if (agent->infra_faults >= kQuarantineAfter && agent->quarantine.empty()) {
        Quarantine(agent_id, absl::StrCat(agent->infra_faults,
                                          " runs in a row failed by this worker; the last: ",
                                          event.text.substr(0, 300)));
      }
    } else if (event.exit_code == 0 && !event.cancelled && !event.interrupted) {
      agent->infra_faults = 0;
    }
  }
  if (agent->infra_faults != before) {
    Noted(store_->SetAgentInfraFaults(agent_id, agent->infra_faults),
          "store an agent's fault count");
  }
}

void Controller::Quarantine(const std::string& agent_id, const std::string& why) {
  if (registry::Agent* agent = registry_.Find(agent_id); agent != nullptr) {
    agent->quarantine = why;
  }
  Noted(store_->SetAgentQuarantine(agent_id, why), "store an agent's quarantine");
  spdlog::error("agent {} quarantined (no runs until `taectl agents undrain {}`): {}", agent_id,
                agent_id, why);
}

void Controller::OnAgentFault(const std::string& agent_id, const std::string& reason) {
  TAE_CHECK_OWNER(core_);
  Quarantine(agent_id, absl::StrCat("the agent stopped: ", reason));
  // Its runs cannot go on there; they go back to the queue now, not after the grace period.
  LoseUnclaimedRuns(agent_id, absl::StrCat("agent ", agent_id, " failed: ", reason));
}

void Controller::OnHeartbeat(const std::string& agent_id) {
  TAE_CHECK_OWNER(core_);
  if (registry::Agent* agent = registry_.Find(agent_id); agent != nullptr) {
    agent->last_seen = Now();
  }
}

void Controller::OnDraining(const std::string& agent_id) {
  TAE_CHECK_OWNER(core_);
  if (registry::Agent* agent = registry_.Find(agent_id); agent != nullptr) {
    agent->draining = true;
    spdlog::info("agent {} is draining", agent_id);
    Noted(store_->SetAgentState(agent_id, "draining", Now()), "store an agent's state");
  }
}

void Controller::OnDisconnected(const std::string& agent_id,
                                const registry::AgentChannel* channel) {
  TAE_CHECK_OWNER(core_);
  if (!registry_.Disconnect(agent_id, channel, Now())) {
    return;  // an old stream of an agent that already reconnected
  }
  spdlog::warn("agent {} disconnected; its runs wait {}s for it to come back", agent_id,
               options_.agent_grace_s);
  Noted(store_->SetAgentState(agent_id, "lost", Now()), "store an agent's state");
  StartGraceTimer(agent_id);
}

void Controller::StartGraceTimer(const std::string& agent_id) {
  registry::Agent* at_start = registry_.Find(agent_id);
  uint64_t generation = at_start != nullptr ? at_start->connections : 0;
  auto timer = std::make_shared<boost::asio::steady_timer>(
      *io_, std::chrono::milliseconds(static_cast<int64_t>(options_.agent_grace_s * 1000)));
  timer->async_wait([this, timer, agent_id, generation](const boost::system::error_code& error) {
    if (error) {
      return;
    }
    registry::Agent* agent = registry_.Find(agent_id);
    if (agent != nullptr && (agent->connected || agent->connections != generation)) {
      return;  // it came back (a later disconnect has its own timer)
    }
    LoseUnclaimedRuns(agent_id, absl::StrCat("agent ", agent_id, " lost"));
  });
}

void Controller::LoseUnclaimedRuns(const std::string& agent_id, const std::string& reason) {
  absl::StatusOr<std::vector<model::RunRecord>> active = store_->ActiveRuns();
  if (!active.ok()) {
    spdlog::error("{}", active.status().ToString());
    return;
  }
  for (const model::RunRecord& run : *active) {
    const std::vector<std::string> agents = AgentsOfRun(run);
    if (std::find(agents.begin(), agents.end(), agent_id) == agents.end()) {
      continue;
    }
    Release(run.id, agents);
    absl::StatusOr<model::RunRecord> next =
        store_->Transition(run.id, lifecycle::Lost(reason, Now(), RetryDelay(run.attempt)));
    if (next.ok()) {
      spdlog::warn("run r{} lost on {}: now {}", run.id, agent_id, model::ToString(next->state));
      if (model::IsFinal(next->state)) {
        RunFinal(run.id, run.experiment_id);  // a failed run's seed is replaced
      }
    }
    StopRanks(run.id, run.attempt, agents, agent_id, reason);  // a gang's other ranks
  }
  Schedule();
}

void Controller::CheckLiveness() {
  const double now = Now();
  std::vector<std::pair<std::string, const registry::AgentChannel*>> silent;
  for (const registry::Agent* agent : registry_.Connected()) {
    if (now - agent->last_seen > options_.agent_timeout_s) {
      silent.emplace_back(agent->id, agent->channel.get());
    }
  }
  for (const auto& [id, channel] : silent) {
    // A stopped or wedged agent keeps its TCP connection open; its silence is what tells.
    spdlog::warn("agent {} silent for more than {}s: treating it as disconnected", id,
                 options_.agent_timeout_s);
    std::shared_ptr<registry::AgentChannel> keep = registry_.Find(id)->channel;
    OnDisconnected(id, channel);
    keep->Close();
  }
  PublishDemand();  // busy slots change as agents go, and a published demand must stay recent
  liveness_timer_.expires_after(std::chrono::milliseconds(
      static_cast<int64_t>(std::max(0.2, options_.agent_timeout_s / 4) * 1000)));
  liveness_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) {
      CheckLiveness();
    }
  });
}

void Controller::MaybePack() {
  if (packing_ || (!store_->packs_due() && !store_->columns_due())) {
    return;
  }
  packing_ = true;
  pack_timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(kPackSliceS * 1000)));
  pack_timer_.async_wait([this](const boost::system::error_code& error) {
    packing_ = false;
    if (!error) {
      PackSlice();
    }
  });
}

void Controller::PackSlice() {
  // The packs first; the ended experiments' column files once none is due.
  const bool packs = store_->packs_due();
  absl::StatusOr<bool> more =
      packs ? store_->PackSome(kPackSliceS) : store_->ColumnSome(kPackSliceS);
  if (!more.ok()) {
    // Curves read those runs' rows (or packs) meanwhile; the next scheduling pass tries again.
    Noted(more.status(),
          packs ? "pack the series of ended runs" : "write the column files of ended experiments");
    return;
  }
  MaybePack();
}

void Controller::Recover() {
  TAE_CHECK_OWNER(core_);
  // Seeds a previous taed decided on but did not add (it stopped between a run's end and its
  // next scheduling pass): the plan is a function of the stored runs, so this adds only those.
  if (absl::StatusOr<std::vector<int64_t>> adaptive = store_->AdaptiveExperiments();
      adaptive.ok()) {
    seeds_due_.insert(adaptive->begin(), adaptive->end());
  } else {
    Noted(adaptive.status(), "list the experiments with adaptive seeds");
  }
  // Likewise the confirmation of a search that ended while taed was down (or just before).
  if (absl::StatusOr<std::vector<int64_t>> confirming = store_->ConfirmingExperiments();
      confirming.ok()) {
    seeds_due_.insert(confirming->begin(), confirming->end());
  } else {
    Noted(confirming.status(), "list the experiments with search.confirm");
  }
  // Ladders whose larger rungs are held (scale.stop_if): judged again, in case their first rungs
  // ended while taed was down.
  if (absl::StatusOr<std::vector<model::QueueRow>> queued = store_->QueueRows(); queued.ok()) {
    for (const model::QueueRow& row : *queued) {
      if (row.not_before >= model::kHeldNotBefore) {
        ladders_due_.insert(row.experiment_id);
      }
    }
  } else {
    Noted(queued.status(), "list the queued runs");
  }
  // Searches under way resume from their stored decisions and points.
  if (absl::StatusOr<std::vector<int64_t>> searched = store_->SearchedExperiments();
      searched.ok()) {
    for (int64_t id : *searched) {
      StartSearch(id, true);
    }
  } else {
    Noted(searched.status(), "list the experiments with an asha [search]");
  }
  CheckLiveness();
  MaybePack();
  absl::StatusOr<std::vector<model::RunRecord>> active = store_->ActiveRuns();
  if (!active.ok()) {
    return;
  }
  std::set<std::string> agents;
  for (const model::RunRecord& run : *active) {
    for (const std::string& id : AgentsOfRun(run)) {
      agents.insert(id);
    }
    if (!run.gang_failure.empty()) {
      held_gangs_.insert(run.id);  // its window goes on from when the failure came
    }
  }
  if (!held_gangs_.empty()) {
    EndHeldGangs();
  }
  for (const std::string& agent_id : agents) {
    spdlog::info("runs of agent {} from a previous taed wait {}s for it", agent_id,
                 options_.agent_grace_s);
    StartGraceTimer(agent_id);
  }
  AddDueSeeds();
}

}  // namespace tae::controller
