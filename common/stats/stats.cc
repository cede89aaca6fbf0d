#include "common/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEpsilon = std::numeric_limits<double>::epsilon();
constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 pi))

// lgamma(x) - ((x - 1/2) log x - x + log sqrt(2 pi)) for x >= 10, from the asymptotic Stirling
// series sum_k B_2k / (2k (2k - 1) x^(2k - 1)); the first omitted term is below 1e-15 at x = 10.
double StirlingRemainder(double x) {
  const double inv2 = 1.0 / (x * x);
  const double series =
      1.0 / 12 -
      inv2 *
          (1.0 / 360 -
           inv2 * (1.0 / 1260 - inv2 * (1.0 / 1680 - inv2 * (1.0 / 1188 - inv2 * 691.0 / 360360))));
  return series / x;
}

// log B(a, b) for a, b > 0. lgamma(a) + lgamma(b) - lgamma(a + b) loses the absolute precision of
// the large terms when a or b is large (large dof); there the Stirling form is written so that the
// big terms cancel analytically.
double LogBeta(double a, double b) {
  const double p = std::min(a, b);
  const double q = std::max(a, b);
  if (q < 10) {
    return std::lgamma(p) + std::lgamma(q) - std::lgamma(p + q);
  }
  const double sum = p + q;
  const double correction_q = StirlingRemainder(q) - StirlingRemainder(sum);
  if (p < 10) {
    // lgamma(q) - lgamma(p + q) by Stirling, with lgamma(p) exact.
    return std::lgamma(p) + correction_q + p - p * std::log(sum) + (q - 0.5) * std::log1p(-p / sum);
  }
  return -0.5 * std::log(q) + kLogSqrt2Pi + StirlingRemainder(p) + correction_q +
         (p - 0.5) * std::log(p / sum) + q * std::log1p(-p / sum);
}

// A point in (0, 1) given with its complement and both logarithms, each computed without
// cancellation by the caller.
struct UnitPoint {
  double x;
  double y;  // 1 - x
  double log_x;
  double log_y;
};

