// Packed series (server/store/series_pack.h): exact round trips, damage refused whole, and the
// store's packs kept true to the rows (written when a run ends, dropped when its points change).

#include "server/store/series_pack.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"
#include "tests/unit/temp_dir.h"

namespace tae::store {
namespace {

std::vector<model::SeriesPoint> RandomSeries(std::mt19937_64& rng, size_t n) {
  std::vector<model::SeriesPoint> points;
  std::uniform_int_distribution<int> gap(1, 50);
  std::normal_distribution<double> noise(0, 1);
  int64_t step = std::uniform_int_distribution<int64_t>(-5, 1000)(rng);
  double wall = 1.79e9 + noise(rng) * 1e6;
  for (size_t i = 0; i < n; ++i) {
    model::SeriesPoint p;
    p.step = step;
    p.value = noise(rng) * std::pow(10.0, std::uniform_int_distribution<int>(-300, 300)(rng));
    p.wall_time = wall;
    points.push_back(p);
    step += gap(rng);
    wall += std::abs(noise(rng)) * 3;  // seconds apart, never exactly regular
  }
  return points;
}

TEST_CASE("a packed series comes back exactly, in about 13 bytes a point") {
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}, size_t{4097}}) {
    std::vector<model::SeriesPoint> points = RandomSeries(rng, n);
    const std::string blob = PackSeries(points);
    std::vector<model::SeriesPoint> back = {{-1, -1, -1}};  // unpacking appends
    REQUIRE(UnpackSeries(blob, &back).ok());
    REQUIRE(back.size() == n + 1);
    back.erase(back.begin());
    CHECK(back == points);
    if (n >= 1000) {
      CHECK(static_cast<double>(blob.size()) / n < 14.0);
    }
  }
  // Extremes: any step, any finite value, -0.0 kept, wall times going back.
  const std::vector<model::SeriesPoint> odd = {
      {std::numeric_limits<int64_t>::min(), -0.0, 0.0},
      {std::numeric_limits<int64_t>::max(), std::numeric_limits<double>::max(), 1.7e9},
      {0, std::numeric_limits<double>::denorm_min(), -3.5},
      {0, -std::numeric_limits<double>::max(), 1e300},
  };
  std::vector<model::SeriesPoint> back;
  REQUIRE(UnpackSeries(PackSeries(odd), &back).ok());
  REQUIRE(back.size() == odd.size());
  CHECK(back == odd);
  CHECK(std::signbit(back[0].value));
}

TEST_CASE("CheckPack bounds a pack's deltas as the columnar writer needs them") {
  std::mt19937_64 rng(17);
  auto magnitude = [](uint64_t d) {
    const auto s = static_cast<int64_t>(d);
    return s >= 0 ? static_cast<uint64_t>(s) : ~static_cast<uint64_t>(s);
  };
  std::uniform_int_distribution<uint64_t> any;
  int floats = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<model::SeriesPoint> points =
        RandomSeries(rng, std::uniform_int_distribution<size_t>(0, 200)(rng));
    const int kind = trial % 4;
    for (model::SeriesPoint& p : points) {
      if (kind == 1) {
        p.value = static_cast<float>(std::tanh(p.value));
      }
      if (kind == 2 && std::uniform_int_distribution<int>(0, 20)(rng) == 0) {
        p.step = static_cast<int64_t>(any(rng));  // wrapping differences
        std::memcpy(&p.wall_time, &p.step, 8);
      }
    }
    absl::StatusOr<PackInfo> info = CheckPack(PackSeries(points));
    REQUIRE(info.ok());
    uint64_t steps = 0;
    uint64_t walls = 0;
    bool all_float = true;
    for (size_t i = 0; i < points.size(); ++i) {
      const double v = points[i].value;
      if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) {
        all_float = false;
      } else {
        const double back = static_cast<float>(v);
        all_float = all_float && std::memcmp(&back, &v, 8) == 0;
      }
      if (i == 0) {
        continue;
      }
      steps = std::max(steps, magnitude(static_cast<uint64_t>(points[i].step) -
                                        static_cast<uint64_t>(points[i - 1].step)));
      uint64_t a = 0;
      uint64_t b = 0;
      std::memcpy(&a, &points[i - 1].wall_time, 8);
      std::memcpy(&b, &points[i].wall_time, 8);
      walls = std::max(walls, magnitude(b - a));
    }
    CHECK(info->step_delta_bound == steps);  // exact
    CHECK(info->wall_delta_bound >= walls);  // a bound
    if (walls < (uint64_t{1} << 55)) {
      CHECK(info->wall_delta_bound <= walls * 128 + 127);  // within a varint byte's worth
    }
    CHECK(info->values_float == all_float);
    floats += info->values_float && !points.empty();
  }
  CHECK(floats > 50);
}

