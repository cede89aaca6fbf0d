#include "server/registry/placement.h"

#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tae::registry {
namespace {

constexpr std::array<std::string_view, 6> kPlacementKeys = {"slice",    "worker", "pool",
                                                            "provider", "addr",   "zone"};

std::string Text(const PlacementLabels& labels) {
  return labels.empty() ? std::string("none")
                        : absl::StrJoin(labels, ",", absl::PairFormatter("="));
}

}  // namespace

bool IsPlacementKey(const std::string& key) {
  for (std::string_view k : kPlacementKeys) {
    if (key == k) {
      return true;
    }
  }
  return false;
}

PlacementLabels PlacementOf(const std::map<std::string, std::string>& labels) {
  PlacementLabels out;
  for (const auto& [key, value] : labels) {
    if (IsPlacementKey(key)) {
      out[key] = value;
    }
  }
  return out;
}

absl::Status JudgeRegistration(const Registration& r, const std::vector<PlacementHolder>& others) {
  if (r.slots < 1 || r.slots > kMaxAgentSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent ", r.agent_id, ": slots ", r.slots, " is not in 1..", kMaxAgentSlots));
  }
  const PlacementLabels declared = PlacementOf(r.labels);
  if (r.bound.has_value()) {
    if (declared != *r.bound) {
      return absl::PermissionDeniedError(absl::StrCat(
          "agent ", r.agent_id, " declares placement labels ", Text(declared),
          " but its credential holds ", Text(*r.bound),
          r.minted ? " (assigned by the provider that started it)"
                   : " (bound at its first registration; another placement needs another --id)"));
    }
    return absl::OkStatus();
  }
  if (r.minted) {
    return absl::OkStatus();  // minted before placement labels were kept: bound now
  }
  // An enrolled agent's first registration: what it may bind.
  for (const char* key : {"pool", "provider"}) {
    if (declared.count(key) > 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("agent ", r.agent_id, ": label ", key,
                       " is assigned by taed's providers to the agents they start; an enrolled "
                       "agent cannot declare it"));
    }
  }
  auto slice = declared.find("slice");
  if (slice == declared.end()) {
    return absl::OkStatus();
  }
  auto worker = declared.find("worker");
  for (const PlacementHolder& other : others) {
    auto their_slice = other.labels.find("slice");
    if (other.agent_id == r.agent_id || their_slice == other.labels.end() ||
        their_slice->second != slice->second) {
      continue;
    }
    if (other.minted) {
      return absl::PermissionDeniedError(absl::StrCat(
          "agent ", r.agent_id, ": slice ", slice->second, " is made of agents taed started (",
          other.agent_id, "); an enrolled agent cannot join it"));
    }
    auto their_worker = other.labels.find("worker");
    const std::string mine = worker == declared.end() ? "" : worker->second;
    const std::string theirs = their_worker == other.labels.end() ? "" : their_worker->second;
    if (mine == theirs) {
      return absl::PermissionDeniedError(absl::StrCat("agent ", r.agent_id, ": worker ", mine,
                                                      " of slice ", slice->second, " is agent ",
                                                      other.agent_id));
    }
  }
  return absl::OkStatus();
}

}  // namespace tae::registry
