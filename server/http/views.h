#pragma once

// What the dashboard's endpoints compute beyond the Control API's shapes: which config keys tell
// the variants apart, and the curves request, its x axis and its three renderings (JSON for the
// chart, CSV, and SVG through common/plot, the writer `taectl plot` uses). Pure.

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/curves/curves.h"
#include "server/http/server.h"
#include "server/query/query.h"

namespace tae::http {

// JSON text that never throws: invalid UTF-8 (a job's output) is replaced.
std::string Dump(const nlohmann::ordered_json& value);

// {"lines": [{cursor, attempt, stream, text, time}], "next": cursor, "finished": bool}
nlohmann::ordered_json LogPageJson(const query::LogPage& page);

// variant -> {key: value} for the config keys whose values differ between variants (the seed and
// keys that only differ between seeds of one variant are left out), from each variant's first
// run. `job.command` is left out where it is a function of the other varying keys (a command
// template expanded with the grid's values, "python3 train.py {train.lr}"): it names no knob of
// its own, and a column or pivot of it repeats them; a command that an ablation changes is kept.
nlohmann::ordered_json VaryingKeys(const std::vector<query::RunView>& runs);

struct CurveRequest {
  std::string metric;      // "" before defaults are applied
  std::string x = "step";  // step | tokens | wall | rel
  int width = 1000;        // the chart's pixel width; 2x as many buckets
  double smooth = 0;       // [0, 1)
  bool delta = false;      // each variant minus its baseline
  std::string baseline = "baseline";
  std::vector<std::string> variants;  // empty: all
  bool log_y = false;                 // SVG only
  // Only points with x in [x_min, x_max] are drawn (a zoom at full resolution); smoothing still
  // runs over the whole series.
  double x_min = -std::numeric_limits<double>::infinity();
  double x_max = std::numeric_limits<double>::infinity();

  // A canonical form, for caching.
  std::string Key(int64_t experiment) const;
};

// The query parameters metric, x, width, smooth, delta, baseline, variants, logy; a bad one is
// InvalidArgument naming the parameter.
absl::StatusOr<CurveRequest> ParseCurveRequest(const Request& request);

// How the x of a run's points follows from them for x kind `x` (CurveRequest::x): step; tokens
// = step x train.batch_size x train.seq_len x resources.hosts (from `run`'s config); wall = Unix
// seconds; rel = seconds since the run's first point. InvalidArgument when the config lacks what
// tokens needs.
struct XAxis {
  enum class Kind { kStep, kTokens, kWall, kRel };
  Kind kind = Kind::kStep;
  double per_step = 1;  // tokens per step, for kTokens
  bool NeedsWalls() const { return kind == Kind::kWall || kind == Kind::kRel; }
  // The least and greatest x of points whose steps run from `min_step` to `max_step`, and
  // whether every x is whole, where the steps alone tell (steps; tokens at a whole, finite number
  // per step); nullopt where it takes every point (wall times).
  struct Span {
    double lo = 0;
    double hi = 0;
    bool whole = false;
  };
  std::optional<Span> SpanOfSteps(int64_t min_step, int64_t max_step) const;
};
absl::StatusOr<XAxis> XAxisOf(const std::string& x, const model::RunRecord& run);

// The x of each point of `columns` on `axis` into `out` (replaced): from its steps, or from its
// wall times where the axis needs them (they must then have been read).
void XValues(const XAxis& axis, const store::SeriesColumns& columns, std::vector<double>* out);

// {"experiment", "metric", "goal", "x_kind", "smooth", "delta", "baseline", "buckets", "x",
//  "variants": [{"variant", "runs", "n_max", "mean", "lo", "hi", "min", "max", "n"}]}
std::string CurvesJson(int64_t experiment, const CurveRequest& request, const std::string& goal,
                       const curves::Curves& curves);
// One row per variant and x: x,variant,n,mean,lo,hi,min,max.
std::string CurvesCsv(const CurveRequest& request, const curves::Curves& curves);
std::string CurvesSvg(const std::string& title, const CurveRequest& request,
                      const curves::Curves& curves);

}  // namespace tae::http
