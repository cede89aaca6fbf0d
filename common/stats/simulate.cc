#include "common/stats/simulate.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/stats/family.h"
#include "common/stats/stats.h"

namespace tae::stats {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

double NormalSource::Next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u = Uniform();
  const double v = Uniform();
  const double radius = std::sqrt(-2 * std::log(u));
  spare_ = radius * std::sin(2 * kPi * v);
  has_spare_ = true;
  return radius * std::cos(2 * kPi * v);
}

double NormalSource::Uniform() {
  return (static_cast<double>(engine_() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

namespace {

// The fixed design's decision on all max values, by the table's test (TableTest: Welch's t with
// the calibrated dof the sequential looks use too, so the two designs differ only in looking).
Decision FixedDecision(const SequentialDesign& design, const std::vector<double>& variant,
                       const std::vector<double>& baseline) {
  const std::optional<WelchTest> test = TableTest(variant, baseline);
  if (!test) {
    return Decision::kUndecided;
  }
  if (test->p_two_sided < design.alpha) {
    return Decision::kDifferent;
  }
  if (design.margin > 0) {
    const Summary a = Summarize(variant);
    const Summary b = Summarize(baseline);
    const double delta = a.mean - b.mean;
    const double se = std::sqrt(a.stddev * a.stddev / a.n + b.stddev * b.stddev / b.n);
    const double quantile = StudentTQuantile(1 - design.alpha, test->dof);
    if (delta - quantile * se > -design.margin && delta + quantile * se < design.margin) {
      return Decision::kEquivalent;
    }
  }
  return Decision::kUndecided;
}

}  // namespace

Simulation Simulate(const SequentialDesign& design, double effect, int studies, uint64_t seed) {
  const Boundaries boundaries = ComputeBoundaries(design);
  NormalSource normal(seed);
  Simulation result;
  result.studies = studies;
  result.effect = effect;
  result.fixed_runs = 2 * design.max_seeds;
  double runs = 0;
  std::vector<double> variant(design.max_seeds);
  std::vector<double> baseline(design.max_seeds);
  for (int study = 0; study < studies; ++study) {
    for (int i = 0; i < design.max_seeds; ++i) {
      variant[i] = effect + normal.Next();
      baseline[i] = normal.Next();
    }
    Verdict verdict;
    bool naive = false;
    for (int n = design.min_seeds; n <= design.max_seeds; ++n) {
      const std::vector<double> a(variant.begin(), variant.begin() + n);
      const std::vector<double> b(baseline.begin(), baseline.begin() + n);
      const std::optional<WelchTest> test = Welch(a, b);
      naive = naive || (test && test->p_two_sided < design.alpha);
      if (!verdict.final) {
        verdict = Decide(design, boundaries, a, b);
        runs += verdict.final ? 2 * n : 0;
      }
    }
    const Decision fixed = FixedDecision(design, variant, baseline);
    result.different += verdict.decision == Decision::kDifferent;
    result.equivalent += verdict.decision == Decision::kEquivalent;
    result.futile += verdict.futile;
    result.fixed_different += fixed == Decision::kDifferent;
    result.fixed_equivalent += fixed == Decision::kEquivalent;
    result.agreement += fixed == verdict.decision;
    result.naive_different += naive;
  }
  const double n = studies;
  for (double* share :
       {&result.different, &result.equivalent, &result.futile, &result.fixed_different,
        &result.fixed_equivalent, &result.agreement, &result.naive_different}) {
    *share /= n;
  }
  result.mean_runs = runs / n;
  return result;
}

}  // namespace tae::stats
