// The fleet's handlers (their routes: api_routes.cc): GET /api/fleet (the agents, the providers'
// log and VMs, and the queue) and POST /api/agents/ID/drain ({"drain": false} undrains).

#include "common/api/json.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/wire/wire.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

}  // namespace

Response Api::Fleet(const Request& request, const PathParams& params) {
  tae::v1::ListAgentsResponse agents;
  for (const auto& [id, agent] : controller_->registry().agents()) {
    wire::ToProto(agent, agents.add_agents());
  }
  for (const provider::ProviderEvent& event : controller_->provider_log()->events()) {
    wire::ToProto(event, agents.add_provider_events());
  }
  for (const provider::CloudVm& vm : controller_->provider_log()->vms()) {
    wire::ToProto(vm, agents.add_vms());
  }
  ordered_json out = api::FleetJson(agents);
  absl::StatusOr<std::vector<model::RunRecord>> queue = query_->Queue();
  if (!queue.ok()) return FromStatus(queue.status());
  ordered_json queued = ordered_json::array();
  for (const model::RunRecord& run : *queue) {
    tae::v1::Run proto;
    wire::ToProto(run, &proto);
    queued.push_back(api::RunJson(proto));
  }
  out["queue"] = queued;
  return Ok(out);
}

Response Api::DrainAgent(const Request& request, const PathParams& params) {
  absl::StatusOr<nlohmann::json> parsed = JsonBody(request);
  if (!parsed.ok()) return FromStatus(parsed.status());
  nlohmann::json& body = *parsed;
  const std::string& agent = params.at("agent");
  const bool drain = !body.contains("drain") || body["drain"] == true;
  if (body.contains("drain") && !body["drain"].is_boolean()) {
    return Response::Error(400, "drain: true or false");
  }
  absl::Status s = controller_->Drain(agent, drain);
  if (!s.ok()) return FromStatus(s);
  return Ok({{"ok", true}, {"agent", agent}, {"drain", drain}});
}

}  // namespace tae::http
