#include "server/rpc/convert.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "proto/tae/v1/states.h"
#include "server/wire/wire.h"

namespace tae::rpc {
namespace {

TEST_CASE("a run metadata event becomes a meta ingest event, and a run's metadata its proto map") {
  tae::v1::EventBatch batch;
  tae::v1::Event* event = batch.add_events();
  event->set_seq(7);
  event->set_run_id(3);
  event->set_attempt(2);
  (*event->mutable_meta()->mutable_values())["libtorch"] = "1.13.0";
  (*event->mutable_meta()->mutable_values())["threads"] = "2";
  std::vector<model::IngestEvent> events;
  CHECK(FromProto(batch, &events) == 7);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == model::IngestEvent::Kind::kMeta);
  CHECK(events[0].run_id == 3);
  CHECK(events[0].attempt == 2);
  CHECK(events[0].meta == model::RunMeta{{"libtorch", "1.13.0"}, {"threads", "2"}});

  model::RunRecord record;
  record.id = 3;
  record.meta = events[0].meta;
  tae::v1::Run run;
  wire::ToProto(record, &run);
  REQUIRE(run.meta().size() == 2);
  CHECK(run.meta().at("libtorch") == "1.13.0");
  CHECK(run.meta().at("threads") == "2");
}

TEST_CASE("run and agent states cross the wire as enums named as taed stores them") {
  std::set<int> seen;
  for (model::RunState state :
       {model::RunState::kQueued, model::RunState::kAssigned, model::RunState::kRunning,
        model::RunState::kSucceeded, model::RunState::kFailed, model::RunState::kCancelled,
        model::RunState::kLost}) {
    const tae::v1::RunState wire = wire::ToProto(state);
    CHECK(wire != tae::v1::RUN_STATE_UNSPECIFIED);
    CHECK(std::string(tae::v1::StateName(wire)) == model::ToString(state));
    CHECK(tae::v1::IsFinal(wire) == model::IsFinal(state));
    seen.insert(wire);
  }
  CHECK(seen.size() == 7);  // one enum value per state
  for (registry::AgentState state :
       {registry::AgentState::kReady, registry::AgentState::kBusy, registry::AgentState::kDraining,
        registry::AgentState::kLost}) {
    CHECK(std::string(tae::v1::StateName(wire::ToProto(state))) == registry::ToString(state));
  }
  model::RunRecord record;
  record.state = model::RunState::kSucceeded;
  tae::v1::Run run;
  wire::ToProto(record, &run);
  CHECK(run.state() == tae::v1::RUN_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace tae::rpc
