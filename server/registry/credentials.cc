#include "server/registry/credentials.h"

#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"

namespace tae::registry {
namespace {}  // namespace

std::string SecretHash(std::string_view secret) {
  return snapshot::Sha256Hex(absl::StrCat("tae-agent-credential\n", std::string(secret)));
}

void CredentialTable::Load(const std::vector<model::CredentialRecord>& records) {
  absl::MutexLock lock(&mu_);
  hashes_.clear();
  for (const model::CredentialRecord& r : records) {
    if (!r.revoked_at.has_value() && !r.secret_sha256.empty()) {
      hashes_[r.agent_id] = r.secret_sha256;
    }
  }
}

void CredentialTable::Put(const std::string& agent_id, const std::string& secret_sha256) {
  absl::MutexLock lock(&mu_);
  hashes_[agent_id] = secret_sha256;
}

void CredentialTable::Revoke(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  hashes_.erase(agent_id);
}

bool CredentialTable::Live(const std::string& agent_id) const {
  absl::MutexLock lock(&mu_);
  return hashes_.count(agent_id) > 0;
}

void CredentialTable::AddStream(const std::string& agent_id, std::weak_ptr<AgentChannel> channel) {
  absl::MutexLock lock(&mu_);
  streams_.emplace(agent_id, std::move(channel));
}

void CredentialTable::RemoveStream(const std::string& agent_id, const AgentChannel* channel) {
  absl::MutexLock lock(&mu_);
  auto [begin, end] = streams_.equal_range(agent_id);
  for (auto it = begin; it != end;) {
    std::shared_ptr<AgentChannel> open = it->second.lock();
    it = open == nullptr || open.get() == channel ? streams_.erase(it) : std::next(it);
  }
}

std::vector<std::shared_ptr<AgentChannel>> CredentialTable::TakeStreams(
    const std::string& agent_id) {
  std::vector<std::shared_ptr<AgentChannel>> out;
  absl::MutexLock lock(&mu_);
  auto [begin, end] = streams_.equal_range(agent_id);
  for (auto it = begin; it != end; ++it) {
    if (std::shared_ptr<AgentChannel> open = it->second.lock()) {
      out.push_back(std::move(open));
    }
  }
  streams_.erase(agent_id);
  return out;
}

std::optional<std::string> CredentialTable::Authenticate(std::string_view presented) const {
  std::optional<Credential> c = ParseCredential(presented);
  if (!c.has_value()) {
    return std::nullopt;
  }
  const std::string hash = SecretHash(c->secret);
  absl::MutexLock lock(&mu_);
  auto it = hashes_.find(c->agent_id);
  if (it == hashes_.end() || !auth::SecretEquals(it->second, hash)) {
    return std::nullopt;
  }
  return c->agent_id;
}

}  // namespace tae::registry