TEST_CASE("a damaged pack is refused whole and nothing is appended") {
  std::mt19937_64 rng(11);
  const std::string blob = PackSeries(RandomSeries(rng, 300));
  const std::vector<model::SeriesPoint> before = {{1, 2, 3}};
  // Every truncation, and every extension, is refused.
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    std::vector<model::SeriesPoint> out = before;
    absl::Status s = UnpackSeries(std::string_view(blob).substr(0, cut), &out);
    INFO("cut at " << cut);
    CHECK(absl::IsDataLoss(s));
    CHECK(out == before);
  }
  std::vector<model::SeriesPoint> out = before;
  CHECK(absl::IsDataLoss(UnpackSeries(blob + "x", &out)));
  CHECK(out == before);
  // Another version, and a count its bytes cannot hold (no huge allocation).
  std::string other = blob;
  other[0] = 2;
  CHECK(absl::IsDataLoss(UnpackSeries(other, &out)));
  CHECK(absl::IsDataLoss(
      UnpackSeries(std::string("\x01\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10), &out)));
  CHECK(out == before);
  // Any one byte changed: refused, or points that unpack (a changed value), never a crash.
  for (size_t at = 0; at < blob.size(); ++at) {
    std::string flipped = blob;
    flipped[at] = static_cast<char>(flipped[at] ^ (1 + at % 251));
    std::vector<model::SeriesPoint> any;
    absl::Status s = UnpackSeries(flipped, &any);
    CHECK((s.ok() || absl::IsDataLoss(s)));
    CHECK((s.ok() || any.empty()));
  }
}

// What CheckPack should say of `blob`: UnpackSeries's verdict, and from its points the count and
// the least and greatest step.
void CheckAgreesWithUnpack(const std::string& blob) {
  std::vector<model::SeriesPoint> points;
  const bool whole = UnpackSeries(blob, &points).ok();
  absl::StatusOr<PackInfo> info = CheckPack(blob);
  INFO("a pack of " << blob.size() << " bytes");
  REQUIRE(info.ok() == whole);
  if (!whole) {
    CHECK(absl::IsDataLoss(info.status()));
    return;
  }
  CHECK(info->count == static_cast<int64_t>(points.size()));
  int64_t least = 0, greatest = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    least = i == 0 ? points[i].step : std::min(least, points[i].step);
    greatest = i == 0 ? points[i].step : std::max(greatest, points[i].step);
  }
  CHECK(info->min_step == least);
  CHECK(info->max_step == greatest);
}

TEST_CASE("a pack's columns are its points', and CheckPack takes exactly what UnpackSeries does") {
  std::mt19937_64 rng(23);
  SeriesColumns columns;  // reused, as a reader does: every column replaced each time
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1000}}) {
    const std::vector<model::SeriesPoint> points = RandomSeries(rng, n);
    const std::string blob = PackSeries(points);
    for (const auto& [values, walls] : {std::pair{false, false}, std::pair{true, false},
                                        std::pair{false, true}, std::pair{true, true}}) {
      REQUIRE(UnpackColumns(blob, values, walls, &columns).ok());
      REQUIRE(columns.steps.size() == n);
      CHECK(columns.values.size() == (values ? n : 0));
      CHECK(columns.walls.size() == (walls ? n : 0));
      for (size_t i = 0; i < n; ++i) {
        CHECK(columns.steps[i] == points[i].step);
        if (values) {
          CHECK(std::memcmp(&columns.values[i], &points[i].value, sizeof(double)) == 0);
        }
        if (walls) {
          CHECK(std::memcmp(&columns.walls[i], &points[i].wall_time, sizeof(double)) == 0);
        }
      }
    }
    CheckAgreesWithUnpack(blob);
    CHECK(absl::IsDataLoss(UnpackColumns(blob.substr(0, blob.size() / 2), true, true, &columns)));
  }
  // Wall times' varints of every length up to 10 bytes and past it, at every alignment: a point's
  // wall time is its bit pattern, so a delta can take 1 to 10 bytes.
  for (int len = 1; len <= 11; ++len) {
    for (int lead = 0; lead < 9; ++lead) {
      std::vector<model::SeriesPoint> points(static_cast<size_t>(lead) + 2);
      for (size_t i = 0; i < points.size(); ++i) {
        points[i].step = static_cast<int64_t>(i);
      }
      std::string blob = PackSeries(points);  // every wall time 0.0: one zero byte each
      // Replace the last wall time's byte with a varint of `len` bytes (11: one too long).
      blob.pop_back();
      blob.append(static_cast<size_t>(len - 1), '\x81');
      blob.push_back('\x01');
      CheckAgreesWithUnpack(blob);
      CheckAgreesWithUnpack(blob + '\x01');  // one more than its count
      CheckAgreesWithUnpack(blob + '\x81');  // a last byte that does not end
      CheckAgreesWithUnpack(blob.substr(0, blob.size() - 1));
    }
  }
  // Random damage, truncations, and bytes that were never a pack.
  const std::string blob = PackSeries(RandomSeries(rng, 200));
  for (size_t cut = 0; cut <= blob.size(); ++cut) {
    CheckAgreesWithUnpack(blob.substr(0, cut));
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = blob;
    const int changes = 1 + trial % 4;
    for (int c = 0; c < changes; ++c) {
      damaged[std::uniform_int_distribution<size_t>(0, damaged.size() - 1)(rng)] =
          static_cast<char>(byte(rng));
    }
    CheckAgreesWithUnpack(damaged);
    std::string noise(static_cast<size_t>(trial % 64), '\0');
    for (char& c : noise) {
      c = static_cast<char>(trial % 3 == 0 ? 0x80 | byte(rng) : byte(rng));
    }
    if (!noise.empty()) {
      noise[0] = 1;  // version 1, so the rest is read
    }
    CheckAgreesWithUnpack(noise);
  }
}

