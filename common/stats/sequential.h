#pragma once

// Adaptive seeds: a group-sequential test of "variant vs baseline" on Welch's t, and the choice of
// which comparisons of a study need another seed.
//
// The design. A comparison is looked at after n = min, min + 1, ..., max seeds per arm (K = max -
// min + 1 looks). At each look it is
//   - different:  Welch's two-sided p <= the look's nominal level (the sequential test rejects);
//   - equivalent: (only with a margin m > 0) the repeated (1 - 2 alpha) confidence interval of the
//                 delta lies inside (-m, m), i.e. two one-sided tests at the look's one-sided
//                 nominal level reject |delta| >= m (TOST);
//   - undecided:  otherwise; final at n = max (or when no arm can grow), else it wants a seed;
//                 with `futility` > 0 also final ("futile") once the predictive probability of
//                 rejecting at max (flat prior on the effect, Spiegelhalter et al. 1986) is below
//                 it. Futility never rejects, so it cannot raise the false-positive rate (it is
//                 non-binding: the rejection boundaries ignore it); it trades power for seeds.
// "different" is tested first: a delta can be both significant and inside the margin, and then
// the table says it is different (the margin says how much that matters).
//
// Why these boundaries. The nominal levels come from Lan–DeMets alpha spending with the
// O'Brien–Fleming-type function alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)), at information
// fractions t = n / max, computed exactly for the looks' Brownian-motion increments by numerical
// integration (Jennison & Turnbull, Group Sequential Methods, 2000, ch. 19). O'Brien–Fleming rather
// than Pocock because seeds are few and their variance is estimated: it spends almost nothing at
// n = 3 (nominal p ~ 1e-4), where Welch's t has ~4 degrees of freedom and a chance extreme value
// is likeliest, and its last look is close to the fixed-sample test (nominal p 0.033 at alpha
// 0.05 for 3..12 seeds), so a study that runs to max loses little power against fixed max seeds;
// Pocock's flat nominal level rejects early more often but costs power at max, i.e. turns findings
// into "undecided". Simulated for 3..12 seeds and a 1-sigma effect (20,000 studies):
// O'Brien–Fleming power 0.617 with 85% of the runs, Pocock-type 0.505 with 82%, fixed 12 seeds
// 0.652. Spending (rather than fixed boundaries) keeps alpha when the looks actually taken differ
// from the plan (failed runs, several finishing at once). The boundaries are derived for a normal
// statistic with known variance and applied to Welch's t by its nominal p value, the usual
// approximation; tests/unit/sequential_test.cc checks by simulation that the false-positive rate
// over all looks stays at alpha from n = 3 within Monte-Carlo error (over 100,000 null studies
// of 3..12 seeds it is 0.0513 +- 0.0007: the approximation lets about 0.001 through at these few
// degrees of freedom; bench/README.md).
//
// Pure: no I/O, no clock, no state. Deterministic.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tae::stats {

// The largest `max` a design may have (looks cost O(K * grid^2) to derive; a study with more
// seeds per point is not adaptive any more).
inline constexpr int kMaxSequentialSeeds = 100;

struct SequentialDesign {
  int min_seeds = 3;    // >= 2: Welch's t needs two values per arm
  int max_seeds = 12;   // >= min_seeds, <= kMaxSequentialSeeds
  double alpha = 0.05;  // false-positive rate over all looks, in (0, 0.5)
  double margin = 0;    // equivalence margin in the metric's units; 0: no equivalence decision
  // Stop an undecided comparison before max when the predictive probability that max seeds would
  // make it "different" falls below this (0: never; then only max ends an undecided one).
  double futility = 0;
};

// Why `design` is not usable ("train.seeds.min must be at least 2, got 1"), or nullopt.
std::optional<std::string> DesignError(const SequentialDesign& design);

// The nominal levels of each look of a design.
struct Boundaries {
  int min_seeds = 0;
  int max_seeds = 0;
  std::vector<double> z;  // per look n = min .. max: the two-sided critical value on the z scale
  std::vector<double> nominal_p;  // two-sided level of "different": 2 (1 - Phi(z))
  std::vector<double> one_sided;  // one-sided level of each equivalence test (design at 2 alpha)
  std::vector<double> spent;      // alpha(t) at each look: the cumulative error spent
};

// Two-sided boundaries on the z scale of a group-sequential test at increasing information
// fractions 0 < t_1 < ... < t_K <= 1, spending `alpha` (in (0, 1)) by the O'Brien–Fleming-type
// function: P(|Z_1| >= z_1 or ... or |Z_k| >= z_k) = alpha(t_k) for Z the standardised sums of a
// Brownian motion under the null. A look whose share of alpha is 0 gets z = 40.
std::vector<double> SpendingBoundaries(const std::vector<double>& fractions, double alpha);

// The boundaries of a valid design (DesignError(design) == nullopt; otherwise empty vectors).
// Deterministic; about a millisecond for 10 looks, so callers compute them once per design.
Boundaries ComputeBoundaries(const SequentialDesign& design);

enum class Decision { kUndecided, kDifferent, kEquivalent };

// "undecided", "different", "equivalent" (the words of the table and of --json).
std::string_view DecisionName(Decision decision);

struct Verdict {
  Decision decision = Decision::kUndecided;
  bool final = false;   // decided, or undecided at max: another seed would not be used
  bool futile = false;  // undecided and final before max by the futility rule
  int n = 0;            // the look: the smaller arm's number of values
  double delta = 0;     // mean(variant) - mean(baseline); NaN when an arm is empty
  double p = 1;         // Welch's two-sided p (1 when it is undefined)
  double level = 0;     // the look's nominal two-sided level (0 before min)
};

// The decision after the values seen so far, one value per finished run (any order). Looks below
// min are undecided and not final; above max they are read as the look at max. NaN in either arm
// (a diverged run) is undecided and final: more seeds cannot make its mean defined. When both
// arms are constant the delta is exact: a non-zero one is different, a zero one equivalent if
// there is a margin (undecided otherwise).
Verdict Decide(const SequentialDesign& design, const Boundaries& boundaries,
               const std::vector<double>& variant, const std::vector<double>& baseline);

// One variant (or the baseline) of one grid point, as the scheduler sees it.
struct Arm {
  std::string variant;
  std::vector<double> values;  // the primary metric of each succeeded run
  int runs = 0;                // runs created so far (succeeded, failed, pending), i.e. seeds used
  int pending = 0;             // of those, not finished yet
};

struct Point {
  std::string point;  // the grid point's label ("" without a grid)
  Arm baseline;
  std::vector<Arm> variants;
};

// How many runs (seeds 0 .. runs - 1) an arm should have: more than it has now.
struct SeedTarget {
  std::string point;
  std::string variant;
  int runs = 0;
};

// Which arms need more runs. Every arm gets min runs. A comparison (variant vs its point's
// baseline) whose arms have nothing pending and whose verdict is undecided and not final asks for
// one more value in each arm; the baseline, shared by the point's comparisons, grows once for all.
// A failed run gives no value and its seed is not reused, so an arm asks for as many extra runs as
// values it lacks, never past max runs. Targets are absolute counts: asking twice is asking once,
// which makes the scheduler's "add a seed" idempotent across restarts. In the order of `points`,
// each point's baseline first.
std::vector<SeedTarget> SeedsNeeded(const SequentialDesign& design, const Boundaries& boundaries,
                                    const std::vector<Point>& points);

}  // namespace tae::stats