// The continued fraction of I_x(a, b) (Numerical Recipes 3rd ed., eq. 6.4.5) is
// I_x(a, b) = x^a y^b / (a B(a, b)) * 1 / (1 + d_1 / (1 + d_2 / (1 + ...))), with
// d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)) and
// d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)). It converges fast for x < (a + 1) / (a + b + 2),
// but evaluated as written it loses digits when a is large and x close to 1 (large dof): 1 + d_1
// is then small and comes out of a difference. This returns the same value from its even part,
// 1 / (e_0 + f_1 / (e_1 + f_2 / (e_2 + ...))) with e_m = 1 + d_{2m} + d_{2m+1} (d_0 = 0) and
// f_m = -d_{2m-1} d_{2m}, where e_m is expanded in y = 1 - x so that nothing cancels:
// 1 + d_{2m+1} = (a (2m + 1 - b) + m (3m + 2 - b) + (a + m)(a + b + m) y) / ((a + 2m)(a + 2m + 1)).
// Evaluated by the modified Lentz method.
double BetaContinuedFraction(double a, double b, double x, double y) {
  constexpr double kTiny = 1e-300;
  constexpr int kMaxTerms = 100000;
  auto partial_denominator = [&](double m) {
    // With b <= 1 every term of the expansion in y is >= 0; with b > 1 the plain form is the one
    // without cancellation (there x is small: the caller has swapped a and b).
    double e = b <= 1 ? (a * (2 * m + 1 - b) + m * (3 * m + 2 - b) + (a + m) * (a + b + m) * y) /
                            ((a + 2 * m) * (a + 2 * m + 1))
                      : 1 - (a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    if (m > 0) {
      e += m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    }
    return e;
  };
  double value = partial_denominator(0);
  if (std::fabs(value) < kTiny) {
    value = kTiny;
  }
  double c = value;
  double d = 0;
  for (int term = 1; term <= kMaxTerms; ++term) {
    const double m = term;
    const double numerator = (a + m - 1) * (a + b + m - 1) * m * (b - m) * x * x /
                             ((a + 2 * m - 2) * (a + 2 * m - 1) * (a + 2 * m - 1) * (a + 2 * m));
    const double denominator = partial_denominator(m);
    d = denominator + numerator * d;
    if (std::fabs(d) < kTiny) {
      d = kTiny;
    }
    c = denominator + numerator / c;
    if (std::fabs(c) < kTiny) {
      c = kTiny;
    }
    d = 1 / d;
    const double delta = c * d;
    value *= delta;
    if (std::fabs(delta - 1) <= 2 * kEpsilon) {
      break;
    }
  }
  return 1 / value;
}

// x^a y^b / (a B(a, b)), the factor in front of the continued fraction.
double BetaFront(double a, double b, double log_x, double log_y) {
  return std::exp(a * log_x + b * log_y - LogBeta(a, b)) / a;
}

// The regularized incomplete beta function I_x(a, b) for a, b > 0, 0 <= x <= 1.
double RegularizedBeta(double a, double b, const UnitPoint& point) {
  // x itself may underflow while x^a does not: the logarithms decide.
  if (std::isinf(point.log_x)) {
    return 0;
  }
  if (std::isinf(point.log_y)) {
    return 1;
  }
  if (point.x < (a + 1) / (a + b + 2)) {
    return BetaFront(a, b, point.log_x, point.log_y) *
           BetaContinuedFraction(a, b, point.x, point.y);
  }
  // I_x(a, b) = 1 - I_y(b, a); the fraction converges fast on this side.
  return 1 -
         BetaFront(b, a, point.log_y, point.log_x) * BetaContinuedFraction(b, a, point.y, point.x);
}

// The point x = dof / (dof + t^2) of the incomplete beta function behind the t distribution,
// also when t^2 overflows or x underflows.
UnitPoint TPoint(double t, double dof) {
  const double abs_t = std::fabs(t);
  if (abs_t <= std::sqrt(dof)) {
    const double r = (abs_t / dof) * abs_t;  // t^2 / dof <= 1
    const double log1p_r = std::log1p(r);
    return {1 / (1 + r), r / (1 + r), -log1p_r, std::log(r) - log1p_r};
  }
  const double s = (dof / abs_t) / abs_t;  // dof / t^2 < 1, may underflow
  const double log_s = std::log(dof) - 2 * std::log(abs_t);
  const double log1p_s = std::log1p(s);
  return {s / (1 + s), 1 / (1 + s), log_s - log1p_s, -log1p_s};
}

// The density of Student's t distribution.
double StudentTPdf(double t, double dof) {
  if (std::isinf(dof)) {
    return std::exp(-0.5 * t * t - kLogSqrt2Pi);
  }
  // log(1 + t^2 / dof), also when t^2 overflows.
  const double abs_t = std::fabs(t);
  const double log_kernel = abs_t <= std::sqrt(dof) ? std::log1p((abs_t / dof) * abs_t)
                                                    : 2 * std::log(abs_t) - std::log(dof) +
                                                          std::log1p((dof / abs_t) / abs_t);
  return std::exp(-LogBeta(dof / 2, 0.5) - 0.5 * std::log(dof) - (dof + 1) / 2 * log_kernel);
}

// The t <= 0 with StudentTCdf(t, dof) == q, for 0 < q < 1/2: Newton's method kept inside a
// bracket, with bisection when a step leaves it.
double LowerTailQuantile(double q, double dof) {
  double hi = 0;  // StudentTCdf(hi) > q
  double lo = -1;
  for (double cdf = StudentTCdf(lo, dof); cdf > q; cdf = StudentTCdf(lo, dof)) {
    hi = lo;
    lo *= 2;
    if (std::isinf(lo)) {
      return -kInf;  // beyond the largest double
    }
  }
  double t = 0.5 * (lo + hi);
  for (int iteration = 0; iteration < 500; ++iteration) {
    const double excess = StudentTCdf(t, dof) - q;
    if (excess == 0) {
      return t;
    }
    if (excess < 0) {
      lo = t;
    } else {
      hi = t;
    }
    double next = t - excess / StudentTPdf(t, dof);
    if (!(next > lo && next < hi)) {
      next = 0.5 * (lo + hi);
    }
    if (std::fabs(next - t) <= 4 * kEpsilon * std::fabs(next) || hi - lo <= 0) {
      return next;
    }
    t = next;
  }
  return t;
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) {
    sum += value;
  }
  return sum / static_cast<double>(values.size());
}

// Sample variance (divides by n - 1) about `mean` by the corrected two-pass algorithm; n >= 2.
double SampleVariance(const std::vector<double>& values, double mean) {
  double squares = 0;
  double deviations = 0;  // zero in exact arithmetic; corrects the rounding of the mean
  for (double value : values) {
    const double deviation = value - mean;
    squares += deviation * deviation;
    deviations += deviation;
  }
  const double n = static_cast<double>(values.size());
  return (squares - deviations * deviations / n) / (n - 1);
}

}  // namespace

