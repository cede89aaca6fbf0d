#include "server/registry/registry.h"

namespace tae::registry {

const char* ToString(AgentState state) {
  switch (state) {
    case AgentState::kReady:
      return "ready";
    case AgentState::kBusy:
      return "busy";
    case AgentState::kDraining:
      return "draining";
    case AgentState::kLost:
      return "lost";
    case AgentState::kRevoked:
      return "revoked";
  }
  return "unknown";
}

int Agent::busy_slots() const {
  int busy = 0;
  for (const auto& [run_id, slots_used] : runs) {
    busy += slots_used;
  }
  return busy;
}

AgentState Agent::state() const {
  if (!revoked.empty()) {
    return AgentState::kRevoked;
  }
  if (!connected) {
    return AgentState::kLost;
  }
  if (draining || !quarantine.empty()) {
    return AgentState::kDraining;
  }
  return busy_slots() > 0 ? AgentState::kBusy : AgentState::kReady;
}

std::shared_ptr<AgentChannel> AgentRegistry::Connect(Agent agent) {
  auto it = agents_.find(agent.id);
  std::shared_ptr<AgentChannel> previous;
  if (it != agents_.end()) {
    previous = std::move(it->second.channel);
    agent.runs = std::move(it->second.runs);
    agent.connections = it->second.connections + 1;
    it->second = std::move(agent);
  } else {
    agent.connections = 1;
    std::string id = agent.id;
    agents_.emplace(id, std::move(agent));
  }
  return previous;
}

bool AgentRegistry::Disconnect(const std::string& id, const AgentChannel* channel, double now) {
  Agent* agent = Find(id);
  if (agent == nullptr || agent->channel.get() != channel) {
    return false;
  }
  agent->connected = false;
  agent->channel.reset();
  agent->last_seen = now;
  return true;
}

Agent* AgentRegistry::Find(const std::string& id) {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

std::vector<const Agent*> AgentRegistry::Connected() const {
  std::vector<const Agent*> out;
  for (const auto& [id, agent] : agents_) {
    if (agent.connected) {
      out.push_back(&agent);
    }
  }
  return out;
}

void AgentRegistry::AddRun(const std::string& agent_id, int64_t run_id, int slots) {
  if (Agent* agent = Find(agent_id); agent != nullptr) {
    agent->runs[run_id] = slots;
  }
}

void AgentRegistry::RemoveRun(const std::string& agent_id, int64_t run_id) {
  if (Agent* agent = Find(agent_id); agent != nullptr) {
    agent->runs.erase(run_id);
  }
}

}  // namespace tae::registry
