#include "server/store/store.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/migrations.h"

namespace tae::store {
namespace {

std::string TempDbPath(const char* name) {
  std::string path = std::filesystem::temp_directory_path() /
                     (std::string("tae-store-test-") + name + "-" + std::to_string(getpid()));
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return path;
}

model::NewExperiment TwoRuns() {
  model::NewExperiment exp;
  exp.name = "study";
  exp.spec_hash = "abc";
  exp.spec_text = "name = \"study\"";
  exp.runs.push_back({"baseline", 0, "{}", {2, 0, 1, {}}});
  exp.runs.push_back({"no-attn", 0, "{}", {2, 0, 1, {{"accelerator", "cpu"}}}});
  return exp;
}

}  // namespace

TEST_CASE("migrations build a fresh database at the latest version") {
  std::string path = TempDbPath("fresh");
  auto store = Store::Open(path);
  REQUIRE(store.ok());
  auto version = (*store)->db()->QueryInt("PRAGMA user_version");
  REQUIRE(version.ok());
  CHECK(*version == EmbeddedMigrations().back().version);
  auto tables = (*store)->db()->QueryInt(
      "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
      "('experiments', 'runs', 'run_transitions', 'metrics', 'run_summaries', 'logs', 'agents')");
  REQUIRE(tables.ok());
  CHECK(*tables == 7);
  std::filesystem::remove(path);
}

TEST_CASE("migrations on an existing database apply only the new ones and keep the data") {
  std::string path = TempDbPath("existing");
  std::vector<Migration> v1 = {{1, "one", "CREATE TABLE a (x INTEGER) STRICT;"}};
  {
    auto store = Store::Open(path, v1);
    REQUIRE(store.ok());
    REQUIRE((*store)->db()->Exec("INSERT INTO a VALUES (42)").ok());
  }
  std::vector<Migration> v2 = v1;
  // Running migration 1 again would fail (table exists), so success proves it was skipped.
  v2.push_back({2, "two", "ALTER TABLE a ADD COLUMN y INTEGER NOT NULL DEFAULT 7;"});
  auto store = Store::Open(path, v2);
  REQUIRE(store.ok());
  auto version = (*store)->db()->QueryInt("PRAGMA user_version");
  CHECK(*version == 2);
  auto sum = (*store)->db()->QueryInt("SELECT x + y FROM a");
  REQUIRE(sum.ok());
  CHECK(*sum == 49);
  std::filesystem::remove(path);
}

TEST_CASE("runs stored before run metadata existed read back with an empty one") {
  std::string path = TempDbPath("pre-meta");
  std::vector<Migration> first = {EmbeddedMigrations().front()};
  REQUIRE(first.front().version == 1);
  {
    auto store = Store::Open(path, first);
    REQUIRE(store.ok());
    REQUIRE((*store)
                ->db()
                ->Exec("INSERT INTO experiments (name, spec_hash, spec_text, created_at) VALUES "
                       "('old', 'h', 't', 1); INSERT INTO runs (experiment_id, variant, seed, "
                       "config, state, max_attempts, created_at) VALUES (1, 'baseline', 0, '{}', "
                       "'succeeded', 1, 1)")
                .ok());
  }
  auto store = Store::Open(path);
  REQUIRE(store.ok());
  auto run = (*store)->GetRun(1);
  REQUIRE(run.ok());
  CHECK(run->variant == "baseline");
  CHECK(run->meta.empty());
  std::filesystem::remove(path);
}

TEST_CASE("runs stored before their resources were columns get them from their config") {
  std::string path = TempDbPath("pre-resources");
  std::vector<Migration> before(EmbeddedMigrations().begin(), EmbeddedMigrations().begin() + 5);
  REQUIRE(before.back().version == 5);
  {
    auto store = Store::Open(path, before);
    REQUIRE(store.ok());
    REQUIRE((*store)
                ->db()
                ->Exec("INSERT INTO experiments (name, spec_hash, spec_text, created_at) VALUES "
                       "('old', 'h', 't', 1); INSERT INTO runs (experiment_id, variant, seed, "
                       "config, state, max_attempts, created_at) VALUES (1, 'job', 0, "
                       "'{\"job.snapshot\": \"abc\", \"job.command\": \"python3 t.py\", "
                       "\"resources.max_attempts\": 4}', 'succeeded', 4, 1), (1, 'train', 0, "
                       "'{\"resources.max_attempts\": \"x\"}', 'queued', 1, 1), "
                       "(1, 'broken', 0, 'not json', 'failed', 1, 1)")
                .ok());
  }
  auto store = Store::Open(path);
  REQUIRE(store.ok());
  auto job = (*store)->GetRun(1);
  REQUIRE(job.ok());
  CHECK(job->snapshot_id == "abc");
  CHECK(job->command == "python3 t.py");
  CHECK(job->attempts_granted == 4);
  auto train = (*store)->GetRun(2);
  REQUIRE(train.ok());
  CHECK(train->snapshot_id.empty());
  CHECK(train->command.empty());
  CHECK(train->attempts_granted == 1);  // not an integer: the default, as before
  CHECK((*store)->GetRun(3)->attempts_granted == 1);
  auto usages = (*store)->SnapshotUsages();
  REQUIRE(usages.ok());
  REQUIRE(usages->size() == 1);
  CHECK(usages->at("abc").runs == 1);
  CHECK(usages->at("abc").active_runs == 0);
  std::filesystem::remove(path);
}

TEST_CASE("a database newer than the binary is refused with a clear message") {
  std::string path = TempDbPath("newer");
  {
    auto db = Db::Open(path);
    REQUIRE(db.ok());
    REQUIRE(db->Exec("PRAGMA user_version = 999").ok());
  }
  auto store = Store::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(std::string(store.status().message()).find("schema version 999 is newer") !=
        std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("a failing migration leaves the database at the previous version") {
  std::string path = TempDbPath("failing");
  std::vector<Migration> bad = {{1, "one", "CREATE TABLE a (x INTEGER) STRICT;"},
                                {2, "two", "CREATE TABLE b (x INTEGER); SELECT * FROM nope;"}};
  auto store = Store::Open(path, bad);
  REQUIRE_FALSE(store.ok());
  auto db = Db::Open(path);
  REQUIRE(db.ok());
  CHECK(*db->QueryInt("PRAGMA user_version") == 1);
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'b'") == 0);
  std::filesystem::remove(path);
}

TEST_CASE("run lifecycle: assign, start, metrics, exit, with a transition for each step") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  query::Query query(&store);
  auto exp_id = store.CreateExperiment(TwoRuns(), 100.0);
  REQUIRE(exp_id.ok());
  auto queued = store.QueuedRuns();
  REQUIRE(queued.ok());
  REQUIRE(queued->size() == 2);
  int64_t run_id = (*queued)[0].id;

  auto assigned = store.Transition(run_id, lifecycle::Assign({"agent-a"}, 101.0));
  REQUIRE(assigned.ok());
  CHECK(assigned->attempt == 1);
  CHECK_FALSE(
      store.Transition(run_id, lifecycle::Assign({"agent-b"}, 101.5)).ok());  // not queued any more

  auto event = [run_id](model::IngestEvent::Kind kind, uint64_t seq, double at) {
    model::IngestEvent e;
    e.kind = kind;
    e.seq = seq;
    e.run_id = run_id;
    e.attempt = 1;
    e.wall_time = at;
    return e;
  };
  model::IngestEvent started = event(model::IngestEvent::Kind::kStarted, 1, 102.0);
  started.pid = 4242;
  model::IngestEvent m1 = event(model::IngestEvent::Kind::kMetrics, 2, 103.0);
  m1.step = 10;
  m1.values = {{"eval/loss", 2.0}};
  model::IngestEvent m2 = event(model::IngestEvent::Kind::kMetrics, 3, 104.0);
  m2.step = 20;
  m2.values = {{"eval/loss", 1.5}};
  model::IngestEvent exited = event(model::IngestEvent::Kind::kExited, 4, 105.0);
  auto ended = store.Ingest("agent-a", {started, m1, m2, exited}, lifecycle::IngestRules());
  REQUIRE(ended.ok());
  REQUIRE(ended->size() == 1);
  CHECK((*ended)[0].state == model::RunState::kSucceeded);

  // A resend of the same batch changes nothing.
  auto again = store.Ingest("agent-a", {started, m1, m2, exited}, lifecycle::IngestRules());
  REQUIRE(again.ok());
  CHECK(again->empty());
  CHECK(*store.db()->QueryInt("SELECT COUNT(*) FROM metrics") == 2);

  auto run = store.GetRun(run_id);
  REQUIRE(run.ok());
  CHECK(run->state == model::RunState::kSucceeded);
  CHECK(run->pid == 4242);
  auto summaries = query.Summaries(run_id);
  REQUIRE(summaries.ok());
  REQUIRE(summaries->size() == 1);
  CHECK((*summaries)[0].last_step == 20);
  CHECK((*summaries)[0].last_value == 1.5);
  CHECK((*summaries)[0].min_value == 1.5);
  CHECK((*summaries)[0].max_value == 2.0);
  CHECK((*summaries)[0].count == 2);

  auto transitions = query.ListTransitions(run_id);
  REQUIRE(transitions.ok());
  std::vector<std::string> to;
  for (const auto& t : *transitions) {
    to.push_back(t.to_state);
  }
  CHECK(to == std::vector<std::string>{"queued", "assigned", "running", "succeeded"});
}

TEST_CASE(
    "a batch's points are stored in key order yet as they came: the first of a repeated step "
    "stays, the summary is the same, and a later attempt's point replaces an earlier one's") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  query::Query query(&store);
  REQUIRE(store.CreateExperiment(TwoRuns(), 100.0).ok());
  auto queued = store.QueuedRuns();
  REQUIRE(queued.ok());
  const int64_t run_id = (*queued)[0].id;
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"agent-a"}, 101.0)).ok());
  auto metrics = [run_id](uint64_t seq, int64_t step, int attempt,
                          std::vector<model::MetricValue> values) {
    model::IngestEvent e;
    e.kind = model::IngestEvent::Kind::kMetrics;
    e.seq = seq;
    e.run_id = run_id;
    e.attempt = attempt;
    e.step = step;
    e.wall_time = 100.0 + seq;
    e.values = std::move(values);
    return e;
  };
  // Steps out of order, two keys interleaved, step 30 of train/loss twice in one batch.
  auto stored = store.Ingest("agent-a",
                             {metrics(1, 30, 1, {{"train/loss", 3.0}, {"train/lr", 0.3}}),
                              metrics(2, 10, 1, {{"train/loss", 1.0}, {"train/lr", 0.1}}),
                              metrics(3, 30, 1, {{"train/loss", 9.0}}),
                              metrics(4, 20, 1, {{"train/loss", 2.0}, {"train/lr", 0.2}})},
                             lifecycle::IngestRules());
  REQUIRE(stored.ok());
  CHECK(*store.db()->QueryInt("SELECT COUNT(*) FROM metrics") == 6);
  CHECK(*store.db()->QueryInt("SELECT CAST(value AS INTEGER) FROM metrics m JOIN metric_keys k "
                              "ON k.id = m.key_id WHERE k.name = 'train/loss' AND step = 30") ==
        3);  // the first of the repeated step, as it came
  auto summaries = query.Summaries(run_id);
  REQUIRE(summaries.ok());
  REQUIRE(summaries->size() == 2);
  for (const auto& summary : *summaries) {
    INFO(summary.key);
    CHECK(summary.last_step == 30);
    CHECK(summary.count == 3);
  }
  // A later attempt's point of a step replaces the earlier attempt's.
  REQUIRE(
      store.Ingest("agent-a", {metrics(5, 30, 2, {{"train/loss", 7.0}})}, lifecycle::IngestRules())
          .ok());
  CHECK(*store.db()->QueryInt("SELECT CAST(value AS INTEGER) FROM metrics m JOIN metric_keys k "
                              "ON k.id = m.key_id WHERE k.name = 'train/loss' AND step = 30") == 7);
}

