#pragma once

// AgentRegistry: the agents taed knows in this process's life, their capacity, labels, the runs
// placed on them and the channel to reach them. Lives on the core thread; no locking.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "server/model/records.h"
#include "server/registry/agent_channel.h"

namespace tae::registry {

enum class AgentState { kReady, kBusy, kDraining, kLost, kRevoked };
const char* ToString(AgentState state);

struct Agent {
  std::string id;
  std::string host;
  int slots = 0;
  model::Labels labels;
  std::string version;
  // Where other hosts reach it (rank 0's rendezvous of a gang): its `addr` label if set, else the
  // IP taed sees its link come from.
  std::string address;
  double connected_at = 0;
  double last_seen = 0;
  bool connected = false;
  bool draining = false;  // shutting down or drained: takes no new runs
  // Non-empty: quarantined after repeated infrastructure faults, and why. Takes no new runs
  // until `taectl agents undrain ID` (kept across reconnects and taed restarts).
  std::string quarantine;
  // Non-empty: revoked (`taectl agents revoke`), and why. Locked out for good.
  std::string revoked;
  int infra_faults = 0;         // infrastructure faults in a row (reset by a run that ends cleanly)
  uint64_t connections = 0;     // how many times it has registered in this taed's life
  std::map<int64_t, int> runs;  // run id -> slots it uses
  std::shared_ptr<AgentChannel> channel;
  tae::v1::AgentFacts facts;  // what the agent reported about its machine at Register

  int busy_slots() const;
  int free_slots() const {
    return connected && !draining && quarantine.empty() ? slots - busy_slots() : 0;
  }
  AgentState state() const;
};

class AgentRegistry {
 public:
  // Records a (re)connected agent. A previous channel of the same id is returned so the caller
  // can close it; runs already placed on the agent are kept.
  std::shared_ptr<AgentChannel> Connect(Agent agent);
  // Marks the agent lost if `channel` is still its current one. Returns true if it was.
  bool Disconnect(const std::string& id, const AgentChannel* channel, double now);

  Agent* Find(const std::string& id);
  const std::map<std::string, Agent>& agents() const { return agents_; }
  std::vector<const Agent*> Connected() const;

  void AddRun(const std::string& agent_id, int64_t run_id, int slots);
  void RemoveRun(const std::string& agent_id, int64_t run_id);

 private:
  std::map<std::string, Agent> agents_;
};

}  // namespace tae::registry
