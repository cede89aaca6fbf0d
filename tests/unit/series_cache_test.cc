// The dashboard's series cache reads from SQLite only what changed: nothing when no run moved,
// the new steps of a run that moved, a run's whole series when its points do not add up.

#include "server/http/series_cache.h"

#include <catch2/catch.hpp>
#include <string>

#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"
#include "tests/unit/study.h"

namespace tae::http {
namespace {

void Points(store::Store* store, int64_t run, int64_t from, int64_t to, double value = 1.0,
            int attempt = 1) {
  static uint64_t seq = 0;
  std::vector<model::IngestEvent> events;
  for (int64_t step = from; step <= to; ++step) {
    model::IngestEvent e;
    e.kind = model::IngestEvent::Kind::kMetrics;
    e.seq = ++seq;
    e.run_id = run;
    e.attempt = attempt;
    e.step = step;
    e.values = {{"loss", value + static_cast<double>(step)}};
    events.push_back(e);
  }
  REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
}

TEST_CASE("the series cache reads only the runs that moved, and only their new steps") {
  auto opened = store::Store::Open(":memory:");
  REQUIRE(opened.ok());
  store::Store* store = opened->get();
  query::Query query(store);
  auto exp = store->CreateExperiment(tae::testing::OneVariantStudy("cache", 3), 1.0);
  REQUIRE(exp.ok());
  Points(store, 1, 1, 100);
  Points(store, 2, 1, 100);
  Points(store, 3, 1, 50);

  SeriesCache cache(&query, int64_t{1} << 30);
  auto get = [&] {
    auto runs = query.ListRuns("cache");
    REQUIRE(runs.ok());
    auto series = cache.Get(*exp, *runs, "loss");
    REQUIRE(series.ok());
    return *series;
  };
  const auto* first = get();
  CHECK(cache.reads() == 1);  // one statement for the whole experiment
  CHECK(first->at(1).size() == 100);
  CHECK(first->at(3).size() == 50);
  CHECK(cache.points() == 250);

  get();
  CHECK(cache.reads() == 1);  // nothing moved: nothing read

  Points(store, 3, 51, 60);
  const auto* grown = get();
  CHECK(cache.reads() == 2);  // run 3's new steps only
  REQUIRE(grown->at(3).size() == 60);
  CHECK(grown->at(3).Points()->back().step == 60);
  CHECK(grown->at(3).Points()->back().value == 61.0);
  CHECK(grown->at(1).size() == 100);

  // Steps 10..20 of run 1 are stored again with other values by a later attempt resuming from a
  // checkpoint: the count no longer adds up, so the whole series is read.
  Points(store, 1, 10, 20, 500.0, 2);
  Points(store, 1, 101, 101, 1.0, 2);
  const auto* replaced = get();
  CHECK(replaced->at(1).size() == 101);
  CHECK(replaced->at(1).Points()->at(9).value == 510.0);  // step 10
}

TEST_CASE("the series cache keeps at most its points, dropping the least recently asked") {
  auto opened = store::Store::Open(":memory:");
  REQUIRE(opened.ok());
  store::Store* store = opened->get();
  query::Query query(store);
  auto a = store->CreateExperiment(tae::testing::OneVariantStudy("cache", 1), 1.0);
  REQUIRE(a.ok());
  model::NewExperiment other = tae::testing::OneVariantStudy("cache", 1);
  other.name = other.spec_hash = "other";
  auto b = store->CreateExperiment(other, 2.0);
  REQUIRE(b.ok());
  Points(store, 1, 1, 80);
  Points(store, 2, 1, 80);
  SeriesCache cache(&query, 100 * SeriesCache::kBytesPerPoint);
  auto runs_a = query.ListRuns("cache");
  auto runs_b = query.ListRuns("other");
  REQUIRE(cache.Get(*a, *runs_a, "loss").ok());
  REQUIRE(cache.Get(*b, *runs_b, "loss").ok());
  CHECK(cache.points() == 80);  // a went: 160 > 100
  REQUIRE(cache.Get(*b, *runs_b, "loss").ok());
  CHECK(cache.reads() == 2);  // b is still there
}

TEST_CASE("series nobody reports are bounded too: asking for new names evicts old ones") {
  auto opened = store::Store::Open(":memory:");
  REQUIRE(opened.ok());
  store::Store* store = opened->get();
  query::Query query(store);
  auto exp = store->CreateExperiment(tae::testing::OneVariantStudy("cache", 2), 1.0);
  REQUIRE(exp.ok());
  Points(store, 1, 1, 10);
  constexpr int64_t kCap = 64 << 10;
  SeriesCache cache(&query, kCap);
  auto runs = query.ListRuns("cache");
  REQUIRE(runs.ok());
  for (int i = 0; i < 5000; ++i) {
    REQUIRE(cache.Get(*exp, *runs, "no/such/metric/" + std::to_string(i)).ok());
  }
  CHECK(cache.points() == 0);
  CHECK(cache.bytes() <= kCap);
  // Each entry costs at least kBytesPerEntry: far fewer than the 5000 names asked for stay.
  CHECK(cache.entries() <= static_cast<size_t>(kCap / SeriesCache::kBytesPerEntry));
  CHECK(cache.entries() >= 2);
}

}  // namespace
}  // namespace tae::http
