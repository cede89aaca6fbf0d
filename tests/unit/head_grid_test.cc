#include "common/api/head_grid.h"

#include <catch2/catch.hpp>

#include "client/commands/head_text.h"
#include "nlohmann/json.hpp"

namespace tae::client {
using api::BuildHeadGrid;
using api::HeadCell;
using api::HeadGrid;
namespace {

tae::v1::Run RunWith(const nlohmann::json& config) {
  tae::v1::Run run;
  run.set_id(7);
  run.set_state(tae::v1::RUN_STATE_SUCCEEDED);
  run.set_config_json(config.dump());
  return run;
}

void AddMetric(tae::v1::Run* run, const std::string& key, double value) {
  tae::v1::Scalar* scalar = run->add_final_metrics();
  scalar->set_key(key);
  scalar->set_value(value);
}

TEST_CASE("the head grid keeps masked, pruned and removed apart", "[client][heads]") {
  tae::v1::Run run = RunWith({{"model.layers", 3},
                              {"model.heads", 2},
                              {"model.drop_attention_layers", {2}},
                              {"model.prune_heads", {{"1", {0}}}}});
  AddMetric(&run, "heads/L0H0", 0.5);
  AddMetric(&run, "heads/L0H1", 0.25);
  AddMetric(&run, "heads/L1H1", 1.5);
  AddMetric(&run, "heads_grad/L0H0", 0.8);
  AddMetric(&run, "heads_grad/L0H1", 0.6);
  AddMetric(&run, "heads_grad/L1H1", 1.0);
  AddMetric(&run, "eval/loss", 0.1);
  absl::StatusOr<HeadGrid> grid = BuildHeadGrid(run);
  REQUIRE(grid.ok());
  CHECK(grid->layers == 3);
  CHECK(grid->heads == 2);
  CHECK(grid->kind[0][0] == HeadCell::kScored);
  CHECK(*grid->masked[0][1] == 0.25);
  CHECK(*grid->gradient[0][0] == 0.8);
  CHECK(grid->kind[1][0] == HeadCell::kPruned);
  CHECK_FALSE(grid->masked[1][0].has_value());
  CHECK(*grid->masked[1][1] == 1.5);
  CHECK(grid->kind[2][0] == HeadCell::kLayerRemoved);
  CHECK(grid->kind[2][1] == HeadCell::kLayerRemoved);

  const std::string text = RenderHeadGrid(*grid);
  INFO(text);
  CHECK(text.find("LAYER  H0       H1") != std::string::npos);
  CHECK(text.find("L1     pruned   1.5000") != std::string::npos);
  CHECK(text.find("L2     removed  removed") != std::string::npos);
}

TEST_CASE("a run without head scores says how to get them", "[client][heads]") {
  tae::v1::Run run = RunWith({{"model.layers", 1}, {"model.heads", 2}});
  AddMetric(&run, "eval/loss", 0.1);
  absl::StatusOr<HeadGrid> grid = BuildHeadGrid(run);
  REQUIRE_FALSE(grid.ok());
  CHECK(std::string(grid.status().message()).find("train.head_importance = true") !=
        std::string::npos);
  CHECK_FALSE(BuildHeadGrid(RunWith({{"x", 1}})).ok());
}

}  // namespace
}  // namespace tae::client
