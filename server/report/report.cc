#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "absl/strings/str_format.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "common/stats/sequential.h"
#include "common/stats/stats.h"
#include "nlohmann/json.hpp"
#include "server/report/task_levels.h"
#include "server/seeds/seeds.h"

namespace tae::report {
namespace {

constexpr char kParams[] = "model/params";
constexpr char kFlops[] = "model/flops_per_token";
constexpr const char* kTokensPerS = tae::metrics::kTokensPerS;

struct Samples {
  std::vector<double> last;
  std::vector<double> best;
  int diverged = 0;
  int64_t diverged_step = 0;  // the earliest
};

// The mean alone (Summarize's, without its interval: a report takes hundreds of these).
double Mean(const std::vector<double>& xs) { return stats::MomentsOf(xs).mean; }

// (variant, metric) -> values of succeeded runs. The views point into the caller's values,
// variants and metrics, which outlive it; a node map, so a Samples& stays valid across inserts.
using SamplesMap = absl::node_hash_map<std::pair<std::string_view, std::string_view>, Samples>;

// The level `cell`'s mean sits at: a floor or chance it is at or beyond (on the wrong side), else
// the shortcut it is nearest within tolerance.
void MarkLevel(const std::vector<Level>& levels, bool higher_is_better, Cell* cell) {
  if (cell->n == 0 || std::isnan(cell->mean)) {
    return;
  }
  const double tolerance =
      std::isnan(cell->ci95) ? kLevelTolerance : std::max(cell->ci95, kLevelTolerance);
  const Level* found = nullptr;
  for (const Level& level : levels) {
    const double distance = std::fabs(cell->mean - level.value);
    const bool beyond = higher_is_better ? cell->mean <= level.value : cell->mean >= level.value;
    if (level.kind != "shortcut" && (distance <= tolerance || beyond)) {
      found = &level;
      break;
    }
    if (level.kind == "shortcut" && distance <= tolerance &&
        (found == nullptr || distance < std::fabs(cell->mean - found->value))) {
      found = &level;
    }
  }
  if (found != nullptr) {
    cell->level_kind = found->kind;
    cell->level = found->value;
    cell->level_what = found->what;
    cell->level_hides = found->hides;
  }
}

// The floors and levels of `metric` for a run of `config_json`: the user's floor first.
std::vector<Level> LevelsFor(const std::string& config_json, const std::string& metric,
                             const ReportOptions& options) {
  std::vector<Level> levels;
  if (auto it = options.floor.find(metric); it != options.floor.end()) {
    levels.push_back({"floor", it->second, "the floor of [report] floor", "an effect on it"});
  }
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  if (config.is_object()) {
    std::vector<Level> task = TaskLevels(config, metric);
    levels.insert(levels.end(), task.begin(), task.end());
  }
  return levels;
}

// Decides cells with the sequential design, or with one test at alpha over the seeds there are.
class Decider {
 public:
  explicit Decider(const ReportOptions& options) : options_(options) {}

  // With a list of seeds: one test at alpha over every value there is.
  void Decide(const std::vector<double>& mine, const std::vector<double>& base, Cell* cell) {
    stats::SequentialDesign design = DesignFor(cell);
    const int n = static_cast<int>(std::min(mine.size(), base.size()));
    design.alpha = options_.alpha;
    design.min_seeds = design.max_seeds = std::max(n, 2);
    design.futility = 0;
    stats::Verdict verdict;
    if (!stats::DesignError(design)) {
      verdict = stats::Decide(design, BoundariesOf(design), mine, base);
    }
    cell->decision = std::string(stats::DecisionName(verdict.decision));
    cell->decision_n = n;
    cell->decision_final = true;
  }

