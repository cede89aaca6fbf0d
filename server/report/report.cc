#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "common/stats/family.h"
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

// The boundaries of each adaptive design, computed once per process: ComputeBoundaries integrates
// numerically (milliseconds), and reports, refreshes and bench/stats ask for the same few designs
// again and again. At most kMaxDesigns are kept (then it starts over): a daemon that runs for
// months meets few designs, but never holds an unbounded number.
class BoundaryCache {
 public:
  stats::Boundaries Of(const stats::SequentialDesign& design) {
    static constexpr size_t kMaxDesigns = 256;
    ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
    static auto* cache = new std::map<std::tuple<int, int, double, double>, stats::Boundaries>();
    const auto key =
        std::make_tuple(design.min_seeds, design.max_seeds, design.alpha, design.futility);
    absl::MutexLock lock(&mu);
    auto it = cache->find(key);
    if (it == cache->end()) {
      if (cache->size() >= kMaxDesigns) {
        cache->clear();
      }
      it = cache->emplace(key, stats::ComputeBoundaries(design)).first;
    }
    return it->second;
  }
};

// One compared cell: the seeds it is decided on and its test.
struct Comparison {
  Cell* cell = nullptr;
  std::vector<double> mine;
  std::vector<double> base;
  std::optional<stats::WelchTest> test;
};

// A fixed-seed arm's values as the comparison uses them: the seeds in seed order before the first
// that ended without a value in either arm (a failed seed holds the comparison there, as adaptive
// seeds do, so that a variant is never judged on the seeds that happened to survive); seeds not
// finished are skipped.
void CutAtMissing(const std::vector<stats::Outcome>& mine, const std::vector<stats::Outcome>& base,
                  Comparison* c) {
  auto first_missing = [](const std::vector<stats::Outcome>& arm) {
    for (size_t i = 0; i < arm.size(); ++i) {
      if (arm[i].state == stats::Outcome::State::kMissing) {
        return i;
      }
    }
    return arm.size();
  };
  const size_t stop_mine = first_missing(mine);
  const size_t stop_base = first_missing(base);
  const size_t cut = std::min(stop_mine, stop_base);
  for (const auto* arm : {&mine, &base}) {
    std::vector<double>& out = arm == &mine ? c->mine : c->base;
    for (size_t i = 0; i < std::min(cut, arm->size()); ++i) {
      if ((*arm)[i].state == stats::Outcome::State::kValue) {
        out.push_back((*arm)[i].value);
      }
    }
  }
  if (stop_mine == cut && cut < mine.size()) {
    c->cell->decision_held = mine[cut].missing;
  } else if (stop_base == cut && cut < base.size()) {
    c->cell->decision_held = base[cut].missing;
  }
}

// The paired form of CutAtMissing: the same cut, then only the seeds where both arms have a
// value, as pairs (index i of both arms is the same seed when both ran the same seeds).
void PairBySeed(const std::vector<stats::Outcome>& mine, const std::vector<stats::Outcome>& base,
                Comparison* c) {
  const size_t cut = std::min(mine.size(), base.size());
  size_t stop = cut;
  for (size_t i = 0; i < cut; ++i) {
    if (mine[i].state == stats::Outcome::State::kMissing ||
        base[i].state == stats::Outcome::State::kMissing) {
      stop = i;
      break;
    }
  }
  c->mine.clear();
  c->base.clear();
  for (size_t i = 0; i < stop; ++i) {
    if (mine[i].state == stats::Outcome::State::kValue &&
        base[i].state == stats::Outcome::State::kValue) {
      c->mine.push_back(mine[i].value);
      c->base.push_back(base[i].value);
    }
  }
}

// "no seed variance (baseline)", or "" when both arms varied.
std::string NoVariance(const std::vector<double>& mine, const std::vector<double>& base) {
  const bool a = stats::MomentsOf(mine).stddev == 0;
  const bool b = stats::MomentsOf(base).stddev == 0;
  if (a && b) {
    return "no seed variance (both arms)";
  }
  if (a || b) {
    return a ? "no seed variance (variant)" : "no seed variance (baseline)";
  }
  return "";
}

// Relative deltas only against a baseline clearly away from zero: its CI excludes 0 and the
// effect is at most 10 times it (0.0019 -> 2.77 is not "+149478%").
bool RelativeShown(double delta, const std::vector<double>& base) {
  const stats::Summary summary = stats::Summarize(base);
  const double ci = std::isnan(summary.ci95) ? 0 : summary.ci95;
  return summary.mean != 0 && std::fabs(summary.mean) > ci &&
         std::fabs(delta) <= 10 * std::fabs(summary.mean);
}

