#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "common/metrics/names.h"
#include "common/spec/spec.h"
#include "common/stats/stats.h"

namespace tae::report {
namespace {

constexpr char kParams[] = "model/params";
constexpr char kFlops[] = "model/flops_per_token";
constexpr const char* kTokensPerS = tae::metrics::kTokensPerS;

struct Samples {
  std::vector<double> last;
  std::vector<double> best;
};

double Mean(const std::vector<double>& xs) { return xs.empty() ? kNaN : stats::Summarize(xs).mean; }

}  // namespace

bool HigherIsBetter(const std::string& metric, const std::map<std::string, std::string>& goal) {
  if (auto it = goal.find(metric); it != goal.end()) {
    return it->second == "max";
  }
  return metric.find("acc") != std::string::npos || metric == kTokensPerS;
}

std::vector<std::string> ExtraMetrics() { return {kParams, kFlops, kTokensPerS}; }

std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<store::RunRecord>& runs,
                             const std::vector<store::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline,
                             const std::map<std::string, std::string>& goal) {
  std::map<std::string, Row> counts;
  for (const store::RunRecord& run : runs) {
    Row& row = counts[run.variant];
    row.runs_total += 1;
    if (run.state == store::RunState::kSucceeded) {
      row.runs += 1;
    }
  }
  // (variant, metric) -> values of succeeded runs
  std::map<std::pair<std::string, std::string>, Samples> samples;
  for (const store::FinalValue& v : values) {
    if (v.state == store::RunState::kSucceeded) {
      Samples& s = samples[{v.variant, v.key}];
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
      if (cell.n > 0) {
        stats::Summary summary = stats::Summarize(s.last);
        cell.mean = summary.mean;
        cell.std = summary.stddev;
        cell.ci95 = summary.ci95;
        cell.best = Mean(s.best);
      }
      row.cells.push_back(std::move(cell));
    }
    row.params = Mean(samples[{variant, kParams}].last);
    row.flops_per_token = Mean(samples[{variant, kFlops}].last);
    row.tokens_per_s = Mean(samples[{variant, kTokensPerS}].last);
    out.push_back(std::move(row));
  }
  for (Row& row : out) {
    if (row.variant == row.baseline) {
      continue;  // its own baseline: nothing to compare
    }
    for (Cell& cell : row.cells) {
      const std::vector<double>& base = samples[{row.baseline, cell.metric}].last;
      const std::vector<double>& mine = samples[{row.variant, cell.metric}].last;
      if (base.empty() || mine.empty()) {
        continue;
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
    }
  }
  // A baseline compared with itself shows a zero delta.
  for (Row& row : out) {
    if (row.variant == row.baseline) {
      for (Cell& cell : row.cells) {
        if (cell.n > 0) {
          cell.has_delta = true;
          cell.delta = 0.0;
          cell.rel_delta = 0.0;
        }
      }
    }
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