TEST_CASE("run metadata merges key by key, survives a resend and ignores a past attempt") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  REQUIRE(store.CreateExperiment(TwoRuns(), 1.0).ok());
  int64_t run_id = (*store.QueuedRuns())[0].id;
  CHECK(store.GetRun(run_id)->meta.empty());
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"a"}, 2.0)).ok());

  auto meta = [run_id](uint64_t seq, int attempt, model::RunMeta values) {
    model::IngestEvent e;
    e.kind = model::IngestEvent::Kind::kMeta;
    e.seq = seq;
    e.run_id = run_id;
    e.attempt = attempt;
    e.wall_time = 3.0;
    e.meta = std::move(values);
    return e;
  };
  model::IngestEvent metrics;
  metrics.kind = model::IngestEvent::Kind::kMetrics;
  metrics.seq = 2;
  metrics.run_id = run_id;
  metrics.attempt = 1;
  metrics.values = {{"train/loss", 2.0}};
  model::IngestEvent first =
      meta(1, 1, {{"libtorch", "1.13.0"}, {"blas", "/usr/lib/libblas.so.3"}});
  REQUIRE(store.Ingest("a", {first, metrics}, lifecycle::IngestRules()).ok());
  CHECK(store.GetRun(run_id)->meta ==
        model::RunMeta{{"blas", "/usr/lib/libblas.so.3"}, {"libtorch", "1.13.0"}});

  // A resend changes nothing; a later line adds keys and replaces the ones it repeats.
  REQUIRE(store.Ingest("a", {first, metrics}, lifecycle::IngestRules()).ok());
  REQUIRE(store
              .Ingest("a", {meta(3, 1, {{"threads", "2"}, {"blas", "openblas"}})},
                      lifecycle::IngestRules())
              .ok());
  CHECK(store.GetRun(run_id)->meta ==
        model::RunMeta{{"blas", "openblas"}, {"libtorch", "1.13.0"}, {"threads", "2"}});

  // After a requeue, a late event of attempt 1 is ignored; attempt 2 merges over attempt 1.
  REQUIRE(store.Transition(run_id, lifecycle::Lost("agent a lost", 4.0)).ok());
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"b"}, 5.0)).ok());
  REQUIRE(store.Ingest("a", {meta(4, 1, {{"threads", "8"}})}, lifecycle::IngestRules()).ok());
  REQUIRE(store.Ingest("b", {meta(1, 2, {{"blas", "mkl"}})}, lifecycle::IngestRules()).ok());
  CHECK(store.GetRun(run_id)->meta ==
        model::RunMeta{{"blas", "mkl"}, {"libtorch", "1.13.0"}, {"threads", "2"}});
}

