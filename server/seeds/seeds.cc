#include "server/seeds/seeds.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "common/stats/sequential.h"

namespace tae::seeds {
namespace {

constexpr char kDefaultMetric[] = "eval/loss";

// One variant's runs as adaptive seeds see them.
struct ArmRuns {
  stats::Arm arm;
  int64_t like_run = 0;  // the lowest-seed run
  int64_t lowest_seed = 0;
  int64_t highest_seed = 0;
  std::string held;  // why it may not grow; "" if it may
};

}  // namespace

std::string PrimaryMetric(const model::ExperimentReport& report) {
  return report.metrics.empty() ? kDefaultMetric : report.metrics.front();
}

Plan PlanSeeds(const model::ExperimentReport& report, const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values) {
  Plan plan;
  if (report.min_seeds <= 0) {
    return plan;
  }
  const std::string metric = PrimaryMetric(report);
  stats::SequentialDesign design;
  design.min_seeds = report.min_seeds;
  design.max_seeds = report.max_seeds;
  design.alpha = report.alpha;
  if (auto it = report.margin.find(metric); it != report.margin.end()) {
    design.margin = it->second;
  }
  if (std::optional<std::string> error = stats::DesignError(design)) {
    plan.held.push_back(*error);
    return plan;
  }
  std::map<int64_t, double> value_of;
  for (const model::FinalValue& value : values) {
    if (value.key == metric) {
      value_of[value.run_id] = value.value;
    }
  }
  std::vector<std::string> order;  // variants by first run
  std::map<std::string, ArmRuns> arms;
  for (const model::RunRecord& run : runs) {
    if (run.confirm) {
      continue;  // search.confirm's: not a seed of the point's comparisons
    }
    auto [it, fresh] = arms.try_emplace(run.variant);
    ArmRuns& a = it->second;
    if (fresh) {
      order.push_back(run.variant);
      a.arm.variant = run.variant;
      a.like_run = run.id;
      a.lowest_seed = a.highest_seed = run.seed;
    }
    if (run.seed < a.lowest_seed) {
      a.lowest_seed = run.seed;
      a.like_run = run.id;
    }
    a.highest_seed = std::max(a.highest_seed, run.seed);
    a.arm.runs += 1;
    if (!model::IsFinal(run.state)) {
      a.arm.pending += 1;
    } else if (run.state == model::RunState::kCancelled && a.held.empty()) {
      a.held = absl::StrCat("r", run.id, " was cancelled");
    } else if (run.state == model::RunState::kSucceeded) {
      if (auto v = value_of.find(run.id); v != value_of.end()) {
        a.arm.values.push_back(v->second);
      } else if (a.held.empty()) {
        a.held = absl::StrCat("r", run.id, " succeeded without reporting ", metric);
      }
    }
  }
  // Grid points by their baseline ("baseline[lr=0.01]"), in the order of their first variant.
  std::vector<stats::Point> points;
  std::map<std::string, size_t> point_of;
  for (const std::string& variant : order) {
    const std::string base = spec::BaselineFor(variant);
    if (base == variant) {
      continue;
    }
    auto b = arms.find(base);
    if (b == arms.end()) {
      plan.held.push_back(absl::StrCat(variant, ": no runs of its baseline ", base));
      continue;
    }
    const ArmRuns& v = arms.at(variant);
    if (!b->second.held.empty() || !v.held.empty()) {
      plan.held.push_back(
          absl::StrCat(variant, " vs ", base, ": ", v.held.empty() ? b->second.held : v.held));
      continue;
    }
    auto [it, fresh] = point_of.try_emplace(base, points.size());
    if (fresh) {
      points.push_back(stats::Point{base, b->second.arm, {}});
    }
    points[it->second].variants.push_back(v.arm);
  }
  const stats::Boundaries boundaries = stats::ComputeBoundaries(design);
  // Why each arm grows: the comparisons it is in that are still undecided.
  std::map<std::string, std::vector<std::string>> why;
  for (const stats::Point& point : points) {
    for (const stats::Arm& variant : point.variants) {
      const bool ready = variant.pending == 0 && point.baseline.pending == 0 &&
                         variant.runs >= design.min_seeds &&
                         point.baseline.runs >= design.min_seeds;
      if (!ready) {
        continue;  // SeedsNeeded only brings it to min seeds
      }
      const stats::Verdict verdict =
          stats::Decide(design, boundaries, variant.values, point.baseline.values);
      if (!verdict.final) {
        const std::string reason =
            absl::StrFormat("%s vs %s undecided at n=%d (p=%.2g)", variant.variant,
                            point.baseline.variant, verdict.n, verdict.p);
        why[variant.variant].push_back(reason);
        why[point.baseline.variant].push_back(reason);
      }
    }
  }
  for (const stats::SeedTarget& target : stats::SeedsNeeded(design, boundaries, points)) {
    const ArmRuns& a = arms.at(target.variant);
    NewSeeds add;
    add.variant = target.variant;
    add.like_run = a.like_run;
    for (int i = 0; i < target.runs - a.arm.runs; ++i) {
      add.seeds.push_back(a.highest_seed + 1 + i);
    }
    const std::vector<std::string>& reasons = why[target.variant];
    add.why = reasons.empty()
                  ? absl::StrCat("every variant starts with ", design.min_seeds, " seeds")
                  : absl::StrCat(metric, ": ", absl::StrJoin(reasons, "; "));
    plan.add.push_back(std::move(add));
  }
  return plan;
}

}  // namespace tae::seeds
