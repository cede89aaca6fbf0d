#pragma once

// The columnar form of metric points: what GET /api/experiments/ID/history answers and what
// `taectl export --bundle` writes per metric (history/<metric>.tcol), read by the `tae` Python
// library (python/tae/_columns.py) with numpy, without a parse per point.
//
// Layout, version 2 (all integers little-endian):
//   bytes 0..7    the magic "TAECOL2\n"
//   bytes 8..11   H, the header's length in bytes (uint32)
//   H bytes       the header: UTF-8 JSON, an object with at least
//                   "points":  N, the points of every column
//                   "runs":    [{"run", "count", ...}, ...]: R runs, the points of each being
//                              `count` consecutive rows, runs in the listed order (the counts
//                              add up to N)
//                   "columns": [{"name": "step", "dtype": "<i8", "coding": C, ...},
//                               {"name": "value", "dtype": "<f8", ...},
//                               {"name": "wall_time", "dtype": "<f8", ...}]
//                 and what the writer adds ("experiment", "metric", "next_after").
//   0..7 bytes    zero padding, so that the first section starts at a multiple of 8
//   sections      one per column in the listed order, each of "bytes" bytes (a multiple of 8:
//                 zero padding at its end), holding the column's N values of `dtype` coded as:
//     "plain"  N values of dtype, 8 bytes each
//     "f4"     (dtype "<f8") N IEEE-754 float32s, each exactly its double (written only where
//              every value of the column converts there and back bit for bit)
//     "delta"  R int64s, each run's first value, then N signed integers of "width" bytes (1, 2
//              or 4): a run's i-th value is its (i-1)-th plus the i-th integer, in wrapping
//              64-bit arithmetic; a "<f8" column codes its bit patterns. A run's first integer
//              is its first value minus the previous run's last where that fits the width, else
//              0: a reader may take the page's running sum and correct each run by its first
//              value, or decode each run alone from its first value.
// Exact: every step, value and wall time comes back bit for bit, NaN and inf as they were. A
// reader refuses a body whose length is not what its header says (a truncated download).
// Version 1 ("TAECOL1\n": no "runs" needed, three plain columns) is still read.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::api {

inline constexpr std::string_view kColumnsMagic = "TAECOL2\n";
inline constexpr std::string_view kColumnsMagicV1 = "TAECOL1\n";

// The three columns of metric points, equally long.
struct PointColumns {
  std::vector<int64_t> steps;
  std::vector<double> values;
  std::vector<double> walls;
};

// Writes a body run by run in two passes over the same runs in the same order: Plan each run's
// points (so the narrowest exact coding of each column is known), then Start and Write each run
// again, then Finish. The body is one buffer of its final size; nothing is kept per point
// between the passes.
class ColumnsEncoder {
 public:
  void Plan(const int64_t* steps, const double* values, const double* walls, size_t n);
  // Plan for a run known by bounds alone: no delta between consecutive steps (or wall times'
  // bit patterns, as signed integers) farther from 0 than its bound (d or -d - 1 for d < 0),
  // and whether every value is a float32 exactly (a packed series knows these: series_pack.h).
  void PlanBounds(size_t n, uint64_t step_bound, uint64_t wall_bound, bool values_float);
  // `header` is the body's header less "points" and "columns" (set here); its "runs" must list
  // the planned runs in order with their counts (else Finish refuses).
  void Start(nlohmann::ordered_json header);

  // The planned runs from `first_run` on, written in order, each with its planned count. Parts
  // of disjoint runs may be written at once, each on its own thread (the body is sized by
  // Start; each part writes only its runs' bytes). A part's first run is not chained to the run
  // before it (its first delta is 0).
  class Part {
   public:
    // False for a run that is not the next planned one with this count, or whose differences
    // do not fit what was planned (Finish then refuses: that run stays unwritten, or the part
    // had no run left).
    bool Write(const int64_t* steps, const double* values, const double* walls, size_t n);

   private:
    friend class ColumnsEncoder;
    ColumnsEncoder* encoder_ = nullptr;
    size_t run_ = 0;
    uint64_t step_last_ = 0;
    uint64_t wall_last_ = 0;
    bool chained_ = false;  // a run of this part came before
    bool refused_ = false;
  };
  Part PartAt(size_t first_run);
  // One part of every run, on the calling thread.
  void Write(const int64_t* steps, const double* values, const double* walls, size_t n);

  // The body; empty on a machine that is not little-endian (no reader could read it), or where
  // the runs written were not Plan's.
  std::string Finish();

 private:
  // A 64-bit integer column's (the steps, the wall times' bits) plan and position.
  struct Int {
    uint64_t max_magnitude = 0;  // of the deltas within runs
    int width = 8;               // 8: plain
    size_t firsts_at = 0;
    size_t deltas_at = 0;
    void Note(const uint64_t* bits, size_t n);
    void Choose(size_t points, size_t runs);
    size_t Bytes(size_t points, size_t runs) const;
  };
  // One run's column of 8-byte values (int64s or doubles' bits) at `src`; false where a
  // difference does not fit the planned width.
  bool Put(const Int& column, const void* src, size_t n, size_t run, size_t point, uint64_t* last,
           bool chained);

  size_t planned_points_ = 0;
  size_t planned_runs_ = 0;
  std::vector<size_t> planned_counts_;
  std::vector<size_t> offsets_;   // each planned run's first point
  std::vector<uint8_t> written_;  // each planned run's: once written
  bool values_f4_ = true;
  Int steps_;
  Int walls_;
  size_t values_at_ = 0;
  std::string body_;
  Part sequential_;
  std::vector<uint64_t> bits_;  // one run's wall time bits, reused by Plan
};

// One body of `columns`, its runs' counts in header["runs"] (a header without "runs" is one
// run); Start's header rules otherwise.
std::string EncodeColumns(nlohmann::ordered_json header, const PointColumns& columns);

// The inverse, of version 1 or 2, for tests and tools: the header, and the columns into `out`.
absl::StatusOr<nlohmann::json> DecodeColumns(std::string_view body, PointColumns* out);

}  // namespace tae::api