TEST_CASE("a run keeps a bounded number of metadata keys") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  REQUIRE(store.CreateExperiment(TwoRuns(), 1.0).ok());
  int64_t run_id = (*store.QueuedRuns())[0].id;
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"a"}, 2.0)).ok());
  model::IngestEvent e;
  e.kind = model::IngestEvent::Kind::kMeta;
  e.seq = 1;
  e.run_id = run_id;
  e.attempt = 1;
  for (int i = 0; i < 300; ++i) {
    e.meta[absl::StrCat("k", 1000 + i)] = "v";
  }
  REQUIRE(store.Ingest("a", {e}, lifecycle::IngestRules()).ok());
  model::RunMeta stored = store.GetRun(run_id)->meta;
  CHECK(stored.size() == 256);
  CHECK(stored.count("k1000") == 1);
  CHECK(stored.count("k1299") == 0);
  e.seq = 2;
  e.meta = {{"k1000", "updated"}, {"new", "dropped"}};
  REQUIRE(store.Ingest("a", {e}, lifecycle::IngestRules()).ok());
  stored = store.GetRun(run_id)->meta;
  CHECK(stored.size() == 256);
  CHECK(stored.at("k1000") == "updated");
  CHECK(stored.count("new") == 0);
}

TEST_CASE("a lost run is requeued without spending its attempts") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  REQUIRE(store.CreateExperiment(TwoRuns(), 1.0).ok());
  int64_t run_id = (*store.QueuedRuns())[0].id;
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"a"}, 2.0)).ok());
  auto first = store.Transition(run_id, lifecycle::Lost("agent a lost", 3.0));
  REQUIRE(first.ok());
  CHECK(first->state == model::RunState::kQueued);
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"a"}, 4.0)).ok());
  auto second = store.Transition(run_id, lifecycle::Lost("agent a lost", 5.0));
  REQUIRE(second.ok());
  // max_attempts = 2, both lost with their agent: the worker's fault, never the job's.
  CHECK(second->state == model::RunState::kQueued);
  CHECK(store.GetRun(run_id)->attempt == 2);
  CHECK(store.GetRun(run_id)->max_attempts == 4);
  CHECK(store.GetRun(run_id)->infra_faults == 2);
}

