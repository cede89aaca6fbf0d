#pragma once

// Checkpoint uploads are granted, not open (docs/security.md, "Agents").

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/snapshot/snapshot.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::rpc {

// Which checkpoint blobs each agent may upload: those its accepted offers said were missing,
// each at the size its manifest gave, for `grant_seconds` (an hour) after the offer. A put of
// anything else is refused, so a credential holder cannot fill taed's disk with blobs nobody
// asked for; expired grants name the partial uploads to drop, and the blobs that an upload
// stored but no commit followed (AgentLinkService::ReclaimUploads removes those no checkpoint
// names).
//
// And which of them each agent has shown it holds. A hash is not proof of the content: a commit
// may name a blob its run has not named before only if the committing agent uploaded it, in full,
// under its grant. Each agent's chunks of a granted blob are hashed as they arrive in order (a
// chunk at offset 0 starts over, one that does not continue where the last ended breaks the run
// until then); when they reach the blob's size and hash to its name, the agent holds the blob.
// Whether the store already had it does not matter. Thread-safe.
class UploadGrants {
 public:
  static constexpr double kGrantSeconds = 3600;
  explicit UploadGrants(double grant_seconds = kGrantSeconds) : grant_seconds_(grant_seconds) {}
  double grant_seconds() const { return grant_seconds_; }
  // At most this many bytes granted to one agent at a time (offers beyond it are refused).
  static constexpr uint64_t kMaxGrantedBytes = uint64_t{64} << 30;

  // Grants `agent` the blobs `sizes` (hash -> size) until now + grant_seconds. A blob granted
  // before at the same size keeps what was uploaded of it. ResourceExhausted beyond
  // kMaxGrantedBytes.
  absl::Status Grant(const std::string& agent, const std::map<std::string, uint64_t>& sizes,
                     double now);
  // OK when every chunk is of a blob granted to `agent` with that total size; then the chunks
  // count towards the agent's proof that it holds each blob (above). Nothing counts when any
  // chunk is refused.
  absl::Status Accept(const std::string& agent,
                      const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
                      double now);
  // The hashes `agent` has uploaded in full under a grant that is still open.
  std::set<std::string> Held(const std::string& agent, const std::vector<std::string>& hashes,
                             double now);
  // The commit that needed them is done: no longer granted.
  void Done(const std::string& agent, const std::vector<std::string>& hashes);
  // What Expire removed.
  struct Expired {
    std::vector<std::pair<std::string, std::string>> partials;  // (agent, hash): uploads to drop
    std::vector<std::string> unnamed;  // their hashes that no open grant names any more
    bool empty() const { return partials.empty(); }
  };
  // Removes grants past their time.
  Expired Expire(double now);
  // Whether an open grant of any agent names `hash`.
  bool Named(const std::string& hash, double now);

 private:
  struct Granted {
    uint64_t size = 0;
    double until = 0;
    uint64_t hashed = 0;                          // bytes of the current in-order run
    std::unique_ptr<snapshot::Sha256Stream> sha;  // over those bytes
    bool held = false;                            // a run reached `size` and hashed to the name
  };
  const double grant_seconds_;
  absl::Mutex mu_;
  std::map<std::string, std::map<std::string, Granted>> grants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tae::rpc
