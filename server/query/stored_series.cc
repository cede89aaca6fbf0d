#include "server/query/stored_series.h"

#include <algorithm>

#include "common/status/macros.h"

namespace tae::query {

absl::Status StoredSeries::Columns(bool values, bool walls, store::SeriesColumns* out) const {
  if (!pack.empty()) {
    return store::UnpackColumns(pack, values, walls, out);
  }
  const size_t n = points.size();
  out->steps.resize(n);
  out->values.resize(values ? n : 0);
  out->walls.resize(walls ? n : 0);
  for (size_t i = 0; i < n; ++i) {
    out->steps[i] = points[i].step;
  }
  for (size_t i = 0; values && i < n; ++i) {
    out->values[i] = points[i].value;
  }
  for (size_t i = 0; walls && i < n; ++i) {
    out->walls[i] = points[i].wall_time;
  }
  return absl::OkStatus();
}

std::pair<int64_t, int64_t> StoredSeries::StepSpan() const {
  if (!pack.empty()) {
    return {packed.min_step, packed.max_step};
  }
  if (points.empty()) {
    return {0, 0};
  }
  auto [least, greatest] = std::minmax_element(
      points.begin(), points.end(),
      [](const model::SeriesPoint& a, const model::SeriesPoint& b) { return a.step < b.step; });
  return {least->step, greatest->step};
}

absl::StatusOr<std::vector<model::SeriesPoint>> StoredSeries::Points() const {
  if (pack.empty()) {
    return points;
  }
  std::vector<model::SeriesPoint> out;
  RETURN_IF_ERROR(store::UnpackSeries(pack, &out));
  return out;
}

}  // namespace tae::query