// Fixed seeds: each metric's tested comparisons as one family (options.correction), the decision
// and the interval of each by the family's levels (common/stats/family.h).
void DecideFamily(const ReportOptions& options, std::vector<Comparison>* family) {
  std::vector<double> p;
  for (const Comparison& c : *family) {
    p.push_back(c.test ? c.test->p_two_sided : kNaN);
  }
  const std::vector<double> adjusted = stats::AdjustedP(options.correction, p);
  const std::vector<double> levels = stats::IntervalLevels(options.correction, p, options.alpha);
  int tested = 0;
  for (double v : p) {
    tested += std::isnan(v) ? 0 : 1;
  }
  // Equivalence claims are a family too: each TOST at alpha / K (alpha without a correction).
  const double equivalence_alpha =
      stats::SharedAlpha(options.correction, options.alpha, std::max(1, tested));
  for (size_t i = 0; i < family->size(); ++i) {
    Comparison& c = (*family)[i];
    Cell& cell = *c.cell;
    cell.decision_n = static_cast<int>(std::min(c.mine.size(), c.base.size()));
    cell.decision_final = true;
    cell.decision = "undecided";
    if (!c.test) {
      continue;
    }
    const stats::WelchTest& test = *c.test;
    cell.has_test = true;
    cell.p_value = test.p_two_sided;
    if (options.selected) {
      // Chosen on these seeds: an optimistic estimate, no verdict.
      const stats::Interval ci = stats::DeltaInterval(cell.delta, test.se, test.dof, options.alpha);
      cell.delta_lo = ci.lo;
      cell.delta_hi = ci.hi;
      cell.delta_level = options.alpha;
      cell.decision = "";
      cell.decision_final = false;
      cell.note = "optimistic: chosen on these seeds";
      continue;
    }
    cell.p_adjusted = adjusted[i];
    cell.mark = stats::SignificanceMark(adjusted[i]);
    cell.delta_level = levels[i];
    const stats::Interval ci = stats::DeltaInterval(cell.delta, test.se, test.dof, levels[i]);
    cell.delta_lo = ci.lo;
    cell.delta_hi = ci.hi;
    if (adjusted[i] <= options.alpha) {
      cell.decision = "different";
      continue;
    }
    if (cell.margin > 0) {
      const stats::Interval e =
          stats::DeltaInterval(cell.delta, test.se, test.dof, 2 * equivalence_alpha);
      if (e.lo > -cell.margin && e.hi < cell.margin) {
        cell.decision = "equivalent";
        continue;
      }
    }
    cell.detectable = stats::DetectableEffect(test.se, test.dof, levels[i]);
  }
}

// Adaptive seeds: the comparison's course over its looks, the rule the planner follows
// (stats::FollowLooks) with the family's share of alpha (seeds::DesignOf), so the table says what
// made the planner stop or go on. Its interval is the repeated confidence interval at the look it
// stopped at (valid after optional stopping; Jennison & Turnbull ch. 9); no p value or stars: a
// naive p over seeds chosen by looking is not one.
void FollowAdaptive(const ReportOptions& options, int comparisons,
                    const std::vector<stats::Outcome>& mine,
                    const std::vector<stats::Outcome>& base, BoundaryCache* cache, Cell* cell) {
  stats::SequentialDesign design = options.design;
  design.margin = cell->margin;
  design.alpha = stats::SharedAlpha(options.correction, options.design.alpha, comparisons);
  stats::Course course;
  if (!stats::DesignError(design)) {
    const stats::Boundaries boundaries = cache->Of(design);
    course = stats::FollowLooks(design, boundaries, mine, base);
  }
  const stats::Verdict& v = course.verdict;
  cell->decision = std::string(stats::DecisionName(v.decision));
  cell->decision_n = v.n;
  cell->decision_final = v.final;
  cell->decision_futile = v.futile;
  cell->decision_held = course.held;
  cell->delta = v.delta;
  if (v.no_variance) {
    cell->note = v.se > 0 ? "no seed variance in one arm: tested at the other arm's spread"
                          : "no seed variance";
  }
  if (v.se > 0 && v.level > 0) {
    cell->delta_level = v.level;
    const stats::Interval ci = stats::DeltaInterval(v.delta, v.se, v.dof, v.level);
    cell->delta_lo = ci.lo;
    cell->delta_hi = ci.hi;
    if (v.decision == stats::Decision::kUndecided) {
      cell->detectable = stats::DetectableEffect(v.se, v.dof, v.level);
    }
  }
}

