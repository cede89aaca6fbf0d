#pragma once

// Agent credentials (docs/security.md, "Agents"). Each agent holds its own secret and presents
// "authorization: Bearer ID.SECRET" on every agent-link call; taed keeps only SHA-256(SECRET).
// The shared enrolment token ($TAE_HOME/agent.token) authenticates one call only: Enrol, which
// hands a new agent its credential. Agents that taed's providers start get theirs from the
// provider instead (minted afresh at every start, so a recreated VM comes back under its id).
//
// CredentialTable is what the gRPC threads ask on every call ("whose credential is this?"): a
// copy of the store's table, kept current by the controller (core thread) as agents enrol and
// are revoked. Thread-safe. The decisions of who may enrol are the controller's.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/auth/credential.h"
#include "server/model/records.h"
#include "server/registry/agent_channel.h"

namespace tae::registry {

using auth::Credential;
using auth::ParseCredential;

using auth::NewSecret;

// SHA-256 of a secret, hex: what the store keeps.
std::string SecretHash(std::string_view secret);

class CredentialTable {
 public:
  // Replaces the whole table (at start-up, from the store).
  void Load(const std::vector<model::CredentialRecord>& records);
  // The agent's credential is now `secret_sha256` (an enrolment, or a provider's new key).
  void Put(const std::string& agent_id, const std::string& secret_sha256);
  // The agent is locked out.
  void Revoke(const std::string& agent_id);

  // The agent id a presented "ID.SECRET" authenticates; nullopt when it authenticates none
  // (unknown id, wrong secret, revoked). Compares in time independent of the secret.
  std::optional<std::string> Authenticate(std::string_view presented) const;
  // Whether the agent holds a live credential (enrolled or minted, not revoked).
  bool Live(const std::string& agent_id) const;

  // Every open Connect stream is listed under the id its credential authenticated, registered
  // or not, so a revocation ends all of them (an idle second stream included).
  void AddStream(const std::string& agent_id, std::weak_ptr<AgentChannel> channel);
  void RemoveStream(const std::string& agent_id, const AgentChannel* channel);
  // The agent's open streams, taken off the list (the caller closes them).
  std::vector<std::shared_ptr<AgentChannel>> TakeStreams(const std::string& agent_id);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string, std::less<>> hashes_ ABSL_GUARDED_BY(mu_);  // live only
  std::multimap<std::string, std::weak_ptr<AgentChannel>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tae::registry