Moments MomentsOf(const std::vector<double>& values) {
  Moments moments;
  moments.n = static_cast<int64_t>(values.size());
  moments.mean = moments.stddev = kNaN;
  if (values.empty() ||
      std::any_of(values.begin(), values.end(), [](double value) { return std::isnan(value); })) {
    return moments;
  }
  moments.mean = Mean(values);
  if (values.size() >= 2) {
    moments.stddev = std::sqrt(SampleVariance(values, moments.mean));
  }
  return moments;
}

Summary Summarize(const std::vector<double>& values) {
  Summary summary;
  summary.n = static_cast<int64_t>(values.size());
  summary.mean = summary.stddev = summary.ci95 = summary.min = summary.max = kNaN;
  if (values.empty()) {
    return summary;
  }
  if (std::any_of(values.begin(), values.end(), [](double value) { return std::isnan(value); })) {
    return summary;
  }
  const auto [min, max] = std::minmax_element(values.begin(), values.end());
  summary.min = *min;
  summary.max = *max;
  const Moments moments = MomentsOf(values);
  summary.mean = moments.mean;
  if (values.size() < 2) {
    return summary;
  }
  summary.stddev = moments.stddev;
  const double n = static_cast<double>(values.size());
  summary.ci95 = StudentTQuantile(0.975, n - 1) * summary.stddev / std::sqrt(n);
  return summary;
}

double StudentTCdf(double t, double dof) {
  if (std::isnan(t) || std::isnan(dof) || dof <= 0) {
    return kNaN;
  }
  if (std::isinf(t)) {
    return t > 0 ? 1 : 0;
  }
  if (std::isinf(dof)) {
    return 0.5 * std::erfc(-t / std::sqrt(2.0));
  }
  // P(T <= -|t|) = I_x(dof / 2, 1 / 2) / 2 with x = dof / (dof + t^2).
  const double lower_tail = 0.5 * RegularizedBeta(dof / 2, 0.5, TPoint(t, dof));
  return t < 0 ? lower_tail : 1 - lower_tail;
}

double StudentTQuantile(double p, double dof) {
  if (std::isnan(p) || std::isnan(dof) || dof <= 0 || p < 0 || p > 1) {
    return kNaN;
  }
  if (p == 0) {
    return -kInf;
  }
  if (p == 1) {
    return kInf;
  }
  if (p == 0.5) {
    return 0;
  }
  // 1 - p is exact for p >= 1/2, so the upper half loses nothing by symmetry.
  return p < 0.5 ? LowerTailQuantile(p, dof) : -LowerTailQuantile(1 - p, dof);
}

std::optional<WelchTest> Welch(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) {
    return std::nullopt;
  }
  const double n_a = static_cast<double>(a.size());
  const double n_b = static_cast<double>(b.size());
  const double mean_a = Mean(a);
  const double mean_b = Mean(b);
  // Squared standard errors of the two means.
  const double se2_a = SampleVariance(a, mean_a) / n_a;
  const double se2_b = SampleVariance(b, mean_b) / n_b;
  if (se2_a == 0 && se2_b == 0) {
    return std::nullopt;
  }
  const double se2 = se2_a + se2_b;
  WelchTest test;
  test.se = std::sqrt(se2);
  test.t = (mean_a - mean_b) / test.se;
  // dof = se2^2 / (se2_a^2 / (n_a - 1) + se2_b^2 / (n_b - 1)), in shares of se2 so that nothing
  // overflows.
  const double share_a = se2_a / se2;
  const double share_b = se2_b / se2;
  test.dof = 1 / (share_a * share_a / (n_a - 1) + share_b * share_b / (n_b - 1));
  test.p_two_sided = 2 * StudentTCdf(-std::fabs(test.t), test.dof);
  return test;
}

std::optional<WelchTest> PairedT(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) {
    return std::nullopt;
  }
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    d[i] = a[i] - b[i];
  }
  const double n = static_cast<double>(d.size());
  const double mean = Mean(d);
  const double var = SampleVariance(d, mean);
  if (var == 0) {
    return std::nullopt;
  }
  WelchTest test;
  test.se = std::sqrt(var / n);
  test.t = mean / test.se;
  test.dof = n - 1;
  test.p_two_sided = 2 * StudentTCdf(-std::fabs(test.t), test.dof);
  return test;
}

std::string SignificanceMark(double p) {
  if (p < 0.001) {
    return "***";
  }
  if (p < 0.01) {
    return "**";
  }
  if (p < 0.05) {
    return "*";
  }
  return "";
}

}  // namespace tae::stats
