#include "server/report/scale.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/spec.h"

namespace tae::report {
namespace {

// A ladder row's parts: "rms[rung=2,lr=0.1]" -> {"rms", 2, "lr=0.1"}.
struct LadderName {
  std::string ablation;
  int rung = -1;
  std::string point;
};

LadderName Parse(const std::string& variant) {
  LadderName name;
  name.rung = spec::RungOf(variant);
  const std::string rest = spec::WithoutRung(variant);
  const size_t bracket = rest.find('[');
  name.ablation = rest.substr(0, bracket);
  if (bracket != std::string::npos && rest.back() == ']') {
    name.point = rest.substr(bracket + 1, rest.size() - bracket - 2);
  }
  return name;
}

const Cell* CellOf(const Row& row, const std::string& metric) {
  for (const Cell& cell : row.cells) {
    if (cell.metric == metric) {
      return &cell;
    }
  }
  return nullptr;
}

std::string Percent(double level) { return absl::StrFormat("%.4g%%", 100 * (1 - level)); }

// What the baseline runs report as their size, per (grid point, rung) and metric: sum and count.
using RungSizes = std::map<std::tuple<std::string, int, std::string>, std::pair<double, int>>;

RungSizes SizesOf(const std::vector<model::FinalValue>& values) {
  RungSizes sizes;
  for (const model::FinalValue& v : values) {
    if ((v.key != "model/params" && v.key != kParamsMetric) ||
        v.state != model::RunState::kSucceeded || v.confirm || !(v.value > 0) ||
        !std::isfinite(v.value)) {
      continue;
    }
    const LadderName name = Parse(v.variant);
    if (name.rung >= 0 && name.ablation == spec::kBaselineName) {
      auto& [sum, n] = sizes[{name.point, name.rung, v.key}];
      sum += v.value;
      ++n;
    }
  }
  return sizes;
}

// A rung's N and where it comes from: scale.params, else the engine's model/params, else a
// command job's params; NaN and "" when none.
std::pair<double, std::string> SizeAt(const model::ScaleSettings& settings, const RungSizes& sizes,
                                      const std::string& point, int r) {
  if (r < static_cast<int>(settings.params.size())) {
    return {settings.params[r], "scale.params"};
  }
  for (const char* key : {"model/params", kParamsMetric}) {
    auto it = sizes.find({point, r, key});
    if (it != sizes.end()) {
      return {it->second.first / it->second.second, key};
    }
  }
  return {kNaN, ""};
}

// The values of `metric` of the succeeded runs of `names` (baseline first) at `point` and rungs
// below `rungs`, as ladder points.
void AddPoints(const std::vector<model::FinalValue>& values, const std::string& metric,
               const std::string& point, const std::vector<std::string>& names, int rungs,
               stats::LadderData* data) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < names.size(); ++i) {
    index[names[i]] = static_cast<int>(i);
  }
  for (const model::FinalValue& v : values) {
    if (v.key != metric || v.state != model::RunState::kSucceeded || v.confirm) {
      continue;
    }
    const LadderName name = Parse(v.variant);
    auto it = index.find(name.ablation);
    if (name.rung < 0 || name.rung >= rungs || name.point != point || it == index.end()) {
      continue;
    }
    data->points.push_back({it->second, name.rung, v.seed, v.value});
  }
}

}  // namespace

