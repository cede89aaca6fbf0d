// The listings behind `taectl ls` and `taectl runs` cost a fixed number of SQL statements,
// however many experiments and runs the store holds.

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"
#include "tests/unit/study.h"

namespace tae::store {
namespace {

// Statements SQLite started while `f` ran.
template <typename F>
int64_t Statements(Store* store, F&& f) {
  const int64_t before = store->db()->statements_started();
  f();
  return store->db()->statements_started() - before;
}

// `taectl runs`: what the ListRuns RPC asks of the read side (server/rpc/control_service.cc).
void ListRunsLikeTheRpc(query::Query* query, int64_t experiment_id, size_t* runs,
                        size_t* summarised) {
  absl::StatusOr<std::vector<query::RunView>> listed =
      query->ListRuns(absl::StrCat("e", experiment_id));
  REQUIRE(listed.ok());
  *runs = listed->size();
  *summarised = 0;
  for (const query::RunView& view : *listed) {
    *summarised += view.summaries.empty() ? 0 : 1;
  }
}

}  // namespace

TEST_CASE("ls and runs issue a constant number of statements, 10 runs or 10,000") {
  auto opened = Store::Open(":memory:");
  REQUIRE(opened.ok());
  Store* store = opened->get();
  query::Query query(store);
  auto small = store->CreateExperiment(testing::TwoVariantStudy("small", 10), 1.0);
  REQUIRE(small.ok());

  auto ingest_one_point_per_run = [&](int64_t first_run, int runs) {
    std::vector<model::IngestEvent> events;
    for (int i = 0; i < runs; ++i) {
      model::IngestEvent e;
      e.kind = model::IngestEvent::Kind::kMetrics;
      e.seq = static_cast<uint64_t>(first_run + i);
      e.run_id = first_run + i;
      e.attempt = 1;
      e.step = 100;
      e.values = {{"eval/loss", 1.0 + i}};
      events.push_back(e);
    }
    REQUIRE(store->Ingest("a", events, lifecycle::IngestRules()).ok());
  };
  ingest_one_point_per_run(1, 10);

  size_t runs = 0;
  size_t summarised = 0;
  std::vector<model::ExperimentRecord> listed;
  const int64_t ls_small = Statements(store, [&] { listed = *query.ListExperiments(0); });
  const int64_t runs_small =
      Statements(store, [&] { ListRunsLikeTheRpc(&query, *small, &runs, &summarised); });
  CHECK(runs == 10);
  CHECK(summarised == 10);

  auto big = store->CreateExperiment(testing::TwoVariantStudy("big", 10000), 2.0);
  REQUIRE(big.ok());
  ingest_one_point_per_run(11, 10000);
  const int64_t ls_big = Statements(store, [&] { listed = *query.ListExperiments(0); });
  const int64_t runs_big =
      Statements(store, [&] { ListRunsLikeTheRpc(&query, *big, &runs, &summarised); });

  CHECK(ls_big == ls_small);
  CHECK(ls_big <= 3);
  CHECK(runs_big == runs_small);
  CHECK(runs == 10000);
  CHECK(summarised == 10000);
  // And the listing is right: newest first, counts and variants in submission order.
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].name == "big");
  CHECK(listed[0].counts.total == 10000);
  CHECK(listed[0].counts.queued == 10000);
  CHECK(listed[0].variants == std::vector<std::string>{"baseline", "ablated"});
  CHECK(listed[1].counts.total == 10);
  CHECK(query.ListExperiments(1)->size() == 1);
}

}  // namespace tae::store
