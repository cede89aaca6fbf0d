#pragma once

// The layer x head grids of `taectl heads RUN`, built from a run's config and final metrics
// (heads/L{l}H{h}: eval-loss increase when the head alone is masked; heads_grad/L{l}H{h}: Michel
// gradient score, normalised per layer). Pure: no RPC, no printing.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tae/v1/types.pb.h"

namespace tae::api {

// Why a cell has no score.
enum class HeadCell { kScored, kPruned, kLayerRemoved, kMissing };

struct HeadGrid {
  int64_t layers = 0;
  int64_t heads = 0;
  // [layer][head]; value set only for kScored.
  std::vector<std::vector<HeadCell>> kind;
  std::vector<std::vector<std::optional<double>>> masked;
  std::vector<std::vector<std::optional<double>>> gradient;
};

// FailedPrecondition when the run has no head scores (names train.head_importance);
// InvalidArgument when its config is not a tae-train config.
absl::StatusOr<HeadGrid> BuildHeadGrid(const tae::v1::Run& run);

}  // namespace tae::api
