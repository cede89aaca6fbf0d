#pragma once

// What taed's records and views look like on the wire: server/model's records, query views,
// registry agents and the providers' log, converted to the Control API's messages (proto/tae/v1).
// Both adapters speak through it: the Control service answers with these messages, and the
// dashboard (server/http) prints them with common/api's JSON, the shapes `taectl --json` prints.
// Pure conversion, one function per type, no I/O; it includes neither adapter. What is only the
// gRPC adapter's (statuses, the agent link's hello and events, their limits) stays in
// server/rpc/convert.

#include "server/model/records.h"
#include "server/provider/provider_log.h"
#include "server/query/query.h"
#include "server/registry/registry.h"
#include "server/report/savings.h"
#include "tae/v1/control.pb.h"

namespace tae::wire {

tae::v1::RunState ToProto(model::RunState state);
tae::v1::AgentState ToProto(registry::AgentState state);
void ToProto(const model::ExperimentRecord& in, tae::v1::Experiment* out);
void ToProto(const model::RunRecord& in, tae::v1::Run* out);
void ToProto(const model::TransitionRecord& in, tae::v1::Transition* out);
void ToProto(const model::CheckpointRecord& in, tae::v1::Checkpoint* out);
void ToProto(const registry::Agent& in, tae::v1::AgentInfo* out);
void ToProto(const provider::CloudVm& in, tae::v1::CloudVm* out);
void ToProto(const provider::ProviderEvent& in, tae::v1::ProviderEvent* out);
void ToProto(const query::ReportResult& in, tae::v1::ReportResponse* out);
void ToProto(const report::ScaleFit& in, tae::v1::ScaleFit* out);
void ToProto(const report::SearchSavings& in, tae::v1::SearchSavings* out);
// A run with its final metric values and last step.
void ToProto(const query::RunView& in, tae::v1::Run* out);
void ToProto(const query::RunDetail& in, tae::v1::GetRunResponse* out);
void ToProto(const query::LogPage& in, tae::v1::LogsResponse* out);
void ToProto(const query::MetricSeries& in, tae::v1::MetricSeries* out);
void ToProto(const query::SnapshotView& in, tae::v1::Snapshot* out);

}  // namespace tae::wire
