#pragma once

// What only the gRPC adapter converts: absl statuses to gRPC's, and the agent link's messages
// (its hello and its event batches, checked against the limits in proto/tae/v1/limits.h) to the
// controller's and the store's types. Records and views become Control API messages in
// server/wire, which the dashboard uses too.

#include <map>
#include <string>

#include "grpcpp/support/status.h"
#include "proto/tae/v1/limits.h"
#include "server/controller/controller.h"
#include "server/model/records.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::rpc {

grpc::Status ToGrpc(const absl::Status& status);

controller::AgentHello FromProto(const tae::v1::Register& in);
// The largest log line (or exit reason) taed stores, and events per batch (proto/tae/v1/limits.h).
inline constexpr size_t kMaxLogText = tae::v1::kTaedMaxLogText;
inline constexpr int kMaxEventsPerBatch = tae::v1::kTaedMaxEventsPerBatch;

// Whether one event from an agent is within limits (metric keys, sizes, streams).
absl::Status CheckEvent(const tae::v1::Event& event);
// Whether an event's wall_time is a time: finite, not before the epoch, and not more than
// kMaxClockAheadS after `received_at` (when taed got it; a clock that far ahead is wrong, and a
// time centuries away would overflow every timer it reaches).
inline constexpr double kMaxClockAheadS = 300;
bool IsGoodWallTime(double wall_time, double received_at);
// Converts a batch; returns the highest seq in it. Events that fail CheckEvent are left out, and
// bad values are dropped from the events that carry them: a wall_time that is not a time
// (replaced by `received_at`, when taed got the batch). A metric value that is NaN or infinite is
// kept: it says the metric diverged there. A log line or exit reason that is not UTF-8 is kept
// with U+FFFD for what is not.
// Each is described in `rejected`; all are acked with the batch, so a bad value cannot wedge an
// agent.
uint64_t FromProto(const tae::v1::EventBatch& in, double received_at,
                   std::vector<model::IngestEvent>* out,
                   std::vector<std::string>* rejected = nullptr);

// An agent's checkpoint (or artifact) offer or commit: its fields checked and its manifest parsed
// (common/snapshot), InvalidArgument saying which field is wrong. `sizes`, when given, gets each
// blob's size by hash (what an offer grants uploads at).
absl::StatusOr<controller::CheckpointOffer> ParseCheckpointOffer(
    int64_t run_id, int attempt, int64_t step, const std::string& manifest,
    const std::string& artifact, std::map<std::string, uint64_t>* sizes = nullptr);

}  // namespace tae::rpc