// A store with one experiment of `runs` runs, each with points of "loss" and "acc".
struct Fixture {
  std::unique_ptr<Store> store;
  std::unique_ptr<query::Query> query_holder;
  query::Query& query;
  int64_t exp = 0;
  uint64_t seq = 0;

  explicit Fixture(int runs, const std::string& path = ":memory:")
      : store(std::move(*Store::Open(path))),
        query_holder(std::make_unique<query::Query>(store.get())),
        query(*query_holder) {
    if (runs == 0) {
      return;  // a store opened again
    }
    model::NewExperiment e;
    e.name = e.spec_hash = "packs";
    e.spec_text = "name = \"packs\"";
    for (int i = 0; i < runs; ++i) {
      e.runs.push_back({"baseline", i, "{}", {1, 0, 1, {}}});
    }
    exp = *store->CreateExperiment(e, 1.0);
  }
  void Start(int64_t run) { REQUIRE(store->Transition(run, lifecycle::Assign({"a"}, 2.0)).ok()); }
  // Steps from..to of "loss" and "acc", as ingest takes them.
  std::vector<model::IngestEvent> PointEvents(int64_t run, int64_t from, int64_t to, double base,
                                              int attempt) {
    std::vector<model::IngestEvent> events;
    for (int64_t step = from; step <= to; ++step) {
      model::IngestEvent e;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.seq = ++seq;
      e.run_id = run;
      e.attempt = attempt;
      e.step = step;
      e.wall_time = 1.79e9 + static_cast<double>(step) * 0.37;
      e.values = {{"loss", base / static_cast<double>(step + 1)}, {"acc", base * step}};
      events.push_back(e);
    }
    return events;
  }
  void Points(int64_t run, int64_t from, int64_t to, double base, int attempt = 1) {
    REQUIRE(store->Ingest("a", PointEvents(run, from, to, base, attempt), lifecycle::IngestRules())
                .ok());
  }
  // The run's start, then its last points and its exit in one batch (as an agent sends them).
  void EndWithPoints(int64_t run, int64_t from, int64_t to, double base, int attempt = 1) {
    model::IngestEvent started;
    started.kind = model::IngestEvent::Kind::kStarted;
    started.seq = ++seq;
    started.run_id = run;
    started.attempt = attempt;
    started.pid = 42;
    REQUIRE(store->Ingest("a", {started}, lifecycle::IngestRules()).ok());
    std::vector<model::IngestEvent> events = PointEvents(run, from, to, base, attempt);
    model::IngestEvent exited;
    exited.kind = model::IngestEvent::Kind::kExited;
    exited.seq = ++seq;
    exited.run_id = run;
    exited.attempt = attempt;
    exited.exit_code = 0;
    events.push_back(exited);
    REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
  }
  int64_t Packs() { return *store->db()->QueryInt("SELECT COUNT(*) FROM metric_packs"); }
  int64_t Columns() { return *store->db()->QueryInt("SELECT COUNT(*) FROM metric_columns"); }
  // What the controller's slices do for column files, all at once; how many slices it took.
  int ColumnAll(double slice_s = 1.0) {
    int slices = 0;
    bool more = true;
    while (more && slices < 100000) {
      absl::StatusOr<bool> next = store->ColumnSome(slice_s);
      REQUIRE(next.ok());
      more = *next;
      ++slices;
    }
    return slices;
  }
  // What the controller's slices do, all at once; how many slices it took.
  int PackAll(double slice_s = 1.0) {
    int slices = 0;
    bool more = true;
    while (more && slices < 10000) {
      absl::StatusOr<bool> next = store->PackSome(slice_s);
      REQUIRE(next.ok());
      more = *next;
      ++slices;
    }
    return slices;
  }
  // The experiment's series of `key` as read (packs where there are), and from the rows alone.
  void CheckSeriesAgree(const std::string& key) {
    auto read = query.ExperimentSeries(exp, key);
    REQUIRE(read.ok());
    std::map<int64_t, std::vector<model::SeriesPoint>> as_read;
    std::map<int64_t, std::vector<model::SeriesPoint>> rows;
    for (const auto& [run, series] : *read) {
      auto points = series.Points();
      REQUIRE(points.ok());
      as_read[run] = *points;
      CHECK(series.size() == static_cast<int64_t>(points->size()));
      auto raw = query.QueryMetricAfter(run, key, std::numeric_limits<int64_t>::min());
      REQUIRE(raw.ok());
      rows[run] = *raw;
      // As columns and as a step span, a pack is what its rows are.
      query::StoredSeries from_rows;
      from_rows.points = *raw;
      SeriesColumns a, b;
      REQUIRE(series.Columns(true, true, &a).ok());
      REQUIRE(from_rows.Columns(true, true, &b).ok());
      CHECK(a.steps == b.steps);
      CHECK(a.values == b.values);
      CHECK(a.walls == b.walls);
      CHECK(series.StepSpan() == from_rows.StepSpan());
      CHECK(series.StepSpan().second == raw->back().step);
    }
    CHECK(as_read == rows);
    auto listed = query.ListRuns("packs");
    REQUIRE(listed.ok());
    size_t with_points = 0;
    for (const query::RunView& view : *listed) {
      auto raw = query.QueryMetricAfter(view.run.id, key, std::numeric_limits<int64_t>::min());
      with_points += raw->empty() ? 0 : 1;
    }
    CHECK(read->size() == with_points);
  }
};

