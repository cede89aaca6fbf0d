#pragma once

// Data-parallel runs across hosts (docs/engine.md, "Data-parallel runs"): the agent starts one
// tae-train per host with TAE_RANK, TAE_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. A Collective is
// the process group those processes form: a c10d::TCPStore (served by rank 0 on MASTER_PORT) and
// a c10d::ProcessGroupGloo over it. Only distributed.cc includes the c10d headers.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::train {

struct DistributedEnv {
  int rank = 0;
  int world_size = 1;       // 1: a single-process run, no c10d objects are created
  std::string master_addr;  // host name or address of rank 0
  int master_port = 0;      // rank 0's TCPStore port
};

// Reads TAE_RANK, TAE_WORLD_SIZE, MASTER_ADDR and MASTER_PORT through `getenv` (std::getenv in
// main). TAE_WORLD_SIZE unset, empty or 1 is a single-process run (the rest is then ignored);
// otherwise each must be set and valid (InvalidArgument naming the variable).
absl::StatusOr<DistributedEnv> ParseDistributedEnv(
    const std::function<const char*(const char*)>& getenv);

// train.batch_size is the global batch: it must split evenly over the ranks.
absl::Status CheckShardable(int64_t batch_size, int world_size);

class Collective {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{120000};

  // Connects to the group of env.world_size processes (rank 0 serves the store); waits up to
  // `timeout` for the others. Unavailable, naming MASTER_ADDR:MASTER_PORT, when it cannot.
  static absl::StatusOr<std::unique_ptr<Collective>> Connect(
      const DistributedEnv& env, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~Collective();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Collective calls: every rank must make the same calls in the same order. They throw
  // (c10::Error) when a peer is gone or the call times out.
  // Copies rank 0's `tensor` (contiguous CPU) into every rank's, in place.
  void Broadcast(at::Tensor& tensor);
  // Replaces `tensor` (contiguous CPU) by its element-wise sum over the ranks, in place.
  void AllReduceSum(at::Tensor& tensor);
  // Rank 0's `bytes` on every rank.
  void BroadcastBytes(std::string* bytes);

 private:
  struct Impl;
  Collective(int rank, int world_size, std::unique_ptr<Impl> impl);

  int rank_;
  int world_size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tae::train