std::vector<ScaleFit> BuildScale(const model::ScaleSettings& settings, const std::vector<Row>& rows,
                                 const std::vector<model::RunRecord>& runs,
                                 const std::vector<model::FinalValue>& values,
                                 const std::string& metric, const FamilySummary& family, double at,
                                 const stats::LadderOptions& options) {
  const int rungs = static_cast<int>(settings.rungs.size());
  // Grid points in the order the rows first show them; per point its variants, baseline first.
  std::vector<std::string> points;
  std::map<std::string, std::vector<std::string>> ablations;  // point -> ablation names
  std::map<std::tuple<std::string, std::string, int>, const Row*> row_of;
  for (const Row& row : rows) {
    const LadderName name = Parse(row.variant);
    if (name.rung < 0 || name.rung >= rungs) {
      continue;
    }
    if (ablations.find(name.point) == ablations.end()) {
      points.push_back(name.point);
      ablations[name.point] = {std::string(spec::kBaselineName)};
    }
    std::vector<std::string>& names = ablations[name.point];
    if (std::find(names.begin(), names.end(), name.ablation) == names.end()) {
      names.push_back(name.ablation);
    }
    row_of[{name.point, name.ablation, name.rung}] = &row;
  }
  const RungSizes sizes = SizesOf(values);
  // What scale.stop_if saved: per (point, rung) the slot-hours of the runs that ran there.
  std::map<std::pair<std::string, int>, std::pair<double, int>> ran;
  for (const model::RunRecord& run : runs) {
    const LadderName name = Parse(run.variant);
    if (name.rung >= 0 && run.started_at && run.finished_at &&
        run.state == model::RunState::kSucceeded) {
      auto& [hours, n] = ran[{name.point, name.rung}];
      hours += std::max(0.0, *run.finished_at - *run.started_at) / 3600 * run.slots * run.hosts;
      ++n;
    }
  }
  std::map<std::string, std::tuple<int, std::string, double>> skipped;  // variant -> n, why, hours
  for (const model::RunRecord& run : runs) {
    if (run.state != model::RunState::kPruned || !absl::StartsWith(run.reason, kScaleSkipped)) {
      continue;
    }
    const LadderName name = Parse(run.variant);
    auto& [n, why, hours] = skipped[spec::WithoutRung(run.variant)];
    ++n;
    why = run.reason;
    if (auto it = ran.find({name.point, name.rung}); it != ran.end()) {
      hours += it->second.first / it->second.second;
    }
  }
  std::vector<ScaleFit> fits;
  for (const std::string& point : points) {
    ScaleFit& fit = fits.emplace_back();
    fit.metric = metric;
    fit.point = point;
    fit.at = at;
    const std::vector<std::string>& names = ablations[point];
    stats::LadderData data;
    data.variants = static_cast<int>(names.size());
    for (int r = 0; r < rungs; ++r) {
      ScaleRung& rung = fit.rungs.emplace_back();
      rung.rung = r;
      rung.overrides = settings.rungs[r];
      std::tie(rung.size, rung.size_source) = SizeAt(settings, sizes, point, r);
      data.sizes.push_back(rung.size);
    }
    for (const std::string& ablation : names) {
      ScaleVariant& variant = fit.variants.emplace_back();
      variant.variant = point.empty() ? ablation : absl::StrCat(ablation, "[", point, "]");
      if (auto it = skipped.find(variant.variant); it != skipped.end()) {
        std::tie(variant.skipped, variant.skipped_why, variant.skipped_hours) = it->second;
      }
      for (int r = 0; r < rungs; ++r) {
        auto it = row_of.find({point, ablation, r});
        const Cell* cell = it == row_of.end() ? nullptr : CellOf(*it->second, metric);
        if (cell == nullptr) {
          continue;
        }
        ScaleRungEffect& effect = variant.rungs.emplace_back();
        effect.rung = r;
        effect.n = cell->n;
        effect.mean = cell->mean;
        effect.ci95 = cell->ci95;
        effect.delta = cell->delta;
        effect.delta_lo = cell->delta_lo;
        effect.delta_hi = cell->delta_hi;
        effect.decision = cell->decision;
        effect.mark = cell->mark;
        effect.note = cell->note;
      }
    }
    for (int r = 0; r < rungs; ++r) {
      if (!(fit.rungs[r].size > 0)) {
        fit.why = absl::StrCat("rung ", r, "'s size N is unknown: its baseline runs report no ",
                               "model/params (nor a '", kParamsMetric,
                               "' metric); give scale.params in the [scale] table");
        break;
      }
      if (r > 0 && !(fit.rungs[r].size > fit.rungs[r - 1].size)) {
        fit.why = absl::StrFormat(
            "rung %d (N = %.6g) is not larger than rung %d (N = %.6g): list the ladder small to "
            "large",
            r, fit.rungs[r].size, r - 1, fit.rungs[r - 1].size);
        break;
      }
    }
    if (!fit.why.empty()) {
      continue;
    }
    AddPoints(values, metric, point, names, rungs, &data);
    const stats::LadderResult result = stats::AnalyzeLadder(data, options);
    if (!result.ok) {
      fit.why = result.why;
      continue;
    }
    fit.ok = true;
    fit.exponent = result.exponent;
    fit.irreducible = result.irreducible;
    // alpha, E and A of one model (the trend model when fitted: LadderResult::exponent), and the
    // figure's curves from that model too.
    const stats::LadderFit& shared = result.trend_fit.ok ? result.trend_fit : result.fit;
    fit.coefficient = shared.A;
    fit.curve_log_size_ref = shared.log_size_ref;
    fit.intervals = result.intervals;
    fit.draws = result.draws;
    fit.failed_draws = result.failed_draws;
    fit.trend_level = result.trend_level;
    fit.warnings = result.warnings;
    for (size_t v = 0; v < fit.variants.size(); ++v) {
      ScaleVariant& out = fit.variants[v];
      out.multiplier = result.variants[v].multiplier;
      out.slope = result.variants[v].slope;
      out.trend = result.variants[v].trend;
      out.curve_log_multiplier = v < shared.log_multiplier.size() ? shared.log_multiplier[v] : 0;
      out.curve_slope = v < shared.slope.size() ? shared.slope[v] : 0;
      out.crossing = result.variants[v].crossing > 0 ? result.variants[v].crossing : kNaN;
      if (at > 0 && v > 0) {
        const stats::LadderExtrapolation e =
            stats::ExtrapolateLadder(data, result, static_cast<int>(v), at);
        out.at_ok = e.ok;
        out.at_effect = e.effect;
        out.at_trend = e.trend;
        out.at_refused = e.why;
        if (e.ok) {
          fit.at_baseline = e.baseline;
        }
      }
    }
    const int ablation_count = static_cast<int>(fit.variants.size()) - 1;
    fit.controls =
        fit.intervals
            ? absl::StrFormat(
                  "exponent and multipliers: %s intervals, each its own, from a bootstrap over "
                  "seeds (%d draws); trends: one family of %d ablation%s, Bonferroni at %g (each "
                  "slope's interval at %s); per-rung effects: the table's family (%s)",
                  Percent(options.alpha), fit.draws, ablation_count, ablation_count == 1 ? "" : "s",
                  options.alpha, Percent(fit.trend_level),
                  family.family.empty() ? family.method : family.family)
            : absl::StrFormat(
                  "estimates only (no intervals); per-rung effects: the table's "
                  "family (%s)",
                  family.family.empty() ? family.method : family.family);
  }
  return fits;
}

