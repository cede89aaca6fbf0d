#pragma once

// A finished run's series of one metric as one blob (table metric_packs, migration 0019), so
// that a curve reads a 10,000-run study's 10 million points of a metric at a few ns each instead
// of ~150 ns per SQLite row. Exact: steps and values as stored, wall times bit for bit.
//
// Layout, version 1: a version byte (1); the point count (varint); the steps as zigzag varint
// deltas (the first from 0); the values as little-endian IEEE-754 doubles; the wall times' bit
// patterns as zigzag varint deltas (the first from 0: consecutive times share their high bits,
// so a delta of one second at 2026's clock takes 4 bytes). About 13 bytes a point.
//
// Pure: the store writes packs soon after a run ends and drops them when its points change
// (store.h); the query reads them (query.h).

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/records.h"

namespace tae::store {

std::string PackSeries(const std::vector<model::SeriesPoint>& points);

// Appends the blob's points to `out`. DataLoss, with `out` as it was, for a blob that is not a
// whole version-1 pack (truncated, trailing bytes, a count its bytes cannot hold).
absl::Status UnpackSeries(std::string_view blob, std::vector<model::SeriesPoint>* out);

// A series as columns, for a reader that wants some of them (a curve: steps and values) in
// buffers it reuses from run to run.
struct SeriesColumns {
  std::vector<int64_t> steps;
  std::vector<double> values;
  std::vector<double> walls;
};

// The blob's points into `out`, each column replaced: steps always, values and wall times where
// asked (else left empty). DataLoss as UnpackSeries, with `out` in no particular state; without
// `walls`, the wall times' bytes are not read, so their damage is found only by CheckPack.
absl::Status UnpackColumns(std::string_view blob, bool values, bool walls, SeriesColumns* out);

// What CheckPack finds in a whole pack: its point count and its least and greatest step (both 0
// when it has no point).
// Also what a writer of the columnar form (common/api/columns.h) needs to choose its codings
// without unpacking: bounds on the differences between consecutive steps and between
// consecutive wall times' bit patterns (as signed integers, |d| <= bound for d >= 0, -d - 1 <=
// bound for d < 0), and whether every value is a float32 exactly.
struct PackInfo {
  int64_t count = 0;
  int64_t min_step = 0;
  int64_t max_step = 0;
  uint64_t step_delta_bound = 0;  // exact: the greatest
  uint64_t wall_delta_bound = 0;  // from the varints' lengths: at least the greatest
  bool values_float = true;
};

// The blob's PackInfo where it is a whole version-1 pack (UnpackSeries would take it), read
// without writing a point anywhere; DataLoss as UnpackSeries.
absl::StatusOr<PackInfo> CheckPack(std::string_view blob);

}  // namespace tae::store
