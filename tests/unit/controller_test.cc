#include "server/controller/controller.h"

#include <catch2/catch.hpp>

#include "boost/asio/io_context.hpp"
#include "server/query/query.h"
#include "server/rpc/agent_link_service.h"

namespace tae::controller {
namespace {

class FakeChannel : public registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage& message) override { sent.push_back(message); }
  void Close() override { closed = true; }
  std::vector<tae::v1::StartRun> Starts() const {
    std::vector<tae::v1::StartRun> out;
    for (const auto& m : sent) {
      if (m.has_start_run()) {
        out.push_back(m.start_run());
      }
    }
    return out;
  }
  std::vector<tae::v1::TaedMessage> sent;
  bool closed = false;
};

constexpr const char* kSpec = R"(
name = "tiny"
[train]
seeds = [0, 1]
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
)";

AgentHello Hello(const std::string& id, int slots) {
  AgentHello hello;
  hello.agent.id = id;
  hello.agent.slots = slots;
  hello.agent.labels = {{"accelerator", "cpu"}};
  return hello;
}

model::IngestEvent Exited(uint64_t seq, int64_t run_id, int attempt, int code) {
  model::IngestEvent event;
  event.kind = model::IngestEvent::Kind::kExited;
  event.seq = seq;
  event.run_id = run_id;
  event.attempt = attempt;
  event.exit_code = code;
  return event;
}

struct Fixture {
  explicit Fixture(Options options = {})
      : store(std::move(*store::Store::Open(":memory:"))),
        query(store.get()),
        controller(&io, store.get(), options) {}
  boost::asio::io_context io;
  std::unique_ptr<store::Store> store;
  query::Query query;
  Controller controller;
};

}  // namespace

TEST_CASE("submit expands the spec, the scheduler fills free slots and refills them on exit") {
  Fixture f;
  auto channel = std::make_shared<FakeChannel>();
  f.controller.OnRegister(channel, Hello("a", 2));
  auto submitted = f.controller.Submit({kSpec, "tiny.toml", {}, false, ""});
  REQUIRE(submitted.ok());
  CHECK_FALSE(submitted->existing);
  auto runs = f.store->ListRuns(submitted->experiment_id);
  REQUIRE(runs->size() == 4);  // (baseline + no-pos) x 2 seeds

  auto starts = channel->Starts();
  REQUIRE(starts.size() == 2);  // two slots
  CHECK(starts[0].attempt() == 1);
  CHECK(starts[0].config_json().find("\"model.pos_encoding\":\"learned\"") != std::string::npos);

  REQUIRE(f.controller.OnEvents("a", channel.get(), {Exited(1, starts[0].run_id(), 1, 0)}, 1).ok());
  CHECK(channel->Starts().size() == 3);  // the freed slot took the next run
  CHECK(channel->sent.back().has_start_run());
  bool acked = false;
  for (const auto& m : channel->sent) {
    acked = acked || (m.has_ack() && m.ack().seq() == 1);
  }
  CHECK(acked);
  CHECK(f.store->GetRun(starts[0].run_id())->state == model::RunState::kSucceeded);
}

TEST_CASE("an identical spec is recognised unless a new experiment is forced") {
  Fixture f;
  auto first = f.controller.Submit({kSpec, "tiny.toml", {}, false, ""});
  auto second = f.controller.Submit({kSpec, "other-path.toml", {}, false, ""});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(second->existing);
  CHECK(second->experiment_id == first->experiment_id);
  auto forced = f.controller.Submit({kSpec, "tiny.toml", {}, true, ""});
  REQUIRE(forced.ok());
  CHECK(forced->experiment_id != first->experiment_id);
  auto overridden = f.controller.Submit({kSpec, "tiny.toml", {"model.layers=3"}, false, ""});
  REQUIRE(overridden.ok());
  CHECK_FALSE(overridden->existing);
}

TEST_CASE("a bad spec is refused and stores nothing") {
  Fixture f;
  auto result =
      f.controller.Submit({"name = \"x\"\n[model]\nlayres = 2\n", "bad.toml", {}, false, ""});
  REQUIRE_FALSE(result.ok());
  CHECK(std::string(result.status().message()).find("bad.toml:3:1") == 0);
  CHECK(f.query.ListExperiments(0)->empty());
}

