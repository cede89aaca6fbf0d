#include "server/rpc/upload_grants.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace tae::rpc {

absl::Status UploadGrants::Grant(const std::string& agent,
                                 const std::map<std::string, uint64_t>& sizes, double now) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, Granted>& mine = grants_[agent];
  // Saturating: each term is checked before it is added, so no sum wraps below the cap.
  uint64_t total = 0;
  auto add = [&total](uint64_t size) {
    total = size > kMaxGrantedBytes - std::min(total, kMaxGrantedBytes) ? kMaxGrantedBytes + 1
                                                                        : total + size;
  };
  for (const auto& [hash, g] : mine) {
    add(g.until >= now && sizes.count(hash) == 0 ? g.size : 0);
  }
  for (const auto& [hash, size] : sizes) {
    add(size);
  }
  if (total > kMaxGrantedBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("manifest: uploads of ", total,
                                                     " bytes would be open for agent ", agent,
                                                     "; at most ", kMaxGrantedBytes, " at a time"));
  }
  for (const auto& [hash, size] : sizes) {
    Granted& g = mine[hash];
    if (g.size != size) {
      g = Granted{};
      g.size = size;
    }
    g.until = now + grant_seconds_;
  }
  return absl::OkStatus();
}

absl::Status UploadGrants::Accept(
    const std::string& agent, const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
    double now) {
  absl::MutexLock lock(&mu_);
  auto mine = grants_.find(agent);
  std::vector<Granted*> of(chunks.size());
  for (int i = 0; i < chunks.size(); ++i) {
    const tae::v1::BlobChunk& chunk = chunks[i];
    Granted* g = nullptr;
    if (mine != grants_.end()) {
      if (auto it = mine->second.find(chunk.hash()); it != mine->second.end()) {
        g = &it->second;
      }
    }
    if (g == nullptr || g->until < now) {
      return absl::PermissionDeniedError(
          absl::StrCat("chunks[", i, "].hash: ", chunk.hash().substr(0, 64),
                       " is not a blob an open checkpoint offer of agent ", agent, " named"));
    }
    if (chunk.total_size() != g->size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunks[", i, "].total_size: ", chunk.total_size(), "; the offer said ", g->size));
    }
    of[i] = g;
  }
  for (int i = 0; i < chunks.size(); ++i) {
    const tae::v1::BlobChunk& chunk = chunks[i];
    Granted& g = *of[i];
    if (chunk.offset() == 0) {
      g.sha = std::make_unique<snapshot::Sha256Stream>();
      g.hashed = 0;
    }
    if (g.sha == nullptr || chunk.offset() != g.hashed || chunk.data().size() > g.size - g.hashed) {
      g.sha.reset();  // out of order: nothing counts until the blob starts over at 0
      continue;
    }
    g.sha->Update(chunk.data());
    g.hashed += chunk.data().size();
    if (g.hashed == g.size) {
      g.held = g.held || g.sha->FinishHex() == chunk.hash();
      g.sha.reset();
    }
  }
  return absl::OkStatus();
}

std::set<std::string> UploadGrants::Held(const std::string& agent,
                                         const std::vector<std::string>& hashes, double now) {
  absl::MutexLock lock(&mu_);
  std::set<std::string> out;
  auto mine = grants_.find(agent);
  if (mine == grants_.end()) {
    return out;
  }
  for (const std::string& hash : hashes) {
    auto it = mine->second.find(hash);
    if (it != mine->second.end() && it->second.held && it->second.until >= now) {
      out.insert(hash);
    }
  }
  return out;
}

void UploadGrants::Done(const std::string& agent, const std::vector<std::string>& hashes) {
  absl::MutexLock lock(&mu_);
  auto mine = grants_.find(agent);
  if (mine == grants_.end()) {
    return;
  }
  for (const std::string& hash : hashes) {
    mine->second.erase(hash);
  }
  if (mine->second.empty()) {
    grants_.erase(mine);
  }
}

UploadGrants::Expired UploadGrants::Expire(double now) {
  absl::MutexLock lock(&mu_);
  Expired out;
  for (auto agent = grants_.begin(); agent != grants_.end();) {
    for (auto it = agent->second.begin(); it != agent->second.end();) {
      if (it->second.until < now) {
        out.partials.emplace_back(agent->first, it->first);
        it = agent->second.erase(it);
      } else {
        ++it;
      }
    }
    agent = agent->second.empty() ? grants_.erase(agent) : std::next(agent);
  }
  std::set<std::string> unnamed;
  for (const auto& [agent, hash] : out.partials) {
    bool named = false;
    for (const auto& [other, mine] : grants_) {
      auto it = mine.find(hash);
      named = named || (it != mine.end() && it->second.until >= now);
    }
    if (!named) {
      unnamed.insert(hash);
    }
  }
  out.unnamed.assign(unnamed.begin(), unnamed.end());
  return out;
}

bool UploadGrants::Named(const std::string& hash, double now) {
  absl::MutexLock lock(&mu_);
  for (const auto& [agent, mine] : grants_) {
    auto it = mine.find(hash);
    if (it != mine.end() && it->second.until >= now) {
      return true;
    }
  }
  return false;
}

}  // namespace tae::rpc