TEST_CASE("experiments resolve by id, e-prefixed id and newest name") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  query::Query query(&store);
  int64_t first = *store.CreateExperiment(TwoRuns(), 1.0);
  int64_t second = *store.CreateExperiment(TwoRuns(), 2.0);
  CHECK(*store.ResolveExperiment(std::to_string(first)) == first);
  CHECK(*store.ResolveExperiment("e" + std::to_string(first)) == first);
  CHECK(*store.ResolveExperiment("study") == second);
  auto missing = store.ResolveExperiment("nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  auto exp = query.GetExperiment(second);
  REQUIRE(exp.ok());
  CHECK(exp->counts.total == 2);
  CHECK(exp->counts.queued == 2);
  CHECK(exp->variants == std::vector<std::string>{"baseline", "no-attn"});
}

}  // namespace tae::store

namespace tae::store {

TEST_CASE("QueryMetric returns raw points, or equal-step buckets with mean, min and max") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  query::Query query(&store);
  REQUIRE(store.CreateExperiment(TwoRuns(), 100.0).ok());
  const int64_t run_id = (*store.QueuedRuns())[0].id;
  REQUIRE(store.Transition(run_id, lifecycle::Assign({"agent-a"}, 101.0)).ok());
  // Steps 1..100, value = step, one key; a second key with one point.
  std::vector<model::IngestEvent> events;
  for (int step = 1; step <= 100; ++step) {
    model::IngestEvent e;
    e.kind = model::IngestEvent::Kind::kMetrics;
    e.seq = static_cast<uint64_t>(step);
    e.run_id = run_id;
    e.attempt = 1;
    e.wall_time = 1000.0 + step;
    e.step = step;
    e.values = {{"train/loss", static_cast<double>(step)}};
    if (step == 50) {
      e.values.push_back({"eval/acc", 0.5});
    }
    events.push_back(e);
  }
  REQUIRE(store.Ingest("agent-a", events, lifecycle::IngestRules()).ok());

