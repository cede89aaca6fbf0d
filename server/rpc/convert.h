#pragma once

// proto <-> domain conversion for the two services. Nothing else lives here.

#include "grpcpp/support/status.h"
#include "proto/tae/v1/limits.h"
#include "server/controller/controller.h"
#include "server/query/query.h"
#include "server/registry/registry.h"
#include "server/report/report.h"
#include "server/store/records.h"
#include "tae/v1/agent_link.pb.h"
#include "tae/v1/control.pb.h"

namespace tae::rpc {

grpc::Status ToGrpc(const absl::Status& status);

tae::v1::RunState ToProto(store::RunState state);
tae::v1::AgentState ToProto(registry::AgentState state);
void ToProto(const store::ExperimentRecord& in, tae::v1::Experiment* out);
void ToProto(const store::RunRecord& in, tae::v1::Run* out);
void ToProto(const store::TransitionRecord& in, tae::v1::Transition* out);
void ToProto(const registry::Agent& in, tae::v1::AgentInfo* out);
void ToProto(const provider::CloudVm& in, tae::v1::CloudVm* out);
void ToProto(const provider::ProviderEvent& in, tae::v1::ProviderEvent* out);
void ToProto(const query::ReportResult& in, tae::v1::ReportResponse* out);
void ToProto(const report::SearchSavings& in, tae::v1::SearchSavings* out);
// A run with its final metric values and last step.
void ToProto(const query::RunView& in, tae::v1::Run* out);
void ToProto(const query::RunDetail& in, tae::v1::GetRunResponse* out);
void ToProto(const query::LogPage& in, tae::v1::LogsResponse* out);
void ToProto(const query::MetricSeries& in, tae::v1::MetricSeries* out);
void ToProto(const query::SnapshotView& in, tae::v1::Snapshot* out);
void ToProto(const store::CheckpointRecord& in, tae::v1::Checkpoint* out);

controller::AgentHello FromProto(const tae::v1::Register& in);
// The largest log line (or exit reason) taed stores, and events per batch (proto/tae/v1/limits.h).
inline constexpr size_t kMaxLogText = tae::v1::kTaedMaxLogText;
inline constexpr int kMaxEventsPerBatch = tae::v1::kTaedMaxEventsPerBatch;

// Whether one event from an agent is within limits (metric keys, sizes, streams).
absl::Status CheckEvent(const tae::v1::Event& event);
// Converts a batch; returns the highest seq in it. Events that fail CheckEvent are left out (and
// described in `rejected`): they are acked with the batch, so a bad event cannot wedge an agent.
uint64_t FromProto(const tae::v1::EventBatch& in, std::vector<store::IngestEvent>* out,
                   std::vector<std::string>* rejected = nullptr);

}  // namespace tae::rpc
