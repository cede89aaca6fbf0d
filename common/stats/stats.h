#pragma once

// Statistics of the ablation table (taectl report): mean and 95% confidence interval over seeds
// with Student's t distribution, and Welch's unequal-variance t-test between two variants.
//
// Pure functions on doubles, no state. Non-finite inputs are not errors: NaN propagates (a NaN
// value makes every derived number NaN), following the IEEE rules, so a diverged run shows as
// "nan" in the table rather than failing the report.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tae::stats {

struct Summary {
  int64_t n = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (divides by n - 1)
  double ci95 = 0;    // half-width of the 95% CI of the mean: t_{0.975, n-1} * stddev / sqrt(n)
  double min = 0;
  double max = 0;
};

// Count, mean, sample standard deviation, 95% CI half-width, min and max of `values`.
// n == 0: everything but n is NaN. n == 1: mean = min = max = the value, stddev and ci95 NaN.
// Any NaN value makes mean, stddev, ci95, min and max NaN.
Summary Summarize(const std::vector<double>& values);

// Count, mean and sample standard deviation of `values` as Summarize has them, without the CI
// (whose t quantile costs most of Summarize): for tests run many times (stats::Decide).
struct Moments {
  int64_t n = 0;
  double mean = 0;    // NaN when n == 0 or any value is NaN
  double stddev = 0;  // NaN when n < 2 or any value is NaN
};
Moments MomentsOf(const std::vector<double>& values);

// P(T <= t) for Student's t distribution with `dof` degrees of freedom (any real dof > 0;
// dof = +inf gives the standard normal), to about 1e-13 relative also far in the tails and for
// large dof. Returns NaN if t or dof is NaN or dof <= 0.
double StudentTCdf(double t, double dof);

// The t with StudentTCdf(t, dof) == p, to about 1e-12 relative. p == 0 gives -inf, p == 1
// gives +inf, and so does a t beyond the double range (tiny dof); NaN if p is outside [0, 1], if
// p or dof is NaN, or if dof <= 0.
double StudentTQuantile(double p, double dof);

struct WelchTest {
  double t = 0;            // (mean(a) - mean(b)) / sqrt(var(a) / n_a + var(b) / n_b)
  double dof = 0;          // Welch-Satterthwaite degrees of freedom (not an integer in general)
  double p_two_sided = 1;  // P(|T| >= |t|)
  double se = 0;           // sqrt(var(a) / n_a + var(b) / n_b): the standard error of the delta
};

// Welch's unequal-variance t-test of mean(a) - mean(b). nullopt when a or b has fewer than 2
// values, or both sample variances are 0 (the statistic is 0/0 or +-inf). When exactly one
// variance is 0 the test is still defined: it becomes the one-sample t-test of the other sample
// against the constant mean, with dof = n - 1 of that sample. NaN values give NaN t, dof and p.
std::optional<WelchTest> Welch(const std::vector<double>& a, const std::vector<double>& b);

// Stars for a p value: "***" if p < 0.001, "**" if p < 0.01, "*" if p < 0.05, else "" (also for
// NaN).
// The paired t-test of mean(a - b) over pairs (a[i], b[i]): t = mean(d) / (sd(d) / sqrt(n)), dof
// n - 1, se sd(d) / sqrt(n). nullopt when the sizes differ, there are fewer than 2 pairs, or every
// difference is the same (sd 0).
std::optional<WelchTest> PairedT(const std::vector<double>& a, const std::vector<double>& b);

std::string SignificanceMark(double p);

}  // namespace tae::stats
