#include "server/seeds/seeds.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "common/stats/family.h"

namespace tae::seeds {
namespace {

constexpr char kDefaultMetric[] = "eval/loss";

// One variant's runs as adaptive seeds see them.
struct ArmRuns {
  int64_t like_run = 0;  // the lowest-seed run
  int64_t lowest_seed = 0;
  int64_t highest_seed = 0;
  std::string held;  // why it may not grow ("r3 was cancelled"); "" if it may
};

// Why a finished run of `metric` has no value, or nullopt when it has one (or is not finished).
std::optional<std::string> WhyMissing(const model::RunRecord& run, bool has_value,
                                      const std::string& metric) {
  switch (run.state) {
    case model::RunState::kSucceeded:
      if (has_value) {
        return std::nullopt;
      }
      return absl::StrCat("r", run.id, " succeeded without reporting ", metric);
    case model::RunState::kFailed:
      return absl::StrCat("r", run.id, " failed");
    case model::RunState::kCancelled:
      return absl::StrCat("r", run.id, " was cancelled");
    case model::RunState::kPruned:
      return absl::StrCat("r", run.id, " was pruned");
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string PrimaryMetric(const model::ExperimentReport& report) {
  return report.metrics.empty() ? kDefaultMetric : report.metrics.front();
}

int Comparisons(const std::vector<model::RunRecord>& runs) {
  std::set<std::string> variants;
  for (const model::RunRecord& run : runs) {
    if (!run.confirm && spec::BaselineFor(run.variant) != run.variant) {
      variants.insert(run.variant);
    }
  }
  return static_cast<int>(variants.size());
}

stats::SequentialDesign DesignOf(const model::ExperimentReport& report, const std::string& metric,
                                 int comparisons) {
  stats::SequentialDesign design;
  design.min_seeds = report.min_seeds;
  design.max_seeds = report.max_seeds;
  const std::optional<stats::Correction> correction = stats::ParseCorrection(report.correction);
  design.alpha =
      stats::SharedAlpha(correction.value_or(stats::Correction::kHolm), report.alpha, comparisons);
  if (auto it = report.margin.find(metric); it != report.margin.end()) {
    design.margin = it->second;
  }
  return design;
}

std::map<std::string, std::vector<stats::Outcome>> SeedOutcomes(
    const std::vector<model::RunRecord>& runs, const std::vector<model::FinalValue>& values,
    const std::string& metric) {
  std::map<int64_t, double> value_of;
  std::map<int64_t, int64_t> diverged_at;  // a diverged seed is held like a failed one
  for (const model::FinalValue& value : values) {
    if (value.key == metric) {
      value_of[value.run_id] = value.value;
      if (value.diverged_step.has_value()) {
        diverged_at[value.run_id] = *value.diverged_step;
      }
    }
  }
  std::vector<const model::RunRecord*> ordered;
  ordered.reserve(runs.size());
  for (const model::RunRecord& run : runs) {
    ordered.push_back(&run);
  }
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const model::RunRecord* a, const model::RunRecord* b) { return a->seed < b->seed; });
  std::map<std::string, std::vector<stats::Outcome>> arms;
  for (const model::RunRecord* run : ordered) {
    std::vector<stats::Outcome>& arm = arms[run->variant];
    auto value = value_of.find(run->id);
    if (!model::IsFinal(run->state)) {
      arm.push_back(stats::Outcome::Pending());
    } else if (auto diverged = diverged_at.find(run->id); diverged != diverged_at.end()) {
      arm.push_back(stats::Outcome::Missing(
          absl::StrCat("r", run->id, " diverged at step ", diverged->second)));
    } else if (std::optional<std::string> why = WhyMissing(*run, value != value_of.end(), metric)) {
      arm.push_back(stats::Outcome::Missing(std::move(*why)));
    } else {
      arm.push_back(stats::Outcome::Value(value->second));
    }
  }
  return arms;
}

Plan PlanSeeds(const model::ExperimentReport& report, const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values) {
  if (report.min_seeds <= 0) {
    return {};
  }
  const stats::SequentialDesign design = DesignOf(report, PrimaryMetric(report), Comparisons(runs));
  const stats::Boundaries boundaries =
      stats::DesignError(design) ? stats::Boundaries{} : stats::ComputeBoundaries(design);
  return PlanSeeds(report, boundaries, runs, values);
}

Plan PlanSeeds(const model::ExperimentReport& report, const stats::Boundaries& boundaries,
               const std::vector<model::RunRecord>& runs,
               const std::vector<model::FinalValue>& values) {
  Plan plan;
  if (report.min_seeds <= 0) {
    return plan;
  }
  const std::string metric = PrimaryMetric(report);
  const stats::SequentialDesign design = DesignOf(report, metric, Comparisons(runs));
  if (std::optional<std::string> error = stats::DesignError(design)) {
    plan.held.push_back(*error);
    return plan;
  }
  // search.confirm's runs are not seeds of the points' comparisons.
  std::vector<model::RunRecord> search_runs;
  for (const model::RunRecord& run : runs) {
    if (!run.confirm) {
      search_runs.push_back(run);
    }
  }
  std::map<std::string, std::vector<stats::Outcome>> outcomes =
      SeedOutcomes(search_runs, values, metric);
  std::set<int64_t> reported;  // runs with a value of the metric
  for (const model::FinalValue& value : values) {
    if (value.key == metric) {
      reported.insert(value.run_id);
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
      a.like_run = run.id;
      a.lowest_seed = a.highest_seed = run.seed;
    }
    if (run.seed < a.lowest_seed) {
      a.lowest_seed = run.seed;
      a.like_run = run.id;
    }
    a.highest_seed = std::max(a.highest_seed, run.seed);
    if (!a.held.empty()) {
      continue;
    }
    if (run.state == model::RunState::kCancelled) {
      a.held = absl::StrCat("r", run.id, " was cancelled");
    } else if (run.state == model::RunState::kSucceeded) {
      if (reported.count(run.id) == 0) {
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
      points.push_back(stats::Point{base, stats::Arm{base, outcomes[base]}, {}});
    }
    points[it->second].variants.push_back(stats::Arm{variant, outcomes[variant]});
  }
  std::vector<std::vector<stats::Course>> courses;
  const std::vector<stats::SeedTarget> targets =
      stats::SeedsNeeded(design, boundaries, points, &courses);
  // Why each arm grows: the comparisons it is in that want more seeds than it has.
  std::map<std::string, std::vector<std::string>> why;
  for (size_t p = 0; p < points.size(); ++p) {
    const stats::Point& point = points[p];
    for (size_t i = 0; i < point.variants.size(); ++i) {
      const stats::Arm& variant = point.variants[i];
      const stats::Course& course = courses[p][i];
      if (!course.held.empty()) {
        plan.held.push_back(
            absl::StrCat(variant.variant, " vs ", point.baseline.variant, ": ", course.held));
      }
      if (course.wants == 0 || course.verdict.n < design.min_seeds) {
        continue;  // SeedsNeeded only brings it to min seeds
      }
      const std::string reason =
          absl::StrFormat("%s vs %s undecided at n=%d (p=%.2g)", variant.variant,
                          point.baseline.variant, course.verdict.n, course.verdict.p);
      for (const stats::Arm* arm : {&variant, &point.baseline}) {
        if (static_cast<int>(arm->seeds.size()) < course.wants) {
          why[arm->variant].push_back(reason);
        }
      }
    }
  }
  for (const stats::SeedTarget& target : targets) {
    const ArmRuns& a = arms.at(target.variant);
    const int runs_now = static_cast<int>(outcomes[target.variant].size());
    NewSeeds add;
    add.variant = target.variant;
    add.like_run = a.like_run;
    for (int i = 0; i < target.runs - runs_now; ++i) {
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
