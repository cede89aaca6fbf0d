#pragma once

// The family of an ablation table's comparisons, and what each comparison may claim.
//
// A table compares every variant (at every grid point) with its baseline on each metric: with K
// comparisons at alpha each, some null variant is called "different" far more often than alpha
// (K = 10 null variants, 3 seeds, alpha 0.05: about 1 study in 4). So the table controls the
// family-wise error rate of each metric's comparisons:
//   - kHolm (default): Holm's step-down (1979) on the comparisons' p values. Valid for any
//     dependence between them (they share the baseline), uniformly more powerful than Bonferroni.
//   - kBonferroni: each comparison at alpha / K.
//   - kNone: each comparison at alpha (the family is not controlled; the table says so).
// Adaptive seeds split alpha evenly among the comparisons in the spending (SharedAlpha): each
// comparison's group-sequential test spends alpha / K, so the family's error is at most alpha.
//
// Intervals that agree with the decisions (IntervalLevels): a comparison the step-down rejects at
// its i-th of m steps gets its interval at two-sided level alpha / (m - i + 1), which excludes 0;
// every comparison it does not reject gets alpha / (m - r) (r rejected), which contains 0 (its p
// is above that level). Every level is at most alpha, so each interval contains the unadjusted
// 95% one; the bench (bench/stats) measures their coverage, one at a time and all at once.
//
// Welch's t at few seeds is liberal when one arm's seed spread is several times the other's
// (3 seeds per arm, SD ratio 5: 0.058 at a nominal 0.05; 5 seeds, ratio 5: 0.0054 at 0.005, the
// level of one of ten comparisons), because the Welch–Satterthwaite degrees of freedom are
// estimated from the same few variances. The table's t tests use TableDof: a quarter of the way
// from the smaller arm's n - 1 (exact when that arm's variance dominates) to
// Welch–Satterthwaite's. At 3, 5 and 8 seeds per arm and SD ratios 1 to 10 its size is at most
// nominal at both 0.05 and 0.005 (400,000 simulated pairs each, scipy; largest 0.0498 and
// 0.00497); the price is power at equal spreads (3 seeds: size 0.018 where Welch's is 0.024 at
// 0.05). bench/stats measures it through the table (docs/report.md, "What a table promises").
//
// Pure functions on doubles.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/stats/stats.h"

namespace tae::stats {

enum class Correction { kHolm, kBonferroni, kNone };

// "holm", "bonferroni", "none".
std::string_view CorrectionName(Correction correction);
// The inverse; nullopt for any other text.
std::optional<Correction> ParseCorrection(std::string_view name);

// The degrees of freedom the table's t tests use: (n_min - 1) + (dof_welch - (n_min - 1)) / 4.
double TableDof(double welch_dof, double n_a, double n_b);

// Hsu's (1938) conservative degrees of freedom for Welch's statistic: the smaller arm's n - 1. Its
// size is at most nominal at any ratio of the arms' variances. Adaptive seeds' looks use it: after
// optional stopping TableDof's calibration does not hold at unequal spreads (bench/stats: 0.056
// at SD ratio 5, 0.052 with this).
double ConservativeDof(double n_a, double n_b);

// Welch's test of mean(a) - mean(b) with TableDof instead of Welch–Satterthwaite's (dof and
// p_two_sided are the calibrated ones; t and se are Welch's). nullopt as for Welch.
std::optional<WelchTest> TableTest(const std::vector<double>& a, const std::vector<double>& b);

// One arm without seed variance (every seed the same value: accuracy at its ceiling, a discrete
// metric) and the other with it: Welch's test would be a one-sample test against the constant,
// as if the constant were known exactly. Instead both arms get the varying arm's spread: se =
// sd * sqrt(1/n_a + 1/n_b), dof = that arm's n - 1 (exact when the arms' spreads are equal).
// nullopt unless exactly one arm varies and each has >= 2 values.
std::optional<WelchTest> OneSpreadTest(const std::vector<double>& a, const std::vector<double>& b);

// Adjusted p values (each in [0, 1], in the input's order): a comparison is rejected at family
// level alpha when its adjusted p <= alpha. Holm: max over the j <= i smallest of (m - j + 1)
// p_(j); Bonferroni: m p; none: p. NaN inputs are not part of the family (their output is NaN, and
// m counts the others).
std::vector<double> AdjustedP(Correction correction, const std::vector<double>& p);

// Per comparison, the two-sided level of its interval, consistent with the decisions at family
// level alpha (the header's rule); NaN where p is NaN.
std::vector<double> IntervalLevels(Correction correction, const std::vector<double>& p,
                                   double alpha);

// The alpha each of `comparisons` comparisons spends under adaptive seeds: alpha / comparisons
// for holm and bonferroni (the Bonferroni split of the spending), alpha for none.
double SharedAlpha(Correction correction, double alpha, int comparisons);

// delta +- t_{1 - level/2, dof} se.
struct Interval {
  double lo = 0;
  double hi = 0;
};
Interval DeltaInterval(double delta, double se, double dof, double level);

// The smallest |delta| a two-sided t test at `level` would detect with probability `power` at this
// standard error and dof: (t_{1 - level/2} + t_{power}) se. NaN when se is not positive.
double DetectableEffect(double se, double dof, double level, double power = 0.8);

}  // namespace tae::stats
