#pragma once

// Checkpoint uploads are granted, not open (docs/security.md, "Agents").

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::rpc {

// Which checkpoint blobs each agent may upload: those its accepted offers said were missing,
// each at the size its manifest gave, for an hour after the offer. A put of anything else is
// refused, so a credential holder cannot fill taed's disk with blobs nobody asked for; expired
// grants name the partial uploads to drop. Thread-safe.
class UploadGrants {
 public:
  static constexpr double kGrantSeconds = 3600;
  // At most this many bytes granted to one agent at a time (offers beyond it are refused).
  static constexpr uint64_t kMaxGrantedBytes = uint64_t{64} << 30;

  // Grants `agent` the blobs `sizes` (hash -> size) until now + kGrantSeconds.
  // ResourceExhausted beyond kMaxGrantedBytes.
  absl::Status Grant(const std::string& agent, const std::map<std::string, uint64_t>& sizes,
                     double now);
  // OK when every chunk is of a blob granted to `agent` with that total size.
  absl::Status Check(const std::string& agent,
                     const google::protobuf::RepeatedPtrField<tae::v1::BlobChunk>& chunks,
                     double now);
  // The blob is stored (or the commit that needed it is done): no longer granted.
  void Done(const std::string& agent, const std::vector<std::string>& hashes);
  // Removes grants past their time; returns their hashes (partial uploads to drop).
  std::vector<std::string> Expire(double now);

 private:
  struct Granted {
    uint64_t size = 0;
    double until = 0;
  };
  absl::Mutex mu_;
  std::map<std::string, std::map<std::string, Granted>> grants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tae::rpc
