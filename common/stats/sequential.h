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
//                 also final ("futile") before max once the predictive probability that the look
//                 at max decides it (different, or with a margin equivalent; flat prior on the
//                 effect, Spiegelhalter et al. 1986) is below `futility` (0.05). Futility never
//                 rejects, so it cannot raise the false-positive rate (it is non-binding: the
//                 rejection boundaries ignore it); it trades a little power for seeds.
// "different" is tested first: a delta can be both significant and inside the margin, and then
// the table says it is different (the margin says how much that matters).
//
// Why these boundaries. The nominal levels come from Lan–DeMets alpha spending at information
// fractions t = n / max, computed exactly for the looks' Brownian-motion increments by numerical
// integration (Jennison & Turnbull, Group Sequential Methods, 2000, ch. 19), with the
// Hwang–Shih–DeCani function alpha(t) = alpha (1 - e^(-gamma t)) / (1 - e^(-gamma)) at gamma =
// -2.5: between O'Brien–Fleming (about gamma -4; nominal p ~ 1e-4 at n = 3 of 12) and linear
// spending (gamma 0). Spending (rather than fixed boundaries) keeps alpha when the looks actually
// taken differ from the plan (failed runs, several finishing at once).
//
// No spending function escapes one trade-off: alpha spent early stops comparisons whose effect is
// large against max early, and the same alpha is missing at max, where comparisons whose effect
// is small against max are decided. With alpha 0.05 and 100,000 simulated studies per figure
// (power at 1 sigma; "same" = same decision as max seeds tested once; runs against theirs):
//
//   design                             3..12 seeds (fixed 0.645)     3..28 seeds (fixed 0.956)
//   O'Brien–Fleming, no futility       0.614  same 0.923  85% runs   0.944  same 0.979  62% runs
//   gamma -2.5, no futility            0.607  same 0.921  85% runs   0.942  same 0.978  60% runs
//   gamma -2.5, futility 0.05 (this)   0.600  same 0.914  76% runs   0.933  same 0.969  58% runs
//   gamma -1, futility 0.05            0.567  same 0.877  74% runs   0.919  same 0.955  55% runs
//
// gamma -2.5 is the steepest spending that keeps the promise O'Brien–Fleming made for 3..12 seeds
// (at most 5 points of power lost at 1 sigma, the same decision at least 90% of the time;
// tests/unit/sequential_test.cc); gamma -1 saves a few more runs where max is large and breaks
// it. The runs depend on how large max is against the effect more than on the design: at 1 sigma
// this design uses 65% of fixed max's runs at max 22 (fixed power 0.90), 63% at 24, 60% at 26 and
// 58% at 28 (0.956). So the acceptance criterion of adaptive seeds (at 1 sigma, fixed max's
// decisions with at most 60% of its runs) holds at max 28, the max that detects 1 sigma with 95%
// power (equal error rates, what bench/seeds_bench.sh and the docs recommend: max ~ 28 / effect^2
// in seed standard deviations), and not at max 22-24 sized for 90% power, where only gamma -1
// would reach about 60%. Futility saves most where nothing differs: identical variants use 63% of
// fixed max's runs at 3..28 (67% at 3..12) instead of 98%. Looking after groups of seeds instead
// of every seed only adds runs (gamma -2, 3..24, 1 sigma: 64% of the runs every seed, 65% every
// 2, 70% every 5) for under a point of power.
//
// The boundaries are derived for a normal statistic with known variance and applied to Welch's t
// by its nominal p value, the usual approximation; tests/unit/sequential_test.cc checks by
// simulation that the false-positive rate over all looks stays at alpha from n = 3 within
// Monte-Carlo error. Over 100,000 null studies it is 0.0500 +- 0.0007 for 3..28 seeds and 0.0498
// for 3..12; the boundaries alone (futility 0) let the approximation through, 0.0522 and 0.0508
// (bench/README.md).
//
// Pure: no I/O, no clock, no state. Deterministic.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tae::stats {

// The largest `max` a design may have (looks cost O(K * grid^2) to derive; a study with more
// seeds per point is not adaptive any more).
inline constexpr int kMaxSequentialSeeds = 100;

// An alpha-spending function alpha(t): the part of the false-positive rate a design may have spent
// by information fraction t = n / max (Lan & DeMets 1983).
struct Spending {
  enum class Family {
    kOBrienFleming,    // Lan–DeMets O'Brien–Fleming type: 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))
    kHwangShihDeCani,  // Hwang, Shih & DeCani 1990: alpha (1 - e^(-gamma t)) / (1 - e^(-gamma))
  };
  Family family = Family::kHwangShihDeCani;
  // Hwang–Shih–DeCani only, in [-10, 10]: -4 spends about like O'Brien–Fleming, 0 linearly
  // (alpha t), 1 about like Pocock.
  double gamma = -2.5;
};

// alpha(t) of `spending` for an overall two-sided level `alpha`: 0 at t <= 0, alpha at t >= 1.
double SpentAt(const Spending& spending, double t, double alpha);

