#pragma once

// `taectl heads RUN` as text.

#include <string>

#include "common/api/head_grid.h"

namespace tae::client {

// The two grids as text: rows "L0".., columns "H0"..; pruned heads show "pruned", removed
// attention sublayers "removed".
std::string RenderHeadGrid(const api::HeadGrid& grid);

}  // namespace tae::client