TEST_CASE("a run's series are packed as it ends, and a curve reads them as the rows say") {
  Fixture f(3);
  for (int64_t run : {1, 2, 3}) {
    f.Start(run);
  }
  f.Points(1, 0, 400, 10.0);
  f.EndWithPoints(1, 401, 500, 10.0);  // its last points and its exit in one batch
  f.Points(2, 0, 300, 20.0);           // still running: rows only
  f.Points(3, 0, 200, 30.0);
  REQUIRE(f.store->Transition(3, lifecycle::Finish(model::RunState::kCancelled, "x", 3.0)).ok());
  CHECK(f.Packs() == 0);  // ingest and transitions never pack
  CHECK(f.store->packs_due());
  f.PackAll();
  CHECK_FALSE(f.store->packs_due());
  CHECK(f.Packs() == 4);  // runs 1 and 3, two metrics each
  f.CheckSeriesAgree("loss");
  f.CheckSeriesAgree("acc");
  auto read = f.query.ExperimentSeries(f.exp, "loss");
  REQUIRE(read.ok());
  CHECK(read->at(1).size() == 501);  // every point, the last batch's too
  CHECK(read->at(2).size() == 301);
  CHECK(read->count(4) == 0);
  CHECK(f.query.ExperimentSeries(f.exp, "nothing")->empty());

  // A late point of an ended run (an old attempt's resend) drops that series' pack only.
  f.Points(1, 501, 501, 10.0);
  CHECK(f.Packs() == 2);  // run 1's loss and acc both had a point
  f.CheckSeriesAgree("loss");
  CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(1).size() == 502);

  // Retried: queued again, its packs go; the next attempt's points replace steps; its end packs
  // what the rows then say.
  REQUIRE(f.store->Transition(3, lifecycle::Retry("again", 4.0)).ok());
  CHECK(*f.store->db()->QueryInt("SELECT COUNT(*) FROM metric_packs WHERE run_id = 3") == 0);
  f.Start(3);
  f.EndWithPoints(3, 100, 250, 99.0, 2);
  f.PackAll();
  CHECK(*f.store->db()->QueryInt("SELECT COUNT(*) FROM metric_packs WHERE run_id = 3") == 2);
  f.CheckSeriesAgree("loss");
  auto retried = f.query.ExperimentSeries(f.exp, "loss");
  REQUIRE(retried->at(3).size() == 251);
  CHECK(retried->at(3).Points()->at(150).value == 99.0 / 151);  // step 150, the second attempt's
  CHECK(retried->at(3).Points()->at(50).value == 30.0 / 51);    // step 50, the first's
}