  // With adaptive seeds: the course of the comparison over its looks, the rule the planner
  // follows (stats::FollowLooks), so the table says what made the planner stop or go on.
  void Follow(const std::vector<stats::Outcome>& mine, const std::vector<stats::Outcome>& base,
              Cell* cell) {
    const stats::SequentialDesign design = DesignFor(cell);
    stats::Course course;
    if (!stats::DesignError(design)) {
      course = stats::FollowLooks(design, BoundariesOf(design), mine, base);
    }
    cell->decision = std::string(stats::DecisionName(course.verdict.decision));
    cell->decision_n = course.verdict.n;
    cell->decision_final = course.verdict.final;
    cell->decision_futile = course.verdict.futile;
    cell->decision_held = course.held;
  }

 private:
  stats::SequentialDesign DesignFor(Cell* cell) const {
    stats::SequentialDesign design = options_.design;
    if (auto it = options_.margin.find(cell->metric); it != options_.margin.end()) {
      design.margin = it->second;
    }
    cell->margin = design.margin;
    return design;
  }

  const stats::Boundaries& BoundariesOf(const stats::SequentialDesign& design) {
    const auto key = std::make_pair(design.min_seeds, design.max_seeds);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      it = cache_.emplace(key, stats::ComputeBoundaries(design)).first;
    }
    return it->second;
  }

  const ReportOptions& options_;
  // Boundaries do not depend on the margin; alpha is the same for the whole report.
  std::map<std::pair<int, int>, stats::Boundaries> cache_;
};

}  // namespace

bool HigherIsBetter(const std::string& metric, const std::map<std::string, std::string>& goal) {
  if (auto it = goal.find(metric); it != goal.end()) {
    return it->second == "max";
  }
  return metrics::LargerIsBetterByDefault(metric);
}

ReportOptions OptionsOf(const model::ExperimentReport& report) {
  ReportOptions options;
  options.floor = report.floor;
  options.margin = report.margin;
  options.alpha = report.alpha;
  options.confirm = report.search.confirm;
  if (report.min_seeds > 0) {
    options.adaptive = true;
    options.design.min_seeds = report.min_seeds;
    options.design.max_seeds = report.max_seeds;
    options.design.alpha = report.alpha;
  }
  return options;
}

std::vector<std::string> ExtraMetrics() { return {kParams, kFlops, kTokensPerS}; }

void CountRun(const model::RunRecord& run, Row* row) {
  row->runs_total += 1;
  if (run.state == model::RunState::kSucceeded) {
    row->runs += 1;
  } else if (run.state == model::RunState::kPruned) {
    row->runs_pruned += 1;
  } else if (run.state == model::RunState::kFailed) {
    row->runs_failed += 1;
  }
}