ScaleStopPlan PlanScaleStop(const model::ScaleSettings& settings,
                            const std::vector<model::RunRecord>& runs,
                            const std::vector<model::FinalValue>& values, const std::string& metric,
                            const stats::LadderOptions& options) {
  ScaleStopPlan plan;
  const int k = settings.stop_rungs;
  if (k < 2 || k >= static_cast<int>(settings.rungs.size())) {
    return plan;
  }
  std::vector<std::string> points;
  std::map<std::string, std::vector<std::string>> ablations;  // point -> names, baseline first
  for (const model::RunRecord& run : runs) {
    const LadderName name = Parse(run.variant);
    if (name.rung < 0) {
      continue;
    }
    if (name.rung < k && !model::IsFinal(run.state)) {
      return plan;  // not due: a run of the first rungs has not ended
    }
    if (ablations.find(name.point) == ablations.end()) {
      points.push_back(name.point);
      ablations[name.point] = {std::string(spec::kBaselineName)};
    }
    std::vector<std::string>& names = ablations[name.point];
    if (std::find(names.begin(), names.end(), name.ablation) == names.end()) {
      names.push_back(name.ablation);
    }
  }
  plan.due = true;
  const RungSizes sizes = SizesOf(values);
  for (const std::string& point : points) {
    const std::vector<std::string>& names = ablations[point];
    const auto full = [&](const std::string& ablation) {
      return point.empty() ? ablation : absl::StrCat(ablation, "[", point, "]");
    };
    stats::LadderData data;
    data.variants = static_cast<int>(names.size());
    std::string unknown;
    for (int r = 0; r < k; ++r) {
      const double size = SizeAt(settings, sizes, point, r).first;
      data.sizes.push_back(size);
      if (!(size > 0) || (r > 0 && !(size > data.sizes[r - 1]))) {
        unknown = absl::StrCat("rung ", r, "'s size N is unknown or not above the rung below");
      }
    }
    AddPoints(values, metric, point, names, k, &data);
    const stats::LadderResult result =
        unknown.empty() ? stats::AnalyzeLadder(data, options) : stats::LadderResult{};
    for (size_t v = 1; v < names.size(); ++v) {
      const stats::Estimate& m = result.ok ? result.variants[v].multiplier : stats::Estimate{};
      const double band = settings.stop_band;
      if (result.ok && result.intervals && m.lo >= 1 - band && m.hi <= 1 + band) {
        plan.skip[full(names[v])] =
            absl::StrFormat("%s%s m = %.3g [%.3g, %.3g] lies within 1 ± %g after rungs 0-%d",
                            kScaleSkipped, metric, m.value, m.lo, m.hi, band, k - 1);
      } else {
        plan.go_on.push_back(full(names[v]));
      }
    }
  }
  return plan;
}

}  // namespace tae::report