// The variants whose every succeeded seed (two or more) gave the same final, least and greatest
// value of every one of `metrics`: the seeds did not vary what the program computed.
std::map<std::string, int> IdenticalSeeds(const std::vector<model::FinalValue>& values,
                                          const std::vector<std::string>& metrics,
                                          bool confirmation_runs) {
  struct Seen {
    std::map<std::string, std::tuple<double, double, double>> first;  // metric -> values
    std::map<int64_t, bool> runs;                                     // run -> seen
    bool same = true;
  };
  std::map<std::string, Seen> by_variant;
  for (const model::FinalValue& v : values) {
    if (v.state != model::RunState::kSucceeded || v.confirm != confirmation_runs ||
        std::find(metrics.begin(), metrics.end(), v.key) == metrics.end()) {
      continue;
    }
    Seen& seen = by_variant[v.variant];
    seen.runs[v.run_id] = true;
    const auto tuple = std::make_tuple(v.value, v.min_value, v.max_value);
    auto [it, inserted] = seen.first.emplace(v.key, tuple);
    if (!inserted && (it->second != tuple || v.diverged_step.has_value())) {
      seen.same = false;
    }
  }
  std::map<std::string, int> out;
  for (const auto& [variant, seen] : by_variant) {
    if (seen.same && seen.runs.size() >= 2) {
      out[variant] = static_cast<int>(seen.runs.size());
    }
  }
  return out;
}

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
  options.correction = stats::ParseCorrection(report.correction).value_or(stats::Correction::kHolm);
  options.paired = report.pairing == "seed";
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
  const std::map<std::string, int> identical =
      IdenticalSeeds(values, metrics, options.confirmation_runs);
  std::vector<Row> out;
  for (const std::string& variant : variants) {
    Row row = counts[variant];
    row.seeds_identical = identical.count(variant) > 0;
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
  // Per metric, each variant's seeds in seed order (server/seeds), of the runs this table counts.
  std::vector<model::RunRecord> counted;
  for (const model::RunRecord& run : runs) {
    if (run.confirm == options.confirmation_runs) {
      counted.push_back(run);
    }
  }
  const int comparisons = seeds::Comparisons(counted);
  std::map<std::string, std::set<int64_t>> seeds_of;  // the seeds each variant ran
  for (const model::RunRecord& run : counted) {
    seeds_of[run.variant].insert(run.seed);
  }
  BoundaryCache boundaries;
  for (const std::string& metric : metrics) {
    std::map<std::string, std::vector<stats::Outcome>> arms =
        seeds::SeedOutcomes(counted, values, metric);
    std::vector<Comparison> family;
    for (Row& row : out) {
      if (row.variant == row.baseline) {
        continue;  // its own baseline: nothing to compare
      }
      Cell* cell = nullptr;
      for (Cell& c : row.cells) {
        cell = c.metric == metric ? &c : cell;
      }
      const Samples& base_samples = samples[{row.baseline, metric}];
      if (cell == nullptr || base_samples.last.empty() || cell->n == 0 || cell->diverged > 0 ||
          base_samples.diverged > 0) {
        continue;  // a diverged side has no mean to compare
      }
      if (auto it = options.margin.find(metric); it != options.margin.end()) {
        cell->margin = it->second;
      }
      cell->has_delta = true;
      if (options.adaptive) {
        FollowAdaptive(options, comparisons, arms[row.variant], arms[row.baseline], &boundaries,
                       cell);
        cell->rel_delta = cell->delta / std::fabs(Mean(base_samples.last));
        cell->rel_shown = RelativeShown(cell->delta, base_samples.last);
        continue;
      }
      Comparison c;
      c.cell = cell;
      CutAtMissing(arms[row.variant], arms[row.baseline], &c);
      // Pairs by seed where the table is asked to and both arms ran the same seeds (a property of
      // the design: search.confirm's fresh seeds differ between variants, and are not paired).
      const bool paired = options.paired && seeds_of[row.variant] == seeds_of[row.baseline];
      const double base_mean = Mean(c.base);
      cell->delta = Mean(c.mine) - base_mean;
      cell->rel_delta = base_mean != 0.0 ? cell->delta / std::fabs(base_mean) : kNaN;
      cell->rel_shown = RelativeShown(cell->delta, c.base);
      if (c.mine.size() < 2 || c.base.size() < 2) {
        cell->note = "fewer than 2 seeds per arm";
      } else if (paired) {
        PairBySeed(arms[row.variant], arms[row.baseline], &c);
        cell->delta = Mean(c.mine) - Mean(c.base);
        c.test = stats::PairedT(c.mine, c.base);
        cell->note = c.test ? "paired by seed"
                     : c.mine.size() < 2
                         ? "paired by seed: fewer than 2 seeds with both arms"
                         : "paired by seed: the differences did not vary, nothing to test";
      } else if (std::string none = NoVariance(c.mine, c.base); !none.empty()) {
        // One arm constant: tested with the other's spread for both; both: nothing to test.
        c.test = stats::OneSpreadTest(c.mine, c.base);
        cell->note =
            c.test ? absl::StrCat(none, ": tested at the other arm's spread") : std::move(none);
      } else {
        c.test = stats::TableTest(c.mine, c.base);
      }
      if (options.paired && !paired) {
        cell->note = cell->note.empty() ? "not paired: the arms ran different seeds"
                                        : absl::StrCat(cell->note,
                                                       "; not paired: the arms ran "
                                                       "different seeds");
      }
      family.push_back(std::move(c));
    }
    DecideFamily(options, &family);
  }
  // A baseline compared with itself shows a zero delta.
  for (Row& row : out) {
    if (row.variant == row.baseline) {
      for (Cell& cell : row.cells) {
        if (cell.n > 0 && cell.diverged == 0) {
          cell.has_delta = true;
          cell.delta = 0.0;
          cell.rel_delta = 0.0;
          cell.rel_shown = true;
        }
      }
    }
  }
  return out;
}

