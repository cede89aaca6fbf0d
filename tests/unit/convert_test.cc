#include "server/rpc/convert.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
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
  CHECK(FromProto(batch, 100, &events) == 7);
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

TEST_CASE("a bad time from an agent drops that value and a non-finite metric is kept") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, inf, -inf}) {
    tae::v1::EventBatch batch;
    tae::v1::Event* metric = batch.add_events();
    metric->set_seq(1);
    metric->set_run_id(3);
    metric->set_attempt(1);
    metric->set_wall_time(50);
    metric->mutable_metrics()->set_step(10);
    tae::v1::Scalar* loss = metric->mutable_metrics()->add_values();
    loss->set_key("train/loss");
    loss->set_value(bad);
    tae::v1::Scalar* lr = metric->mutable_metrics()->add_values();
    lr->set_key("train/lr");
    lr->set_value(0.1);
    tae::v1::Event* log = batch.add_events();
    log->set_seq(2);
    log->set_run_id(3);
    log->set_attempt(1);
    log->set_wall_time(bad);
    log->mutable_log()->set_stream("stdout");
    log->mutable_log()->set_text("a line");
    tae::v1::Event* late = batch.add_events();
    late->set_seq(3);
    late->set_run_id(3);
    late->set_attempt(1);
    late->set_wall_time(-1);
    late->mutable_started()->set_pid(9);

    std::vector<model::IngestEvent> events;
    std::vector<std::string> rejected;
    CHECK(FromProto(batch, 100, &events, &rejected) == 3);
    REQUIRE(events.size() == 3);
    // A diverged loss is data: it reaches the store, which records where it diverged.
    REQUIRE(events[0].values.size() == 2);
    CHECK(events[0].values[0].key == "train/loss");
    const double kept = events[0].values[0].value;
    CHECK((std::isnan(bad) ? std::isnan(kept) : kept == bad));
    CHECK(events[0].values[1].key == "train/lr");
    CHECK(events[0].wall_time == 50);
    CHECK(events[1].text == "a line");
    CHECK(events[1].wall_time == 100);  // taken as received
    CHECK(events[2].wall_time == 100);
    CHECK(rejected.size() == 2);  // each dropped time is described
  }
  CHECK(IsGoodWallTime(0, 1.7e9));
  CHECK(IsGoodWallTime(1.7e9, 1.7e9));
  CHECK(IsGoodWallTime(1.7e9 + kMaxClockAheadS, 1.7e9));  // a clock a little ahead
  CHECK_FALSE(IsGoodWallTime(1.7e9 + kMaxClockAheadS + 1, 1.7e9));
  // Found by fuzz_agent_link: a "time" of 1e308 reached a held gang's wake-up timer.
  CHECK_FALSE(IsGoodWallTime(1e308, 1.7e9));
  CHECK_FALSE(IsGoodWallTime(-0.5, 1.7e9));
  CHECK_FALSE(IsGoodWallTime(std::numeric_limits<double>::quiet_NaN(), 1.7e9));
}

TEST_CASE("an event taed refuses is said on its run, at its own seq, and the rest is kept") {
  tae::v1::EventBatch batch;
  tae::v1::Event* big = batch.add_events();
  big->set_seq(5);
  big->set_run_id(12);
  big->set_attempt(2);
  for (int i = 0; i < 1025; ++i) {  // one value past what one event may carry
    tae::v1::Scalar* s = big->mutable_metrics()->add_values();
    s->set_key("v" + std::to_string(i));
    s->set_value(i);
  }
  tae::v1::Event* fine = batch.add_events();
  fine->set_seq(6);
  fine->set_run_id(12);
  fine->set_attempt(2);
  fine->set_wall_time(100);
  fine->mutable_metrics()->set_step(3);
  tae::v1::Scalar* loss = fine->mutable_metrics()->add_values();
  loss->set_key("loss");
  loss->set_value(0.5);
  tae::v1::Event* anonymous = batch.add_events();  // no run: nothing to say it on
  anonymous->set_seq(7);
  std::vector<model::IngestEvent> events;
  std::vector<std::string> rejected;
  CHECK(FromProto(batch, 100, &events, &rejected) == 7);
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == model::IngestEvent::Kind::kLog);
  CHECK(events[0].seq == 5);
  CHECK(events[0].run_id == 12);
  CHECK(events[0].attempt == 2);
  CHECK(events[0].stream == "agent");
  CHECK(events[0].text.rfind("warning: taed did not store event 5: metrics.values: 1025 values",
                             0) == 0);
  CHECK(events[1].kind == model::IngestEvent::Kind::kMetrics);
  CHECK(rejected.size() == 2);  // taed.log still has both
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
        registry::AgentState::kLost, registry::AgentState::kRevoked}) {
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
