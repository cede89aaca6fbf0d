#include "client/commands/head_text.h"

#include "absl/strings/str_cat.h"
#include "client/output/table.h"

namespace tae::client {
namespace {

std::string RenderOne(const api::HeadGrid& grid,
                      const std::vector<std::vector<std::optional<double>>>& values) {
  std::vector<std::string> header = {"LAYER"};
  for (int64_t h = 0; h < grid.heads; ++h) {
    header.push_back(absl::StrCat("H", h));
  }
  Table table(header);
  for (int64_t l = 0; l < grid.layers; ++l) {
    std::vector<std::string> row = {absl::StrCat("L", l)};
    for (int64_t h = 0; h < grid.heads; ++h) {
      switch (grid.kind[l][h]) {
        case api::HeadCell::kScored:
          row.push_back(values[l][h] ? FormatNumber(*values[l][h]) : "-");
          break;
        case api::HeadCell::kPruned:
          row.push_back("pruned");
          break;
        case api::HeadCell::kLayerRemoved:
          row.push_back("removed");
          break;
        case api::HeadCell::kMissing:
          row.push_back("-");
          break;
      }
    }
    table.Add(row);
  }
  return table.Render();
}

}  // namespace

std::string RenderHeadGrid(const api::HeadGrid& grid) {
  return absl::StrCat(
      "masked at evaluation: eval/loss increase when the head alone is masked (nats)\n",
      RenderOne(grid, grid.masked),
      "\ngradient score: |dL/d mask| per head (Michel et al. 2019), normalised per layer\n",
      RenderOne(grid, grid.gradient),
      "\npruned = removed from the start by model.prune_heads; removed = attention sublayer "
      "dropped by model.drop_attention_layers\n");
}

}  // namespace tae::client