std::vector<std::string> Banners(const std::vector<Row>& rows) {
  std::vector<std::string> banners;
  std::vector<std::string> identical;
  int with_seeds = 0;  // rows with two or more succeeded runs
  for (const Row& row : rows) {
    with_seeds += row.runs >= 2 ? 1 : 0;
    if (row.seeds_identical) {
      identical.push_back(row.variant);
    }
  }
  if (!identical.empty() && static_cast<int>(identical.size()) == with_seeds) {
    banners.push_back(
        "the seeds gave identical results (every seed of every variant: the same final, least and "
        "greatest value of each metric): the program does not use its seed, so nothing is "
        "decided from them (a command job gets it as {train.seed} or $TAE_SEED)");
  } else if (!identical.empty()) {
    banners.push_back(absl::StrCat("the seeds of ", absl::StrJoin(identical, ", "),
                                   " gave identical results: no seed variance, nothing decided "
                                   "from them"));
  }
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

FamilySummary SummarizeFamily(const ReportOptions& options, const std::vector<Row>& rows,
                              const std::vector<std::string>& metrics) {
  FamilySummary out;
  out.method = std::string(stats::CorrectionName(options.correction));
  out.alpha = options.adaptive ? options.design.alpha : options.alpha;
  out.controlled = options.correction != stats::Correction::kNone && !options.selected;
  int most = 0;
  for (size_t m = 0; m < metrics.size(); ++m) {
    int k = 0;
    for (const Row& row : rows) {
      if (row.variant != row.baseline && m < row.cells.size()) {
        const Cell& cell = row.cells[m];
        k += (options.adaptive ? cell.has_delta : cell.has_test) ? 1 : 0;
      }
    }
    out.comparisons.emplace_back(metrics[m], k);
    most = std::max(most, k);
  }
  const std::string what =
      options.adaptive ? "comparisons with the baseline (adaptive seeds: alpha split among them)"
                       : "tested comparisons with the baseline";
  if (options.selected) {
    out.family =
        "no verdicts: each variant's point was chosen on the same seeds (estimates optimistic)";
  } else if (!out.controlled) {
    out.family = absl::StrFormat(
        "not controlled: each comparison at %g on its own (report.correction = \"none\"); with "
        "%d of them some null variant is called different more often than %g",
        out.alpha, most, out.alpha);
  } else {
    out.family = absl::StrFormat(
        "the family-wise error rate of each metric's %s at %g (%s%s)",
        most == 1 ? std::string("1 comparison") : absl::StrCat("up to ", most, " ", what),
        out.alpha, out.method == "holm" ? "Holm" : "Bonferroni",
        options.adaptive ? ", alpha / K each" : "");
  }
  return out;
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
