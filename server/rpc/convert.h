#pragma once

// proto <-> domain conversion for the two services. Nothing else lives here.

#include "grpcpp/support/status.h"
#include "server/controller/controller.h"
#include "server/registry/registry.h"
#include "server/report/report.h"
#include "server/store/records.h"
#include "tae/v1/agent_link.pb.h"
#include "tae/v1/control.pb.h"

namespace tae::rpc {

grpc::Status ToGrpc(const absl::Status& status);

void ToProto(const store::ExperimentRecord& in, tae::v1::Experiment* out);
void ToProto(const store::RunRecord& in, tae::v1::Run* out);
void ToProto(const store::TransitionRecord& in, tae::v1::Transition* out);
void ToProto(const registry::Agent& in, tae::v1::AgentInfo* out);
void ToProto(const controller::ReportResult& in, tae::v1::ReportResponse* out);

controller::AgentHello FromProto(const tae::v1::Register& in);
// Converts a batch; returns the highest seq in it.
uint64_t FromProto(const tae::v1::EventBatch& in, std::vector<store::IngestEvent>* out);

}  // namespace tae::rpc
