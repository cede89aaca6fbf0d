#include "server/rpc/upload_grants.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace tae::rpc {

absl::Status UploadGrants::Grant(const std::string& agent,
                                 const std::map<std::string, uint64_t>& sizes, double now) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, Granted>& mine = grants_[agent];
  uint64_t total = 0;
  for (const auto& [hash, g] : mine) {
    total += g.until >= now && sizes.count(hash) == 0 ? g.size : 0;
  }
  for (const auto& [hash, size] : sizes) {
    total += size;
  }
  if (total > kMaxGrantedBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("manifest: uploads of ", total,
                                                     " bytes would be open for agent ", agent,
                                                     "; at most ", kMaxGrantedBytes, " at a time"));
  }
  for (const auto& [hash, size] : sizes) {
    mine[hash] = {size, now + kGrantSeconds};
  }
  return absl::OkStatus();
}

absl::Status UploadGrants::Check(
    const std::string& agent, const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
    double now) {
  absl::MutexLock lock(&mu_);
  auto mine = grants_.find(agent);
  for (int i = 0; i < chunks.size(); ++i) {
    const tae::v1::BlobChunk& chunk = chunks[i];
    const Granted* g = nullptr;
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
  }
  return absl::OkStatus();
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

std::vector<std::string> UploadGrants::Expire(double now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (auto agent = grants_.begin(); agent != grants_.end();) {
    for (auto it = agent->second.begin(); it != agent->second.end();) {
      if (it->second.until < now) {
        out.push_back(it->first);
        it = agent->second.erase(it);
      } else {
        ++it;
      }
    }
    agent = agent->second.empty() ? grants_.erase(agent) : std::next(agent);
  }
  return out;
}

}  // namespace tae::rpc
