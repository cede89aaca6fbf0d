#pragma once

// StoredSeries: one run's series of a metric as Query::ExperimentSeries reads it and the
// dashboard's series cache keeps it, a pack as stored or points. Pure: no SQLite here.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/records.h"
#include "server/store/series_pack.h"

namespace tae::query {

// One run's stored series of a metric as the curves read it (Query::ExperimentSeries): an ended
// run's pack as stored (store/series_pack.h: about 13 bytes a point, half the size of its
// points, and checked whole when read), else its points in step order.
struct StoredSeries {
  // Empty where `points` holds the series; else the pack's bytes, in `pack_bytes`: one column
  // file read whole is shared by all its runs' series (no copy of each pack).
  std::string_view pack;
  std::shared_ptr<const std::string> pack_bytes;
  store::PackInfo packed;  // the pack's, where there is one
  std::vector<model::SeriesPoint> points;

  int64_t size() const { return pack.empty() ? static_cast<int64_t>(points.size()) : packed.count; }
  // Its least and greatest step; (0, 0) when it has no point.
  std::pair<int64_t, int64_t> StepSpan() const;
  // Its points as columns (store::UnpackColumns): steps, values and wall times where asked.
  absl::Status Columns(bool values, bool walls, store::SeriesColumns* out) const;
  // Every point, a pack unpacked.
  absl::StatusOr<std::vector<model::SeriesPoint>> Points() const;
};

}  // namespace tae::query