struct SequentialDesign {
  int min_seeds = 3;    // >= 2: Welch's t needs two values per arm
  int max_seeds = 12;   // >= min_seeds, <= kMaxSequentialSeeds
  double alpha = 0.05;  // false-positive rate over all looks, in (0, 0.5)
  double margin = 0;    // equivalence margin in the metric's units; 0: no equivalence decision
  Spending spending;    // of alpha over the looks (the equivalence tests spend 2 alpha alike)
  // Stop an undecided comparison before max when the predictive probability that max seeds would
  // decide it (different, or with a margin equivalent) falls below this (0: never; then only max
  // ends an undecided one).
  double futility = 0.05;
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
// fractions 0 < t_1 < ... < t_K <= 1, spending `alpha` (in (0, 1)) by `spending`:
// P(|Z_1| >= z_1 or ... or |Z_k| >= z_k) = alpha(t_k) for Z the standardised sums of a Brownian
// motion under the null. A look whose share of alpha is 0 gets z = 40.
std::vector<double> SpendingBoundaries(const std::vector<double>& fractions, double alpha,
                                       const Spending& spending);

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
  double se = 0;        // the delta's standard error at the look (0 when untested)
  double dof = 0;       // the test's degrees of freedom (stats::ConservativeDof)
  // An arm had no seed variance at the look: tested at the other arm's spread
  // (stats::OneSpreadTest), or, when neither had any, no test and final.
  bool no_variance = false;
};

// The decision after the values seen so far, one value per finished run (any order). Looks below
// min are undecided and not final; above max they are read as the look at max. NaN in either arm
// (a diverged run) is undecided and final: more seeds cannot make its mean defined. An arm
// without seed variance is tested at the other arm's spread (no_variance; both constant: no test,
// undecided and final). The t test's degrees of freedom are stats::ConservativeDof's
// (common/stats/family.h).
Verdict Decide(const SequentialDesign& design, const Boundaries& boundaries,
               const std::vector<double>& variant, const std::vector<double>& baseline);

// One seed of an arm, as the sequential test sees it. An arm is its seeds in seed order.
struct Outcome {
  enum class State {
    kPending,  // created, not finished: its look waits for it
    kValue,    // finished with a value of the metric
    kMissing,  // finished without one (failed, cancelled, did not report it): never a value
  };
  State state = State::kPending;
  double value = 0;     // kValue
  std::string missing;  // kMissing: why, "r12 failed"

  static Outcome Pending() { return {}; }
  static Outcome Value(double value) { return {State::kValue, value, ""}; }
  static Outcome Missing(std::string why) { return {State::kMissing, 0, std::move(why)}; }
};

// A comparison followed over the looks its design budgeted.
struct Course {
  // At the last look taken; before min, Decide on the seeds that have values in both arms (not
  // final, n below min).
  Verdict verdict;
  // Seeds per arm the next look needs (they may exist and be pending): 0 when the verdict is final
  // or the comparison is held.
  int wants = 0;
  // The next look needs a seed that will never have a value: why ("r12 failed"; the variant's
  // before the baseline's), and the comparison stops there, undecided unless a look decided it.
  std::string held;
};

// The one rule that turns a comparison's seeds into its verdict, shared by the planner
// (SeedsNeeded, server/seeds) and the table (server/report). The looks are n = min, min + 1, ...,
// max, taken in order; look n is Decide on the first n seeds of each arm in seed order, and is
// taken only once those 2n seeds all have values. The course stops at the first final verdict:
// values past it (a baseline that grew for a sibling comparison, a seed still in flight) never
// change it, so a decided comparison stays decided and each look is the one its spending function
// budgeted, whatever its baseline does for others. It also stops where the next look needs a
// seed that has no value and never will: a failed seed is not skipped or replaced (a variant that
// fails at some seeds would otherwise be judged on its lucky ones), it holds the comparison at the
// last look whose seeds all succeeded.
Course FollowLooks(const SequentialDesign& design, const Boundaries& boundaries,
                   const std::vector<Outcome>& variant, const std::vector<Outcome>& baseline);

// One variant (or the baseline) of one grid point, as the scheduler sees it.
struct Arm {
  std::string variant;
  std::vector<Outcome> seeds;  // every run created so far, in seed order
};

struct Point {
  std::string point;  // the grid point's label ("" without a grid)
  Arm baseline;
  std::vector<Arm> variants;
};

// How many runs (seeds) an arm should have: more than it has now.
struct SeedTarget {
  std::string point;
  std::string variant;
  int runs = 0;
};

// Which arms need more runs. Every arm gets min runs. A comparison (variant vs its point's
// baseline) whose course (FollowLooks) wants n seeds per arm brings both arms to n; the baseline,
// shared by the point's comparisons, grows once for all, to the most any of them wants. A held
// comparison and a final one want nothing; a failed seed is never replaced, so no arm grows past
// max runs. Targets are absolute counts: asking twice is asking once, which makes the scheduler's
// "add a seed" idempotent across restarts. In the order of `points`, each point's baseline first.
// courses, when not null, receives each comparison's course, per point per variant (to say why
// without following the looks twice).
std::vector<SeedTarget> SeedsNeeded(const SequentialDesign& design, const Boundaries& boundaries,
                                    const std::vector<Point>& points,
                                    std::vector<std::vector<Course>>* courses = nullptr);

}  // namespace tae::stats
