#pragma once

// Fetching what runs stored in taed's checkpoint store: checkpoints (docs/checkpoints.md) and
// artifacts such as profiles (docs/profiles.md). Shared by taectl pull and taectl profile.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/rpc/control_client.h"
#include "common/snapshot/fill.h"
#include "nlohmann/json.hpp"
#include "tae/v1/control.grpc.pb.h"

namespace tae::client {

// The --json shape of a checkpoint or artifact (without its manifest).
nlohmann::ordered_json CheckpointJson(const tae::v1::Checkpoint& c);

// Fetches `checkpoint` (with its manifest) into the empty (or new) directory `dir`, verifying
// every file.
absl::StatusOr<snapshot::FillStats> PullInto(ControlClient& client,
                                             const tae::v1::Checkpoint& checkpoint,
                                             const std::string& dir);

// OK when `dir` does not exist or is an empty directory; InvalidArgument naming -o otherwise.
absl::Status CheckEmptyDir(const std::string& dir);

}  // namespace tae::client
