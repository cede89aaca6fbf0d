#pragma once

// The columnar form of metric points: what GET /api/experiments/ID/history answers and what
// `taectl export --bundle` writes per metric (history/<metric>.tcol), read by the `tae` Python
// library (python/tae/_columns.py) with numpy.frombuffer, without a copy or a parse per point.
//
// Layout (all integers little-endian):
//   bytes 0..7    the magic "TAECOL1\n"
//   bytes 8..11   H, the header's length in bytes (uint32)
//   H bytes       the header: UTF-8 JSON, an object with at least
//                   "points":  N, the points in every column
//                   "columns": [{"name": "step", "dtype": "<i8"}, {"name": "value", "dtype":
//                              "<f8"}, {"name": "wall_time", "dtype": "<f8"}]
//                 and what the writer adds ("runs": [{"run", "count", ...}], the points of each
//                 run being `count` consecutive rows, runs in the listed order; "next_after").
//   0..7 bytes    zero padding, so that the first column starts at a multiple of 8
//   N * 8 bytes   each column in the listed order, one after the other
// Non-finite values (a diverged run's NaN or inf) are stored as they are. A reader refuses a
// body whose length is not 12 + H + padding + 8 N per column (a truncated download).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::api {

inline constexpr std::string_view kColumnsMagic = "TAECOL1\n";

// The three columns of metric points, equally long.
struct PointColumns {
  std::vector<int64_t> steps;
  std::vector<double> values;
  std::vector<double> walls;
};

// The body: `header` (an object; "points" and "columns" are set here) and the columns.
// Empty on a machine that is not little-endian (no reader could read it).
std::string EncodeColumns(nlohmann::ordered_json header, const PointColumns& columns);

// A body of `points` rows with its header written and its columns zeroed, for a writer that
// fills them in place (one buffer of the body's size, no column copied twice): the steps at
// body[steps_at], values at values_at, wall times at walls_at, `points` 8-byte values each.
// An empty body where EncodeColumns's would be.
struct ColumnsBody {
  std::string body;
  size_t steps_at = 0;
  size_t values_at = 0;
  size_t walls_at = 0;
};
ColumnsBody StartColumns(nlohmann::ordered_json header, size_t points);

// The inverse, for tests and tools: the header, and the columns into `out`.
absl::StatusOr<nlohmann::json> DecodeColumns(std::string_view body, PointColumns* out);

}  // namespace tae::api