  auto raw = query.QueryMetric(run_id, "train/loss", 0);
  REQUIRE(raw.ok());
  REQUIRE(raw->size() == 100);
  CHECK((*raw)[0].step == 1);
  CHECK((*raw)[99].step == 100);
  CHECK((*raw)[99].wall_time == 1100.0);
  CHECK(query.QueryMetric(run_id, "train/loss", 100)->size() == 100);  // fits: raw

  auto buckets = query.QueryMetric(run_id, "train/loss", 10);
  REQUIRE(buckets.ok());
  REQUIRE(buckets->size() == 10);
  // Bucket b: steps 10b+1 .. 10b+10.
  const model::MetricPoint& third = (*buckets)[2];
  CHECK(third.step == 30);
  CHECK(third.count == 10);
  CHECK(third.min == 21.0);
  CHECK(third.max == 30.0);
  CHECK(third.value == Approx(25.5));
  CHECK(third.wall_time == 1030.0);
  int64_t total = 0;
  for (const model::MetricPoint& p : *buckets) {
    total += p.count;
  }
  CHECK(total == 100);  // every point in exactly one bucket

  auto uneven = query.QueryMetric(run_id, "train/loss", 7);
  REQUIRE(uneven.ok());
  CHECK(uneven->size() <= 7);
  CHECK(uneven->back().step == 100);