TEST_CASE("cancel: queued runs end at once, running runs are asked to stop on their agent") {
  Fixture f;
  auto channel = std::make_shared<FakeChannel>();
  f.controller.OnRegister(channel, Hello("a", 1));
  auto submitted = f.controller.Submit({kSpec, "tiny.toml", {}, false, ""});
  REQUIRE(submitted.ok());
  auto cancelled = f.controller.Cancel("e" + std::to_string(submitted->experiment_id), "");
  REQUIRE(cancelled.ok());
  CHECK(*cancelled == 4);
  auto runs = *f.store->ListRuns(submitted->experiment_id);
  int queued_cancelled = 0;
  for (const auto& run : runs) {
    queued_cancelled += run.state == model::RunState::kCancelled ? 1 : 0;
  }
  CHECK(queued_cancelled == 3);
  REQUIRE(channel->sent.back().has_cancel_run());
  int64_t running = channel->sent.back().cancel_run().run_id();
  model::IngestEvent exited = Exited(1, running, 1, -1);
  exited.cancelled = true;
  REQUIRE(f.controller.OnEvents("a", channel.get(), {exited}, 1).ok());
  CHECK(f.store->GetRun(running)->state == model::RunState::kCancelled);
}

TEST_CASE("reconnecting without a run loses it, it is requeued and placed again") {
  Options no_backoff;
  no_backoff.retry_backoff_s = 0;
  Fixture f(no_backoff);
  auto first = std::make_shared<FakeChannel>();
  f.controller.OnRegister(first, Hello("a", 1));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  int64_t run_id = first->Starts().at(0).run_id();
  auto second = std::make_shared<FakeChannel>();
  f.controller.OnRegister(second, Hello("a", 1));  // an agent restart: holds nothing
  CHECK(first->closed);
  // The lost run went back to the queue and, being the oldest, was placed again: attempt 2.
  auto starts = second->Starts();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].run_id() == run_id);
  CHECK(starts[0].attempt() == 2);
  std::vector<std::string> to;
  auto transitions = f.query.ListTransitions(run_id);
  REQUIRE(transitions.ok());
  for (const auto& t : *transitions) {
    to.push_back(t.to_state);
  }
  CHECK(to == std::vector<std::string>{"queued", "assigned", "lost", "queued", "assigned"});
}

TEST_CASE("a run lost with its agent waits out a retry backoff before its next attempt") {
  Options options;
  options.retry_backoff_s = 30;
  Fixture f(options);
  auto first = std::make_shared<FakeChannel>();
  f.controller.OnRegister(first, Hello("a", 1));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  int64_t run_id = first->Starts().at(0).run_id();
  auto second = std::make_shared<FakeChannel>();
  f.controller.OnRegister(second, Hello("a", 1));  // an agent restart: holds nothing
  // Attempt 1 was lost: requeued, but not before 30 s; the slot goes to the next run instead.
  auto run = f.store->GetRun(run_id);
  REQUIRE(run.ok());
  CHECK(run->state == model::RunState::kQueued);
  CHECK(run->attempt == 1);
  CHECK(run->not_before >= WallNow() + 25);
  CHECK(run->reason.find("retry backoff after a lost attempt: starts in") == 0);
  for (const auto& start : second->Starts()) {
    CHECK(start.run_id() != run_id);
  }
}

TEST_CASE("the retry backoff is read off the controller's clock exactly") {
  Options options;
  options.retry_backoff_s = 30;
  double now = 1000;
  options.clock = [&now] { return now; };
  Fixture f(options);
  auto first = std::make_shared<FakeChannel>();
  f.controller.OnRegister(first, Hello("a", 1));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  const int64_t run_id = first->Starts().at(0).run_id();
  now = 1010;
  f.controller.OnRegister(std::make_shared<FakeChannel>(), Hello("a", 1));  // holds nothing
  auto run = f.store->GetRun(run_id);
  REQUIRE(run.ok());
  CHECK(run->state == model::RunState::kQueued);
  CHECK(run->not_before == 1040);
  auto transitions = f.query.ListTransitions(run_id);
  REQUIRE(transitions.ok());
  REQUIRE(transitions->size() == 4);
  CHECK(transitions->front().at == 1000);  // queued at submit
  CHECK(transitions->back().at == 1010);   // requeued when the agent came back without it
}