TEST_CASE("ended runs without packs are packed in slices, and a damaged pack reads the rows") {
  tae::testing::TempDir dir;
  const std::string path = dir.path() + "/tae.db";
  {
    Fixture f(40, path);
    for (int64_t run = 1; run <= 39; ++run) {
      f.Start(run);
      f.EndWithPoints(run, 0, 50 + run, 1.0 + run);
    }
    // A run that ends and is queued again before its slice: not packed.
    f.Start(40);
    f.Points(40, 0, 90, 41.0);
    REQUIRE(f.store->Transition(40, lifecycle::Finish(model::RunState::kFailed, "x", 4.0)).ok());
    REQUIRE(f.store->Transition(40, lifecycle::Retry("again", 5.0))->state ==
            model::RunState::kQueued);
    f.PackAll();
    CHECK(f.Packs() == 78);
    // As a store from before packs: some runs' packs missing.
    REQUIRE(f.store->db()->Exec("DELETE FROM metric_packs WHERE run_id % 3 = 0").ok());
    REQUIRE(f.Packs() == 52);
    f.CheckSeriesAgree("loss");  // packs and rows together
  }
  Fixture f(0, path);  // opened again: the scan finds them
  f.exp = 1;
  CHECK(f.store->packs_due());
  CHECK(f.store->PackSome(0.0).ok());  // no time: nothing done
  CHECK(f.Packs() == 52);
  CHECK(f.PackAll(1e-6) > 5);  // about a run a slice, every slice going forward
  CHECK(f.Packs() == 78);
  f.CheckSeriesAgree("acc");
  // A damaged pack: logged, and that run's rows are read.
  REQUIRE(f.store->db()->Exec("UPDATE metric_packs SET data = X'0105' WHERE run_id = 7").ok());
  f.CheckSeriesAgree("loss");
  CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(7).size() == 58);
}