std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<model::RunRecord>& runs,
                             const std::vector<model::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline,
                             const std::map<std::string, std::string>& goal,
                             const ReportOptions& options) {
  std::map<std::string, Row> counts;
  std::map<std::string, const std::string*> config_of;  // variant -> its first run's config
  for (const model::RunRecord& run : runs) {
    if (run.confirm != options.confirmation_runs) {
      continue;
    }
    config_of.emplace(run.variant, &run.config_json);
    CountRun(run, &counts[run.variant]);
  }
  SamplesMap samples;
  for (const model::FinalValue& v : values) {
    if (v.state == model::RunState::kSucceeded && v.confirm == options.confirmation_runs) {
      Samples& s = samples[{v.variant, v.key}];
      if (v.diverged_step.has_value()) {
        s.diverged_step =
            s.diverged == 0 ? *v.diverged_step : std::min(s.diverged_step, *v.diverged_step);
        s.diverged += 1;
        continue;
      }
      s.last.push_back(v.value);
      s.best.push_back(HigherIsBetter(v.key, goal) ? v.max_value : v.min_value);
    }
  }
  std::vector<Row> out;
  for (const std::string& variant : variants) {
    Row row = counts[variant];
    row.variant = variant;
    row.baseline = spec::BaselineFor(variant, baseline);
    for (const std::string& metric : metrics) {
      const Samples& s = samples[{variant, metric}];
      Cell cell;
      cell.metric = metric;
      cell.n = static_cast<int>(s.last.size());
      cell.diverged = s.diverged;
      cell.diverged_step = s.diverged_step;
      if (cell.n > 0 && cell.diverged == 0) {
        stats::Summary summary = stats::Summarize(s.last);
        cell.mean = summary.mean;
        cell.std = summary.stddev;
        cell.ci95 = summary.ci95;
        cell.best = Mean(s.best);
        if (auto config = config_of.find(variant); config != config_of.end()) {
          MarkLevel(LevelsFor(*config->second, metric, options), HigherIsBetter(metric, goal),
                    &cell);
        }
      }
      row.cells.push_back(std::move(cell));
    }
    row.params = Mean(samples[{variant, kParams}].last);
    row.flops_per_token = Mean(samples[{variant, kFlops}].last);
    row.tokens_per_s = Mean(samples[{variant, kTokensPerS}].last);
    out.push_back(std::move(row));
  }
  Decider decider(options);
  // Adaptive seeds: per metric, each variant's seeds in seed order (server/seeds).
  std::map<std::string, std::map<std::string, std::vector<stats::Outcome>>> outcomes;
  if (options.adaptive) {
    for (const std::string& metric : metrics) {
      outcomes[metric] = seeds::SeedOutcomes(runs, values, metric);
    }
  }
  for (Row& row : out) {
    if (row.variant == row.baseline) {
      continue;  // its own baseline: nothing to compare
    }
    for (Cell& cell : row.cells) {
      const Samples& base_samples = samples[{row.baseline, cell.metric}];
      const std::vector<double>& base = base_samples.last;
      const std::vector<double>& mine = samples[{row.variant, cell.metric}].last;
      if (base.empty() || mine.empty() || cell.diverged > 0 || base_samples.diverged > 0) {
        continue;  // a diverged side has no mean to compare
      }
      const double base_mean = Mean(base);
      cell.has_delta = true;
      cell.delta = cell.mean - base_mean;
      cell.rel_delta = base_mean != 0.0 ? cell.delta / std::fabs(base_mean) : kNaN;
      if (std::optional<stats::WelchTest> test = stats::Welch(mine, base)) {
        cell.has_test = true;
        cell.p_value = test->p_two_sided;
        cell.mark = stats::SignificanceMark(test->p_two_sided);
      }
      if (options.adaptive) {
        std::map<std::string, std::vector<stats::Outcome>>& arms = outcomes[cell.metric];
        decider.Follow(arms[row.variant], arms[row.baseline], &cell);
      } else {
        decider.Decide(mine, base, &cell);
      }
    }
  }
  // A baseline compared with itself shows a zero delta.
  for (Row& row : out) {
    if (row.variant == row.baseline) {
      for (Cell& cell : row.cells) {
        if (cell.n > 0 && cell.diverged == 0) {
          cell.has_delta = true;
          cell.delta = 0.0;
          cell.rel_delta = 0.0;
        }
      }
    }
  }
  return out;
}

std::vector<std::string> Banners(const std::vector<Row>& rows) {
  std::vector<std::string> banners;
  for (const Row& row : rows) {
    if (row.variant != row.baseline) {
      continue;
    }
    for (const Cell& cell : row.cells) {
      if (cell.level_kind.empty()) {
        continue;
      }
      banners.push_back(absl::StrFormat("%s: %s is at %s (%.3g): this table cannot show %s",
                                        cell.metric, row.variant, cell.level_what, cell.level,
                                        cell.level_hides));
    }
  }
  return banners;
}

void SortByEffect(std::vector<Row>* rows) {
  auto effect = [](const Row& row) {
    if (row.cells.empty() || !row.cells[0].has_delta || std::isnan(row.cells[0].rel_delta)) {
      return -1.0;
    }
    return std::fabs(row.cells[0].rel_delta);
  };
  std::stable_sort(rows->begin(), rows->end(), [&](const Row& a, const Row& b) {
    const bool a_base = a.variant == a.baseline;
    const bool b_base = b.variant == b.baseline;
    if (a_base != b_base) {
      return a_base;
    }
    if (a_base) {
      return false;
    }
    return effect(a) > effect(b);
  });
}

}  // namespace tae::report