TEST_CASE("an agent's faults in a row survive its reconnects and a restart of taed") {
  auto store = std::move(*store::Store::Open(":memory:"));
  boost::asio::io_context io;
  auto infra_exit = [](const tae::v1::StartRun& start, uint64_t seq, bool by_other_job) {
    model::IngestEvent exit = Exited(seq, start.run_id(), start.attempt(), 1);
    exit.infra = true;
    exit.by_other_job = by_other_job;
    exit.text = "exit code 1; the worker's disk is full";
    return exit;
  };
  {
    Controller first(&io, store.get(), Options{});
    auto channel = std::make_shared<FakeChannel>();
    first.OnRegister(channel, Hello("a", 1));
    REQUIRE(first.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
    // Hurt by another job (it filled the disk): not this worker's fault.
    REQUIRE(first.OnEvents("a", channel.get(), {infra_exit(channel->Starts().back(), 1, true)}, 1)
                .ok());
    CHECK(*store->AgentInfraFaults("a") == 0);
    REQUIRE(first.OnEvents("a", channel.get(), {infra_exit(channel->Starts().back(), 2, false)}, 2)
                .ok());
    CHECK(*store->AgentInfraFaults("a") == 1);
    // It reconnects: the count stays.
    auto again = std::make_shared<FakeChannel>();
    first.OnRegister(again, Hello("a", 1));
    CHECK(first.registry().agents().at("a").infra_faults == 1);
    CHECK(first.registry().agents().at("a").quarantine.empty());
  }
  // taed restarts: the count stays, and the next fault in a row quarantines the agent.
  Controller second(&io, store.get(), Options{});
  second.Recover();
  auto channel = std::make_shared<FakeChannel>();
  second.OnRegister(channel, Hello("a", 1));
  REQUIRE(second.registry().agents().at("a").infra_faults == 1);
  REQUIRE_FALSE(channel->Starts().empty());
  REQUIRE(second.OnEvents("a", channel.get(), {infra_exit(channel->Starts().back(), 3, false)}, 3)
              .ok());
  CHECK(*store->AgentInfraFaults("a") == 2);
  CHECK_FALSE(second.registry().agents().at("a").quarantine.empty());
  CHECK(store->AgentQuarantines()->count("a") == 1);
  // Its run, requeued, says why no agent takes it.
  second.Schedule();
  auto waiting = store->GetRun(channel->Starts().back().run_id());
  REQUIRE(waiting.ok());
  CHECK(waiting->state == model::RunState::kQueued);
  CHECK(waiting->reason ==
        "waiting: every matching agent is draining or quarantined (taectl agents undrain ID)");
  // Undrain lifts it and starts the count again.
  REQUIRE(second.Drain("a", false).ok());
  CHECK(*store->AgentInfraFaults("a") == 0);
}

TEST_CASE("a gang's held failure ends at the blame window unless a host is lost first") {
  double now = 1000;
  Options options;
  options.clock = [&now] { return now; };
  options.gang_blame_window_s = 60;
  Fixture f(options);
  auto a = std::make_shared<FakeChannel>();
  auto b = std::make_shared<FakeChannel>();
  AgentHello ha = Hello("a", 1);
  ha.agent.labels["slice"] = "s";
  AgentHello hb = Hello("b", 1);
  hb.agent.labels["slice"] = "s";
  f.controller.OnRegister(a, ha);
  f.controller.OnRegister(b, hb);
  REQUIRE(f.controller
              .Submit({"name = \"g\"\n[train]\nseeds = [0, 1]\n[resources]\nhosts = 2\n",
                       "g.toml",
                       {},
                       false,
                       ""})
              .ok());
  REQUIRE(a->Starts().size() == 1);
  REQUIRE(b->Starts().size() == 1);
  const int64_t run_id = a->Starts()[0].run_id();
  REQUIRE(b->Starts()[0].rank() == 1);
  // Rank 1 fails with what a lost peer causes; rank 0 never reports (its host is gone).
  model::IngestEvent failed = Exited(1, run_id, 1, 3);
  failed.wall_time = now;
  REQUIRE(f.controller.OnEvents("b", b.get(), {failed}, 1).ok());
  auto run = f.store->GetRun(run_id);
  CHECK(run->state == model::RunState::kAssigned);
  CHECK(run->gang_failure == "rank 1 on b: exit code 3; the other hosts are stopped");
  bool stopped = false;  // rank 0 was asked to stop
  for (const auto& m : a->sent) {
    stopped = stopped || (m.has_cancel_run() && m.cancel_run().run_id() == run_id);
  }
  CHECK(stopped);
  now = 1059;
  f.controller.Schedule();
  CHECK(f.store->GetRun(run_id)->state == model::RunState::kAssigned);
  now = 1061;
  f.controller.Schedule();
  run = f.store->GetRun(run_id);
  CHECK(run->state == model::RunState::kFailed);
  CHECK(run->reason.find("rank 1 on b: exit code 3; the other hosts are stopped (no host lost "
                         "within 60 s;") == 0);
  // Its slots are free again: the other run of the study is placed on both hosts.
  CHECK(a->Starts().size() == 2);
  CHECK(b->Starts().size() == 2);
}

TEST_CASE("a reconnect that still holds its run keeps it running") {
  Fixture f;
  auto first = std::make_shared<FakeChannel>();
  f.controller.OnRegister(first, Hello("a", 1));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  int64_t run_id = first->Starts().at(0).run_id();
  auto second = std::make_shared<FakeChannel>();
  AgentHello hello = Hello("a", 1);
  hello.held.emplace_back(run_id, 1);
  f.controller.OnRegister(second, hello);
  CHECK(f.store->GetRun(run_id)->state == model::RunState::kAssigned);
  CHECK(second->Starts().empty());  // its only slot is still busy
}

TEST_CASE("a draining agent gets no new runs, an interrupted run is requeued") {
  Fixture f;
  auto channel = std::make_shared<FakeChannel>();
  f.controller.OnRegister(channel, Hello("a", 1));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  REQUIRE(channel->Starts().size() == 1);
  int64_t run_id = channel->Starts()[0].run_id();
  f.controller.OnDraining("a");
  model::IngestEvent interrupted = Exited(1, run_id, 1, -1);
  interrupted.interrupted = true;
  interrupted.text = "agent shut down";
  REQUIRE(f.controller.OnEvents("a", channel.get(), {interrupted}, 1).ok());
  CHECK(channel->Starts().size() == 1);  // the freed slot is not refilled while draining
  auto run = f.store->GetRun(run_id);
  CHECK(run->state == model::RunState::kQueued);
  CHECK(run->attempt == 1);
  CHECK(f.controller.registry().agents().at("a").state() == registry::AgentState::kDraining);
}

TEST_CASE("agent tokens are compared exactly") {
  CHECK(rpc::TokenMatches("Bearer s3cret", "s3cret"));
  CHECK_FALSE(rpc::TokenMatches("Bearer s3cre", "s3cret"));
  CHECK_FALSE(rpc::TokenMatches("Bearer s3creT", "s3cret"));
  CHECK_FALSE(rpc::TokenMatches("s3cret", "s3cret"));
  CHECK_FALSE(rpc::TokenMatches("Bearer ", ""));
}

}  // namespace tae::controller

