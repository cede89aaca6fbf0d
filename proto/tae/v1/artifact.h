#pragma once

// A run artifact's name (agent_link.proto's OfferCheckpoint / CommitCheckpoint `artifact`,
// control.proto's Checkpoint `artifact`; docs/profiles.md): one rule for both sides of the link.
// The agent checks a job's profile mark by it when it reads the metric line (common/metrics) and
// names the artifact "profile-" + the mark's id; taed refuses an offer of any other name
// (server/rpc, server/controller). A name becomes a directory when pulled, and part of one on the
// agent.

#include <cctype>
#include <cstddef>
#include <string_view>

namespace tae::v1 {

inline constexpr size_t kMaxArtifactName = 64;

// 1-64 of [A-Za-z0-9._-], not starting with '.'. A profile's is "profile-" + its id.
inline bool IsArtifactName(std::string_view name) {
  if (name.empty() || name.size() > kMaxArtifactName || name[0] == '.') {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace tae::v1
