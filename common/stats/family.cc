#include "common/stats/family.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The indices of the non-NaN p values, smallest p first (ties: input order).
std::vector<size_t> Order(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!std::isnan(p[i])) {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  return order;
}

}  // namespace

std::string_view CorrectionName(Correction correction) {
  switch (correction) {
    case Correction::kHolm:
      return "holm";
    case Correction::kBonferroni:
      return "bonferroni";
    case Correction::kNone:
      return "none";
  }
  return "holm";
}

std::optional<Correction> ParseCorrection(std::string_view name) {
  for (Correction c : {Correction::kHolm, Correction::kBonferroni, Correction::kNone}) {
    if (name == CorrectionName(c)) {
      return c;
    }
  }
  return std::nullopt;
}

double TableDof(double welch_dof, double n_a, double n_b) {
  const double low = std::min(n_a, n_b) - 1;
  return low + (welch_dof - low) / 4;
}

std::optional<WelchTest> OneSpreadTest(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) {
    return std::nullopt;
  }
  const Moments ma = MomentsOf(a);
  const Moments mb = MomentsOf(b);
  if (std::isnan(ma.stddev) || std::isnan(mb.stddev) || (ma.stddev == 0) == (mb.stddev == 0)) {
    return std::nullopt;  // both vary (Welch's case) or neither does (nothing to test against)
  }
  const Moments& varying = ma.stddev > 0 ? ma : mb;
  const double n_v = static_cast<double>(ma.stddev > 0 ? a.size() : b.size());
  WelchTest test;
  test.se = varying.stddev *
            std::sqrt(1 / static_cast<double>(a.size()) + 1 / static_cast<double>(b.size()));
  test.t = (ma.mean - mb.mean) / test.se;
  test.dof = n_v - 1;
  test.p_two_sided = 2 * StudentTCdf(-std::fabs(test.t), test.dof);
  return test;
}

double ConservativeDof(double n_a, double n_b) { return std::min(n_a, n_b) - 1; }

std::optional<WelchTest> TableTest(const std::vector<double>& a, const std::vector<double>& b) {
  std::optional<WelchTest> test = Welch(a, b);
  if (test) {
    test->dof = TableDof(test->dof, static_cast<double>(a.size()), static_cast<double>(b.size()));
    test->p_two_sided = 2 * StudentTCdf(-std::fabs(test->t), test->dof);
  }
  return test;
}

std::vector<double> AdjustedP(Correction correction, const std::vector<double>& p) {
  std::vector<double> out(p.size(), kNaN);
  const std::vector<size_t> order = Order(p);
  const double m = static_cast<double>(order.size());
  double running = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const double pk = p[order[k]];
    double adjusted = pk;
    if (correction == Correction::kBonferroni) {
      adjusted = m * pk;
    } else if (correction == Correction::kHolm) {
      running = std::max(running, (m - static_cast<double>(k)) * pk);
      adjusted = running;
    }
    out[order[k]] = std::min(1.0, adjusted);
  }
  return out;
}

std::vector<double> IntervalLevels(Correction correction, const std::vector<double>& p,
                                   double alpha) {
  std::vector<double> out(p.size(), kNaN);
  const std::vector<size_t> order = Order(p);
  const double m = static_cast<double>(order.size());
  if (correction != Correction::kHolm) {
    const double level = correction == Correction::kNone ? alpha : alpha / std::max(1.0, m);
    for (size_t i : order) {
      out[i] = level;
    }
    return out;
  }
  size_t rejected = 0;  // the step-down stops at the first p above its level
  while (rejected < order.size() &&
         p[order[rejected]] <= alpha / (m - static_cast<double>(rejected))) {
    out[order[rejected]] = alpha / (m - static_cast<double>(rejected));
    ++rejected;
  }
  for (size_t k = rejected; k < order.size(); ++k) {
    out[order[k]] = alpha / (m - static_cast<double>(rejected));
  }
  return out;
}

double SharedAlpha(Correction correction, double alpha, int comparisons) {
  if (correction == Correction::kNone || comparisons <= 1) {
    return alpha;
  }
  return alpha / comparisons;
}

Interval DeltaInterval(double delta, double se, double dof, double level) {
  const double q = StudentTQuantile(1 - level / 2, dof);
  return {delta - q * se, delta + q * se};
}

double DetectableEffect(double se, double dof, double level, double power) {
  if (!(se > 0)) {
    return kNaN;
  }
  return (StudentTQuantile(1 - level / 2, dof) + StudentTQuantile(power, dof)) * se;
}

}  // namespace tae::stats