  auto one = query.QueryMetric(run_id, "eval/acc", 10);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].step == 50);
  CHECK(query.QueryMetric(run_id, "no/such", 10)->empty());
}

}  // namespace tae::store

namespace tae::store {

TEST_CASE("snapshots are stored once per id, listed newest first and deleted") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store& store = **opened;
  model::SnapshotRecord a{"aa", "0644 1 " + std::string(64, 'a') + " x\n", 1, 1, "/src/a", 10.0};
  model::SnapshotRecord b{"bb", "", 3, 300, "/src/b", 20.0};
  REQUIRE(store.PutSnapshot(a).ok());
  REQUIRE(store.PutSnapshot(b).ok());
  model::SnapshotRecord again = a;
  again.source = "/elsewhere";  // the same content mounted from another directory
  again.created_at = 30.0;
  REQUIRE(store.PutSnapshot(again).ok());
  auto got = store.GetSnapshot("aa");
  REQUIRE(got.ok());
  CHECK(got->manifest == a.manifest);
  CHECK(got->source == "/src/a");  // the first row stays
  auto listed = store.ListSnapshots();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].id == "bb");
  CHECK((*listed)[0].bytes == 300);
  CHECK((*listed)[0].manifest.empty());  // listings leave manifests out
  CHECK(*store.DeleteSnapshot("aa"));
  CHECK_FALSE(*store.DeleteSnapshot("aa"));
  CHECK(store.GetSnapshot("aa").status().code() == absl::StatusCode::kNotFound);
}

}  // namespace tae::store