TEST_CASE(
    "an ended experiment's metrics are written as column files, read as the packs say, "
    "and dropped when a run changes") {
  tae::testing::TempDir dir;
  const std::string path = dir.path() + "/tae.db";
  const std::string columns = path + ".columns";
  const int kRuns = 300;  // more than one window of the writer (256 runs)
  {
    Fixture f(kRuns, path);
    f.store->set_min_column_runs(kRuns);
    // One point of one metric, as an old attempt's resend brings it after the run ended.
    auto late = [&](int64_t run, int attempt, int64_t step, const std::string& key) {
      model::IngestEvent e;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.seq = ++f.seq;
      e.run_id = run;
      e.attempt = attempt;
      e.step = step;
      e.wall_time = 1.8e9;
      e.values = {{key, 3.0}};
      REQUIRE(f.store->Ingest("a", {e}, lifecycle::IngestRules()).ok());
    };
    for (int64_t run = 1; run <= kRuns - 1; ++run) {
      f.Start(run);
      if (run == 3 || run == 9) {  // failed, to be retried below
        f.Points(run, 0, 20 + run % 7, 1.0 + run);
        REQUIRE(
            f.store->Transition(run, lifecycle::Finish(model::RunState::kFailed, "x", 3.0)).ok());
      } else {
        f.EndWithPoints(run, 0, 20 + run % 7, 1.0 + run);
      }
    }
    f.PackAll();
    f.ColumnAll();
    CHECK(f.Columns() == 0);  // one run not ended yet: no column
    f.Start(kRuns);
    f.Points(kRuns, 0, 30, 5.0);  // still running
    f.ColumnAll();
    CHECK(f.Columns() == 0);
    REQUIRE(f.store->Transition(kRuns, lifecycle::Finish(model::RunState::kFailed, "x", 4.0)).ok());
    f.ColumnAll();
    CHECK(f.Columns() == 0);  // ended but not yet packed: the packs come first
    f.PackAll();
    CHECK(f.store->columns_due());
    CHECK(f.ColumnAll(1e-6) >= 4);  // a window a slice: two keys of two windows each
    CHECK_FALSE(f.store->columns_due());
    REQUIRE(f.Columns() == 2);
    CHECK(std::filesystem::exists(columns + "/e1-k1.col"));
    CHECK(std::filesystem::exists(columns + "/e1-k2.col"));
    std::string bytes;
    std::vector<std::pair<int64_t, std::string_view>> packs;
    REQUIRE(*f.store->ReadColumn(f.exp, "loss", &bytes, &packs));
    CHECK(packs.size() == static_cast<size_t>(kRuns));
    CHECK(packs.front().first == 1);
    CHECK(packs.back().first == kRuns);
    CHECK_FALSE(*f.store->ReadColumn(f.exp, "nothing", &bytes, &packs));
    // Read from the column: every run's points, as the rows say (CheckSeriesAgree's oracle).
    f.CheckSeriesAgree("loss");
    f.CheckSeriesAgree("acc");
    CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(5).size() == 26);  // 0..20+5%7

    // A late point of one run's acc drops that column only, file and row; the run is packed
    // again and the column written again with the point in it.
    late(7, 1, 1000, "acc");
    CHECK(f.Columns() == 1);
    CHECK_FALSE(std::filesystem::exists(columns + "/e1-k2.col"));
    CHECK(f.query.ExperimentSeries(f.exp, "acc")->at(7).size() == 22);  // from the rows
    f.PackAll();
    f.ColumnAll();
    CHECK(f.Columns() == 2);
    f.CheckSeriesAgree("acc");
    CHECK(f.query.ExperimentSeries(f.exp, "acc")->at(7).size() == 22);

    // A run queued again drops both; its new attempt's end writes them again.
    REQUIRE(f.store->Transition(3, lifecycle::Retry("again", 5.0)).ok());
    CHECK(f.Columns() == 0);
    f.ColumnAll();
    CHECK(f.Columns() == 0);  // not every run ended
    f.Start(3);
    f.EndWithPoints(3, 0, 40, 77.0, 2);
    f.PackAll();
    f.ColumnAll();
    CHECK(f.Columns() == 2);
    f.CheckSeriesAgree("loss");
    CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(3).size() == 41);

    // A column being written is abandoned when its experiment changes under it: a run queued
    // again, then a late point of the metric being written.
    REQUIRE(f.store->Transition(9, lifecycle::Retry("again", 6.0)).ok());
    CHECK(f.Columns() == 0);
    f.Start(9);
    f.EndWithPoints(9, 0, 10, 9.0, 2);
    f.PackAll();
    REQUIRE(f.store->ColumnSome(1e-9).ok());  // the first window of "loss" (key 1) written
    late(11, 1, 500, "loss");                 // run 11's loss pack goes, and that column
    f.ColumnAll();
    CHECK(f.Columns() == 1);  // acc only: run 11's loss is not packed yet
    f.PackAll();
    f.ColumnAll();
    CHECK(f.Columns() == 2);
    f.CheckSeriesAgree("loss");
    CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(11).size() == 26);
    CHECK(f.query.ExperimentSeries(f.exp, "loss")->at(9).size() == 23);  // steps 0..10 replaced
    size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(columns)) {
      CHECK(entry.path().extension() == ".col");  // no temporary file left
      ++files;
    }
    CHECK(files == 2);
  }
  {
    // Opened again: nothing to write; a damaged file is logged, dropped and the packs read.
    Fixture f(0, path);
    f.exp = 1;
    f.store->set_min_column_runs(kRuns);
    f.ColumnAll();
    CHECK(f.Columns() == 2);
    std::filesystem::resize_file(columns + "/e1-k1.col",
                                 std::filesystem::file_size(columns + "/e1-k1.col") - 3);
    f.CheckSeriesAgree("loss");
    CHECK(f.Columns() == 1);
    f.ColumnAll();  // and written again
    CHECK(f.Columns() == 2);
    f.CheckSeriesAgree("loss");
    // A file of another generation (as after a crash between its rename and its row).
    REQUIRE(f.store->db()->Exec("UPDATE metric_columns SET generation = generation + 1").ok());
    f.CheckSeriesAgree("acc");
    CHECK(f.Columns() == 1);
  }
  {
    // Below the least size, never.
    tae::testing::TempDir small_dir;
    Fixture f(3, small_dir.path() + "/tae.db");
    for (int64_t run = 1; run <= 3; ++run) {
      f.Start(run);
      f.EndWithPoints(run, 0, 5, 1.0);
    }
    f.PackAll();
    f.ColumnAll();
    CHECK(f.Columns() == 0);
    // In memory, never: nothing is due.
    Fixture memory(1);
    CHECK_FALSE(memory.store->columns_due());
  }
}

}  // namespace
}  // namespace tae::store
