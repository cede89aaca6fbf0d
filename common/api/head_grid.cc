#include "common/api/head_grid.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/states.h"

namespace tae::api {
namespace {

std::optional<double> FinalMetric(const tae::v1::Run& run, const std::string& key) {
  for (const tae::v1::Scalar& scalar : run.final_metrics()) {
    if (scalar.key() == key) {
      return scalar.value();
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<HeadGrid> BuildHeadGrid(const tae::v1::Run& run) {
  nlohmann::json config = nlohmann::json::parse(run.config_json(), nullptr, false);
  if (!config.is_object() || !config.contains("model.layers") || !config.contains("model.heads")) {
    return absl::InvalidArgumentError(
        absl::StrCat("r", run.id(), " is not a tae-train run (no model.layers / model.heads)"));
  }
  HeadGrid grid;
  grid.layers = config["model.layers"].get<int64_t>();
  grid.heads = config["model.heads"].get<int64_t>();
  const nlohmann::json removed =
      config.value("model.drop_attention_layers", nlohmann::json::array());
  const nlohmann::json pruned = config.value("model.prune_heads", nlohmann::json::object());
  bool any = false;
  for (int64_t l = 0; l < grid.layers; ++l) {
    const bool layer_removed = std::find(removed.begin(), removed.end(), l) != removed.end();
    const std::string layer_key = absl::StrCat(l);
    nlohmann::json layer_pruned = pruned.value(layer_key, nlohmann::json::array());
    grid.kind.emplace_back();
    grid.masked.emplace_back();
    grid.gradient.emplace_back();
    for (int64_t h = 0; h < grid.heads; ++h) {
      std::optional<double> masked = FinalMetric(run, absl::StrCat("heads/L", l, "H", h));
      std::optional<double> gradient = FinalMetric(run, absl::StrCat("heads_grad/L", l, "H", h));
      HeadCell kind = HeadCell::kScored;
      if (layer_removed) {
        kind = HeadCell::kLayerRemoved;
      } else if (std::find(layer_pruned.begin(), layer_pruned.end(), h) != layer_pruned.end()) {
        kind = HeadCell::kPruned;
      } else if (!masked && !gradient) {
        kind = HeadCell::kMissing;
      }
      any = any || masked || gradient;
      grid.kind.back().push_back(kind);
      grid.masked.back().push_back(kind == HeadCell::kScored ? masked : std::nullopt);
      grid.gradient.back().push_back(kind == HeadCell::kScored ? gradient : std::nullopt);
    }
  }
  if (!any) {
    return absl::FailedPreconditionError(
        absl::StrCat("r", run.id(), " has no head scores (", tae::v1::StateName(run.state()),
                     "); they are computed at the end of runs with train.head_importance = true"));
  }
  return grid;
}

}  // namespace tae::api