namespace tae::store {
namespace {

// A store with one queued run of `hosts` hosts.
struct GangFixture {
  std::unique_ptr<Store> store;
  int64_t run_id = 0;
  explicit GangFixture(int hosts, int max_attempts = 2) {
    auto opened = Store::Open(":memory:");
    REQUIRE(opened.ok());
    store = *std::move(opened);
    model::NewExperiment exp = TwoRuns();
    exp.runs.resize(1);
    exp.runs[0].resources.hosts = hosts;
    exp.runs[0].resources.max_attempts = max_attempts;
    REQUIRE(store->CreateExperiment(exp, 100.0).ok());
    run_id = (*store->QueuedRuns())[0].id;
  }
  model::IngestEvent Exit(int attempt, uint64_t seq, int code) const {
    model::IngestEvent e;
    e.kind = model::IngestEvent::Kind::kExited;
    e.seq = seq;
    e.run_id = run_id;
    e.attempt = attempt;
    e.wall_time = 200.0 + seq;
    e.exit_code = code;
    return e;
  }
};

}  // namespace

TEST_CASE("a gang succeeds when every rank exited 0", "[store][gang]") {
  GangFixture f(2);
  auto assigned = f.store->Transition(f.run_id, lifecycle::Assign({"w0", "w1"}, 101.0));
  REQUIRE(assigned.ok());
  CHECK(assigned->agent_id == "w0");
  CHECK(assigned->hosts == 2);
  CHECK(*f.store->Gang(f.run_id, 1) == std::vector<std::string>{"w0", "w1"});
  CHECK(*f.store->AgentsOf(*assigned) == std::vector<std::string>{"w0", "w1"});

  auto first = f.store->Ingest("w1", {f.Exit(1, 1, 0)}, lifecycle::IngestRules());
  REQUIRE(first.ok());
  CHECK(first->empty());  // rank 0 is still running
  CHECK(f.store->GetRun(f.run_id)->state == model::RunState::kAssigned);
  auto resend = f.store->Ingest("w1", {f.Exit(1, 1, 0)}, lifecycle::IngestRules());
  REQUIRE(resend.ok());
  CHECK(resend->empty());  // the same rank twice does not count twice
  auto stranger = f.store->Ingest("w9", {f.Exit(1, 1, 0)}, lifecycle::IngestRules());
  REQUIRE(stranger.ok());
  CHECK(stranger->empty());  // not a host of this gang
  CHECK(f.store->GetRun(f.run_id)->state == model::RunState::kAssigned);

  auto last = f.store->Ingest("w0", {f.Exit(1, 2, 0)}, lifecycle::IngestRules());
  REQUIRE(last.ok());
  REQUIRE(last->size() == 1);
  CHECK((*last)[0].state == model::RunState::kSucceeded);
  CHECK((*last)[0].gang == std::vector<std::string>{"w0", "w1"});
  CHECK(f.store->GetRun(f.run_id)->reason == "every host exited 0 (2 hosts)");
}

TEST_CASE("one failing rank fails the gang, one lost rank requeues it whole", "[store][gang]") {
  GangFixture f(3);
  REQUIRE(f.store->Transition(f.run_id, lifecycle::Assign({"w0", "w1", "w2"}, 101.0)).ok());
  // Rank 1's host went away with its agent (interrupted): the gang is requeued as a whole.
  model::IngestEvent lost = f.Exit(1, 1, 0);
  lost.interrupted = true;
  auto requeued = f.store->Ingest("w1", {lost}, lifecycle::IngestRules());
  REQUIRE(requeued.ok());
  REQUIRE(requeued->size() == 1);
  CHECK((*requeued)[0].state == model::RunState::kQueued);
  CHECK((*requeued)[0].gang.size() == 3);
  // The other ranks' exits from that attempt are then ignored.
  auto late = f.store->Ingest("w0", {f.Exit(1, 2, 1)}, lifecycle::IngestRules());
  REQUIRE(late.ok());
  CHECK(late->empty());

  // Attempt 2 on other hosts; rank 2 fails: the run fails naming the rank.
  auto second = f.store->Transition(f.run_id, lifecycle::Assign({"w3", "w1", "w0"}, 300.0));
  REQUIRE(second.ok());
  CHECK(second->attempt == 2);
  CHECK(*f.store->Gang(f.run_id, 1) == std::vector<std::string>{"w0", "w1", "w2"});
  REQUIRE(f.store->Ingest("w3", {f.Exit(2, 3, 0)}, lifecycle::IngestRules()).ok());
  auto failed = f.store->Ingest("w0", {f.Exit(2, 4, 3)}, lifecycle::IngestRules());
  REQUIRE(failed.ok());
  REQUIRE(failed->size() == 1);
  // Held while rank 1 still runs: a lost host would still take the blame.
  CHECK((*failed)[0].failure_held);
  CHECK((*failed)[0].state == model::RunState::kAssigned);  // its state as it was
  CHECK(f.store->GetRun(f.run_id)->gang_failure ==
        "rank 2 on w0: exit code 3; the other hosts are stopped");
  // Rank 1 reports (stopped by taed): every host is alive, the failure is the job's.
  model::IngestEvent stopped = f.Exit(2, 5, 143);
  stopped.cancelled = true;
  auto ended = f.store->Ingest("w1", {stopped}, lifecycle::IngestRules());
  REQUIRE(ended.ok());
  REQUIRE(ended->size() == 1);
  CHECK_FALSE((*ended)[0].failure_held);
  CHECK((*ended)[0].state == model::RunState::kFailed);
  auto run = f.store->GetRun(f.run_id);
  CHECK(run->reason ==
        "rank 2 on w0: exit code 3; the other hosts are stopped (all 3 hosts reported)");
  CHECK(run->exit_code == 3);
  CHECK(run->gang_failure.empty());
}

TEST_CASE("added runs join their experiment queued, each once per variant and seed",
          "[store][seeds]") {
  auto store = std::move(*Store::Open(":memory:"));
  model::NewExperiment exp = TwoRuns();
  exp.overrides_json = R"(["train.lr=0.1"])";
  exp.report.min_seeds = 3;
  exp.report.max_seeds = 6;
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  auto plain = store->CreateExperiment(TwoRuns(), 1.0);
  REQUIRE(plain.ok());
  CHECK(*store->AdaptiveExperiments() == std::vector<int64_t>{*id});
  auto source = store->GetExperimentSource(*id);
  REQUIRE(source.ok());
  CHECK(source->spec_text == "name = \"study\"");
  CHECK(source->overrides == std::vector<std::string>{"train.lr=0.1"});
  CHECK(source->report.min_seeds == 3);

  model::NewRun more{"no-attn", 1, "{}", {2, 0, 1, {}}, "added by adaptive seeds: because"};
  REQUIRE(store->AddRuns(*id, {more}, 5.0).ok());
  auto runs = store->ListRuns(*id);
  REQUIRE(runs->size() == 3);
  CHECK(runs->back().seed == 1);
  CHECK(runs->back().state == model::RunState::kQueued);
  query::Query query(store.get());
  auto shown = query.GetRun(runs->back().id);
  REQUIRE(shown.ok());
  REQUIRE(shown->transitions.size() == 1);
  CHECK(shown->transitions[0].reason == "added by adaptive seeds: because");

  // The same seed again, even beside a new one, adds nothing and says which run has it.
  model::NewRun fresh{"baseline", 1, "{}", {2, 0, 1, {}}, "x"};
  absl::Status again = store->AddRuns(*id, {fresh, more}, 6.0);
  CHECK(absl::IsAlreadyExists(again));
  CHECK(std::string(again.message()).find("no-attn at seed 1") != std::string::npos);
  CHECK(store->ListRuns(*id)->size() == 3);
}

TEST_CASE("a search's decisions are stored in order and its pruned runs end in pruned",
          "[store][search]") {
  auto store = std::move(*Store::Open(":memory:"));
  model::NewExperiment exp = TwoRuns();
  exp.report.search.declared = true;
  exp.report.search.method = "asha";
  exp.report.search.min_steps = 10;
  auto id = store->CreateExperiment(exp, 1.0);
  REQUIRE(id.ok());
  CHECK(*store->SearchedExperiments() == std::vector<int64_t>{*id});
  CHECK(store->GetExperimentSource(*id)->report.search.asha());
  auto runs = store->ListRuns(*id);
  REQUIRE(store->Transition((*runs)[1].id, lifecycle::Assign({"a"}, 2.0)).ok());
  model::SearchDecisionRecord keep{"baseline", "baseline", 0, 10, 2.5,    1,
                                   "keep",     1,          1, 1,  "kept", 3.0};
  model::SearchDecisionRecord prune{"no-attn", "", 0, 10, 2.9, 1, "prune", 2, 2, 1, "rung 0", 3.0};
  model::SearchDecisionRecord nodata{"x",      "", 1, 30, std::nullopt, 0,
                                     "nodata", 0,  0, 0,  "none",       3.0};
  REQUIRE(store
              ->RecordSearch(*id, {keep, prune, nodata},
                             {{(*runs)[1].id,
                               lifecycle::Finish(model::RunState::kPruned, "pruned: rung 0", 3.0)}})
              .ok());
  auto decisions = store->SearchDecisions(*id);
  REQUIRE(decisions.ok());
  REQUIRE(decisions->size() == 3);
  CHECK((*decisions)[0].verdict == "keep");
  CHECK((*decisions)[1].point == "no-attn");
  CHECK((*decisions)[1].value == 2.9);
  CHECK_FALSE((*decisions)[2].value.has_value());
  auto pruned = store->GetRun((*runs)[1].id);
  CHECK(pruned->state == model::RunState::kPruned);
  CHECK(pruned->reason == "pruned: rung 0");
  CHECK(IsFinal(pruned->state));
  CHECK(store->GetRun((*runs)[0].id)->state == model::RunState::kQueued);
  // A run of another experiment is refused, and the whole batch with it.
  auto other = store->CreateExperiment(TwoRuns(), 1.0);
  auto foreign = store->ListRuns(*other);
  CHECK_FALSE(store
                  ->RecordSearch(*id, {keep},
                                 {{foreign->front().id,
                                   lifecycle::Finish(model::RunState::kPruned, "x", 4.0)}})
                  .ok());
  CHECK(store->SearchDecisions(*id)->size() == 3);
  // With nothing left to run, it is no longer searched.
  REQUIRE(store->Transition((*runs)[0].id, lifecycle::Finish(model::RunState::kCancelled, "x", 5.0))
              .ok());
  CHECK(store->SearchedExperiments()->empty());
}

}  // namespace tae::store
