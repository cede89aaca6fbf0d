#pragma once

// Placement labels: what says where an agent is and what it belongs to, which the scheduler and
// the providers act on (docs/security.md, "Agent identity"): `slice` and `worker` form gangs (a
// gang's rank 0 gives MASTER_ADDR from `addr`), `pool` and `provider` count a provider's agents
// (a GKE slice's registered and idle agents), `zone` says where a VM is. An agent declares its
// labels itself (--labels), so these are bound to its credential:
//
// - an agent taed starts (local, ssh, TPU, GKE) gets its placement labels assigned when its
//   credential is minted, and must register with exactly those (one minted before taed kept
//   them binds them at its first registration);
// - an enrolled agent (started by hand) binds the ones it declares at its first registration after
//   enrolling and must declare the same ever after; it may not declare `pool` or `provider`
//   (a provider's accounting), nor a `slice` that agents taed started belong to, nor the `worker`
//   of a slice another live credential holds;
// - slots are 1..kMaxAgentSlots.
//
// Pure: the controller passes what the store holds and acts on the answer.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tae::registry {

inline constexpr int kMaxAgentSlots = 1024;

using PlacementLabels = std::map<std::string, std::string>;

// Whether `key` is a placement label.
bool IsPlacementKey(const std::string& key);

// The placement labels among `labels`.
PlacementLabels PlacementOf(const std::map<std::string, std::string>& labels);

// Another live credential's bound placement labels.
struct PlacementHolder {
  std::string agent_id;
  bool minted = false;  // by a provider (else enrolled)
  PlacementLabels labels;
};

struct Registration {
  std::string agent_id;
  int slots = 0;
  std::map<std::string, std::string> labels;  // as declared
  bool minted = false;
  std::optional<PlacementLabels> bound;  // nullopt: none bound yet (first registration)
};

// OK, or PermissionDenied/InvalidArgument saying which label or value and why, in words the
// agent's owner can act on. `others`: every other live credential's bound labels.
absl::Status JudgeRegistration(const Registration& registration,
                               const std::vector<PlacementHolder>& others);

}  // namespace tae::registry