namespace tae::controller {
namespace {

TEST_CASE("taed packs the series of ended runs in slices after ingest, not during it") {
  Fixture f;
  auto channel = std::make_shared<FakeChannel>();
  f.controller.OnRegister(channel, Hello("a", 4));
  REQUIRE(f.controller.Submit({kSpec, "tiny.toml", {}, false, ""}).ok());
  REQUIRE(channel->Starts().size() == 4);
  uint64_t seq = 0;
  for (const tae::v1::StartRun& start : channel->Starts()) {
    std::vector<model::IngestEvent> events;
    for (int64_t step = 1; step <= 30; ++step) {
      model::IngestEvent point;
      point.kind = model::IngestEvent::Kind::kMetrics;
      point.seq = ++seq;
      point.run_id = start.run_id();
      point.attempt = start.attempt();
      point.step = step;
      point.values = {{"loss", 1.0 / static_cast<double>(step)}, {"acc", 0.01 * step}};
      events.push_back(point);
    }
    events.push_back(Exited(++seq, start.run_id(), start.attempt(), 0));
    REQUIRE(f.controller.OnEvents("a", channel.get(), events, seq).ok());
  }
  auto packs = [&] { return *f.store->db()->QueryInt("SELECT COUNT(*) FROM metric_packs"); };
  CHECK(packs() == 0);  // ingest did not wait for them
  CHECK(f.store->packs_due());
  // The core packs them in slices between its other work.
  for (int i = 0; i < 500 && f.store->packs_due(); ++i) {
    f.io.run_for(std::chrono::milliseconds(10));
  }
  CHECK(packs() == 8);
  auto series = f.query.ExperimentSeries(1, "loss");
  REQUIRE(series.ok());
  REQUIRE(series->size() == 4);
  CHECK(series->begin()->second.size() == 30);
  CHECK(series->begin()->second.Points()->back().value == 1.0 / 30);
}

}  // namespace
}  // namespace tae::controller
