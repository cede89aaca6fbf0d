#include "common/stats/sequential.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/stats/simulate.h"

// Two-look references come from mpmath (1.2.1 for O'Brien–Fleming, 1.3.0 for Hwang–Shih–DeCani)
// at 30 digits, written independently of the grid integration: c1 = Phi^-1(1 - alpha(t1) / 2) and
// c2 solving 1 - int_{-c1}^{c1} phi(x) (Phi((c2 - r x) / s) - Phi((-c2 - r x) / s)) dx = alpha,
// r = sqrt(t1), s = sqrt(1 - r^2), with alpha(t) = 2 - 2 Phi(Phi^-1(1 - 0.05 / 2) / sqrt(t))
// (O'Brien–Fleming) or 0.05 (1 - e^(-gamma t)) / (1 - e^(-gamma)) (Hwang–Shih–DeCani).

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Monte-Carlo bound: the rate plus three standard errors of a binomial share over `n` trials.
double UpperBound(double rate, int n) { return rate + 3 * std::sqrt(rate * (1 - rate) / n); }

constexpr Spending kOBrienFleming{Spending::Family::kOBrienFleming, 0};

// The product's design (SequentialDesign's defaults) at min .. max.
SequentialDesign Design(int min_seeds, int max_seeds, double margin = 0) {
  SequentialDesign design;
  design.min_seeds = min_seeds;
  design.max_seeds = max_seeds;
  design.margin = margin;
  return design;
}

SequentialDesign WithoutFutility(SequentialDesign design) {
  design.futility = 0;
  return design;
}

// A Brownian motion with one unit of information per seed, simulated here, crosses the
// boundaries of looks min .. k with probability spent[k].
void CheckSpendsOnRandomWalk(const SequentialDesign& design, const Boundaries& boundaries) {
  std::mt19937_64 engine(7);
  std::normal_distribution<double> normal;
  constexpr int kPaths = 100000;
  std::vector<int> crossed_by(boundaries.z.size(), 0);
  for (int path = 0; path < kPaths; ++path) {
    double sum = 0;
    for (int n = 1; n <= design.max_seeds; ++n) {
      sum += normal(engine);
      if (n < design.min_seeds) {
        continue;
      }
      const size_t look = n - design.min_seeds;
      if (std::fabs(sum) / std::sqrt(n) >= boundaries.z[look]) {
        ++crossed_by[look];
        break;
      }
    }
  }
  int cumulative = 0;
  for (size_t k = 0; k < boundaries.z.size(); ++k) {
    cumulative += crossed_by[k];
    const double spent = boundaries.spent[k];
    const double share = static_cast<double>(cumulative) / kPaths;
    INFO("look " << k + design.min_seeds << ": crossed " << share << ", spent " << spent);
    CHECK(std::fabs(share - spent) <= 4 * std::sqrt(spent * (1 - spent) / kPaths) + 1e-4);
  }
}

}  // namespace

TEST_CASE("SpendingBoundaries of two looks match the bivariate normal integral", "[sequential]") {
  const std::vector<double> half = SpendingBoundaries({0.5, 1}, 0.05, kOBrienFleming);
  REQUIRE(half.size() == 2);
  CHECK(half[0] == Approx(2.77180764869936).epsilon(1e-9));
  CHECK(half[1] == Approx(1.97931134267852).epsilon(1e-7));
  const std::vector<double> quarter = SpendingBoundaries({0.25, 1}, 0.05, kOBrienFleming);
  CHECK(quarter[0] == Approx(3.91992796908011).epsilon(1e-9));
  CHECK(quarter[1] == Approx(1.96030365265571).epsilon(1e-7));
  // One look is the fixed-sample test.
  CHECK(SpendingBoundaries({1}, 0.05, kOBrienFleming)[0] ==
        Approx(1.959963984540054).epsilon(1e-9));
}

TEST_CASE("Hwang–Shih–DeCani boundaries of two looks match the bivariate normal integral",
          "[sequential]") {
  const Spending design_spending;  // the product's: gamma -2.5
  CHECK(design_spending.family == Spending::Family::kHwangShihDeCani);
  CHECK(design_spending.gamma == -2.5);
  std::vector<double> z = SpendingBoundaries({0.5, 1}, 0.05, design_spending);
  REQUIRE(z.size() == 2);
  CHECK(z[0] == Approx(2.53843316369037).epsilon(1e-9));
  CHECK(z[1] == Approx(2.00959596120667).epsilon(1e-7));
  z = SpendingBoundaries({0.25, 1}, 0.05, design_spending);
  CHECK(z[0] == Approx(2.88758102793862).epsilon(1e-9));
  CHECK(z[1] == Approx(1.98284008106497).epsilon(1e-7));
  const Spending linear{Spending::Family::kHwangShihDeCani, 0};
  z = SpendingBoundaries({0.5, 1}, 0.05, linear);
  CHECK(z[0] == Approx(2.24140272760495).epsilon(1e-9));
  CHECK(z[1] == Approx(2.12511878975558).epsilon(1e-7));
  const Spending pocock_like{Spending::Family::kHwangShihDeCani, 1};
  z = SpendingBoundaries({0.25, 1}, 0.05, pocock_like);
  CHECK(z[0] == Approx(2.37610252716864).epsilon(1e-9));
  CHECK(z[1] == Approx(2.09702977921082).epsilon(1e-7));
  CHECK(SpendingBoundaries({1}, 0.05, design_spending)[0] ==
        Approx(1.959963984540054).epsilon(1e-9));
  // alpha(t): 0 before any information, linear at gamma 0, alpha at the end.
  CHECK(SpentAt(design_spending, 0, 0.05) == 0);
  CHECK(SpentAt(linear, 0.3, 0.05) == Approx(0.015));
  CHECK(SpentAt(design_spending, 0.5, 0.05) ==
        Approx(0.05 * (1 - std::exp(1.25)) / (1 - std::exp(2.5))));
  CHECK(SpentAt(design_spending, 1, 0.05) == 0.05);
}

TEST_CASE("O'Brien–Fleming looks spend alpha as planned on a random walk", "[sequential]") {
  SequentialDesign design = Design(3, 12);
  design.spending = kOBrienFleming;
  const Boundaries boundaries = ComputeBoundaries(design);
  REQUIRE(boundaries.z.size() == 10);
  CHECK(boundaries.spent.back() == Approx(0.05));
  for (size_t k = 1; k < boundaries.z.size(); ++k) {
    CHECK(boundaries.z[k] < boundaries.z[k - 1]);  // O'Brien–Fleming: strict early, lenient late
  }
  CHECK(boundaries.nominal_p.front() < 1e-3);
  CHECK(boundaries.nominal_p.back() > 0.03);
  CHECK(boundaries.nominal_p.back() < 0.05);
  CheckSpendsOnRandomWalk(design, boundaries);
}

TEST_CASE("The design's looks spend alpha as planned on a random walk", "[sequential]") {
  for (const SequentialDesign& design : {Design(3, 12), Design(3, 28)}) {
    INFO("max " << design.max_seeds);
    const Boundaries boundaries = ComputeBoundaries(design);
    REQUIRE(boundaries.z.size() == static_cast<size_t>(design.max_seeds - 2));
    CHECK(boundaries.spent.back() == Approx(0.05));
    for (size_t k = 1; k < boundaries.z.size(); ++k) {
      CHECK(boundaries.spent[k] > boundaries.spent[k - 1]);
      if (k >= 2) {
        CHECK(boundaries.z[k] < boundaries.z[k - 1]);  // strict early, more lenient every look
      }
    }
    // Between O'Brien–Fleming and Pocock: little at the first look, where Welch's t has few
    // degrees of freedom, and most of alpha left for the last.
    CHECK(boundaries.nominal_p.front() < 0.005);
    CHECK(boundaries.nominal_p.back() > 0.025);
    CHECK(boundaries.nominal_p.back() < 0.05);
    CheckSpendsOnRandomWalk(design, boundaries);
  }
}

TEST_CASE("DesignError refuses designs the test cannot run", "[sequential]") {
  CHECK_FALSE(DesignError(Design(3, 12)));
  CHECK(DesignError(Design(1, 12)).value() ==
        "min must be at least 2 (Welch's t needs two seeds), got 1");
  CHECK(DesignError(Design(5, 4)).value() == "max (4) must be at least min (5)");
  CHECK(DesignError(Design(3, 101)).value() == "max must be at most 100, got 101");
  SequentialDesign design = Design(3, 12);
  design.alpha = 0.5;
  CHECK(DesignError(design).value() == "alpha must be in (0, 0.5), got 0.5");
  design.alpha = 0.05;
  design.margin = -1;
  CHECK(DesignError(design).value() == "margin must be a finite number >= 0, got -1");
  design.margin = 0;
  design.futility = 1;
  CHECK(DesignError(design).value() == "futility must be in [0, 1), got 1");
  CHECK(ComputeBoundaries(design).z.empty());
  design.futility = 0;
  design.spending.gamma = -11;
  CHECK(DesignError(design).value() == "spending gamma must be in [-10, 10], got -11");
  design.spending.gamma = std::numeric_limits<double>::quiet_NaN();
  CHECK(DesignError(design).value() == "spending gamma must be in [-10, 10], got nan");
}

TEST_CASE("Decide: before min, clear differences, nulls at max, NaN and constant arms",
          "[sequential]") {
  const SequentialDesign design = Design(3, 12, 0.05);
  const Boundaries boundaries = ComputeBoundaries(design);
  const std::vector<double> baseline = {0.50, 0.51, 0.49};

  Verdict verdict = Decide(design, boundaries, {0.9, 0.91}, {0.5, 0.51});
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK_FALSE(verdict.final);
  CHECK(verdict.n == 2);
  CHECK(verdict.level == 0);

  verdict = Decide(design, boundaries, {0.90, 0.91, 0.89}, baseline);
  CHECK(verdict.decision == Decision::kDifferent);
  CHECK(verdict.final);
  CHECK(verdict.n == 3);
  CHECK(verdict.delta == Approx(0.40));
  CHECK(verdict.level == Approx(boundaries.nominal_p[0]));

  // p = 0.01 at n = 3 is a finding for a fixed test, not at the first of ten looks.
  verdict = Decide(design, boundaries, {0.55, 0.56, 0.54}, {0.50, 0.52, 0.49});
  CHECK(verdict.p < 0.05);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK_FALSE(verdict.final);

  // The same spread at max: undecided, and final.
  std::vector<double> a;
  std::vector<double> b;
  for (int i = 0; i < 12; ++i) {
    a.push_back(0.5 + 0.01 * ((i * 7) % 5));
    b.push_back(0.5 + 0.01 * ((i * 3) % 5));
  }
  verdict = Decide(Design(3, 12), boundaries, a, b);
  CHECK(verdict.n == 12);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.final);

  verdict = Decide(design, boundaries, {0.9, kNaN, 0.9}, baseline);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.final);

  // Arms without seed variance get no test: both constant (a program that ignores its seed, or a
  // discrete metric that is the same on every seed) is undecided and final, never "different
  // with p = 0" from two numbers each measured once; one constant arm is undecided until max.
  verdict = Decide(design, boundaries, {1, 1, 1}, {1, 1, 1});
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.no_variance);
  CHECK(verdict.final);
  verdict = Decide(design, boundaries, {1, 1, 1}, {0.5, 0.5, 0.5});
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.no_variance);
  CHECK(verdict.final);
  verdict = Decide(design, boundaries, {31.0 / 32, 31.0 / 32, 31.0 / 32}, {1, 0.96875, 1});
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.no_variance);
  CHECK_FALSE(verdict.final);
  CHECK(DecisionName(verdict.decision) == "undecided");
}

TEST_CASE("Decide: equivalence needs the repeated interval inside the margin", "[sequential]") {
  const Boundaries boundaries = ComputeBoundaries(Design(3, 12, 0.05));
  const std::vector<double> a = {0.700, 0.702, 0.698, 0.701, 0.699, 0.700};
  const std::vector<double> b = {0.701, 0.699, 0.700, 0.702, 0.698, 0.700};
  Verdict verdict = Decide(Design(3, 12, 0.05), boundaries, a, b);
  CHECK(verdict.decision == Decision::kEquivalent);
  CHECK(verdict.final);
  CHECK(DecisionName(verdict.decision) == "equivalent");
  // The same values with a margin the interval does not fit in: without futility it wants more
  // seeds; with it (the default) it stops, since 12 seeds would not fit it in either.
  const SequentialDesign narrow = Design(3, 12, 0.001);
  verdict = Decide(WithoutFutility(narrow), ComputeBoundaries(narrow), a, b);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK_FALSE(verdict.final);
  verdict = Decide(narrow, ComputeBoundaries(narrow), a, b);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.futile);
  CHECK(verdict.final);
}

TEST_CASE("Decide: futility ends a hopeless comparison before max", "[sequential]") {
  SequentialDesign design = Design(3, 12);
  design.futility = 0.1;
  const Boundaries boundaries = ComputeBoundaries(design);
  const std::vector<double> a = {0.50, 0.60, 0.40, 0.55, 0.45};
  const std::vector<double> b = {0.51, 0.41, 0.61, 0.46, 0.54};
  Verdict verdict = Decide(design, boundaries, a, b);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK(verdict.futile);
  CHECK(verdict.final);
  // Without the rule it keeps asking for seeds.
  verdict = Decide(WithoutFutility(Design(3, 12)), boundaries, a, b);
  CHECK_FALSE(verdict.futile);
  CHECK_FALSE(verdict.final);
  // The default design has the rule at 0.05: at n = 5 of 12 these values still have a 9% chance
  // of a finding at max; three more seeds that do not differ either end it.
  CHECK(Design(3, 12).futility == 0.05);
  CHECK_FALSE(Decide(Design(3, 12), boundaries, a, b).futile);
  std::vector<double> a8 = a;
  std::vector<double> b8 = b;
  a8.insert(a8.end(), {0.52, 0.48, 0.50});
  b8.insert(b8.end(), {0.49, 0.51, 0.50});
  verdict = Decide(Design(3, 12), boundaries, a8, b8);
  CHECK(verdict.n == 8);
  CHECK(verdict.futile);
  CHECK(verdict.final);
  // With a margin the same values may still end equivalent at max: not futile.
  const SequentialDesign margin = Design(3, 12, 0.12);
  verdict = Decide(margin, ComputeBoundaries(margin), a, b);
  CHECK(verdict.decision == Decision::kUndecided);
  CHECK_FALSE(verdict.futile);
  CHECK_FALSE(verdict.final);
}

// An arm whose seeds all finished with these values, then `pending` seeds in flight.
Arm Finished(const std::string& variant, const std::vector<double>& values, int pending = 0) {
  Arm arm{variant, {}};
  for (double value : values) {
    arm.seeds.push_back(Outcome::Value(value));
  }
  for (int i = 0; i < pending; ++i) {
    arm.seeds.push_back(Outcome::Pending());
  }
  return arm;
}

TEST_CASE("SeedsNeeded starts min seeds and grows only undecided comparisons", "[sequential]") {
  // Without futility, which would stop the near-null comparisons below (last section).
  const SequentialDesign design = WithoutFutility(Design(3, 5));
  const Boundaries boundaries = ComputeBoundaries(design);

  SECTION("a new study gets min runs per arm") {
    const std::vector<SeedTarget> targets =
        SeedsNeeded(design, boundaries, {Point{"", Arm{"baseline", {}}, {Arm{"no-ffn", {}}}}});
    REQUIRE(targets.size() == 2);
    CHECK(targets[0].variant == "baseline");
    CHECK(targets[0].runs == 3);
    CHECK(targets[1].variant == "no-ffn");
    CHECK(targets[1].runs == 3);
  }

  const Arm baseline = Finished("baseline", {0.50, 0.52, 0.48});
  const Arm decided = Finished("no-attn", {0.10, 0.11, 0.09});
  const Arm undecided = Finished("no-ffn", {0.51, 0.53, 0.47});

  SECTION("a decided comparison asks for nothing, an undecided one for one more of each") {
    CHECK(SeedsNeeded(design, boundaries, {Point{"", baseline, {decided}}}).empty());
    const std::vector<SeedTarget> targets =
        SeedsNeeded(design, boundaries, {Point{"layers=2", baseline, {decided, undecided}}});
    REQUIRE(targets.size() == 2);
    CHECK(targets[0].point == "layers=2");
    CHECK(targets[0].variant == "baseline");
    CHECK(targets[0].runs == 4);
    CHECK(targets[1].variant == "no-ffn");
    CHECK(targets[1].runs == 4);
  }

  SECTION("two undecided comparisons grow the shared baseline once") {
    Arm other = undecided;
    other.variant = "rope";
    const std::vector<SeedTarget> targets =
        SeedsNeeded(design, boundaries, {Point{"", baseline, {undecided, other}}});
    REQUIRE(targets.size() == 3);
    CHECK(targets[0].runs == 4);
    CHECK(targets[1].runs == 4);
    CHECK(targets[2].runs == 4);
  }

  SECTION("a look waits for its seeds, and only for its own") {
    // The variant's fourth seed is in flight: the look at 4 still needs the baseline's.
    const Arm running = Finished("no-ffn", {0.51, 0.53, 0.47}, 1);
    std::vector<SeedTarget> targets =
        SeedsNeeded(design, boundaries, {Point{"", baseline, {running}}});
    REQUIRE(targets.size() == 1);
    CHECK(targets[0].variant == "baseline");
    CHECK(targets[0].runs == 4);
    // The baseline's fourth seed is in flight (a sibling asked for it): the comparison's look at
    // 3 does not wait for it, and its look at 4 asks for the variant's fourth seed only.
    const Arm baseline_running = Finished("baseline", {0.50, 0.52, 0.48}, 1);
    targets = SeedsNeeded(design, boundaries, {Point{"", baseline_running, {undecided}}});
    REQUIRE(targets.size() == 1);
    CHECK(targets[0].variant == "no-ffn");
    CHECK(targets[0].runs == 4);
    // Both in flight: nothing more until they end.
    CHECK(SeedsNeeded(design, boundaries, {Point{"", baseline_running, {running}}}).empty());
  }

  SECTION("a failed seed is not replaced: its comparison is held there") {
    Arm failed = undecided;
    failed.seeds[1] = Outcome::Missing("r5 failed");  // below min: no look at all
    CHECK(SeedsNeeded(design, boundaries, {Point{"", baseline, {failed}}}).empty());
    const Course course = FollowLooks(design, boundaries, failed.seeds, baseline.seeds);
    CHECK(course.held == "r5 failed");
    CHECK(course.wants == 0);
    CHECK(course.verdict.n == 1);
    CHECK_FALSE(course.verdict.final);

    // A baseline seed failed past the comparison's next look: it grows to that look, then stops.
    Arm base = Finished("baseline", {0.50, 0.52, 0.48, 0.49});
    base.seeds.push_back(Outcome::Missing("r9 failed"));
    const Arm four = Finished("no-ffn", {0.51, 0.53, 0.47});
    std::vector<SeedTarget> targets = SeedsNeeded(design, boundaries, {Point{"", base, {four}}});
    REQUIRE(targets.size() == 1);
    CHECK(targets[0].variant == "no-ffn");
    CHECK(targets[0].runs == 4);
    const Arm five = Finished("no-ffn", {0.51, 0.53, 0.47, 0.50});
    REQUIRE_FALSE(
        Decide(design, boundaries, {0.51, 0.53, 0.47, 0.50}, {0.50, 0.52, 0.48, 0.49}).final);
    CHECK(SeedsNeeded(design, boundaries, {Point{"", base, {five}}}).empty());
    CHECK(FollowLooks(design, boundaries, five.seeds, base.seeds).held == "r9 failed");
  }

  SECTION("undecided at max is final") {
    const Arm full_baseline = Finished("baseline", {0.50, 0.52, 0.48, 0.51, 0.49});
    const Arm full = Finished("no-ffn", {0.51, 0.53, 0.47, 0.50, 0.50});
    CHECK(SeedsNeeded(design, boundaries, {Point{"", full_baseline, {full}}}).empty());
  }

  SECTION("asking again after the targets were started asks for nothing new") {
    const Arm started_baseline = Finished("baseline", {0.50, 0.52, 0.48}, 1);
    const Arm started = Finished("no-ffn", {0.51, 0.53, 0.47}, 1);
    CHECK(SeedsNeeded(design, boundaries, {Point{"", started_baseline, {started}}}).empty());
  }

  SECTION("a futile comparison asks for nothing") {
    const SequentialDesign futile = Design(3, 5);
    REQUIRE(Decide(futile, boundaries, {0.51, 0.53, 0.47}, {0.50, 0.52, 0.48}).futile);
    CHECK(SeedsNeeded(futile, boundaries, {Point{"", baseline, {undecided}}}).empty());
  }
}

TEST_CASE("FollowLooks takes the budgeted looks in seed order and stops at the first final one",
          "[sequential]") {
  const SequentialDesign design = Design(3, 6);
  const Boundaries boundaries = ComputeBoundaries(design);
  // Futile at n = 3: a delta of 0.01 on a spread of 0.1.
  const std::vector<double> variant = {1.01, 1.11, 1.21};
  const std::vector<double> base3 = {1.0, 1.1, 1.2};
  REQUIRE(Decide(design, boundaries, variant, base3).futile);
  // Later baseline seeds (grown for a sibling) that Decide on all values would read otherwise:
  // the old rule, n = the smaller arm on every value, undoes the futile verdict.
  const std::vector<double> base6 = {1.0, 1.1, 1.2, 1.5, 1.6, 1.55};
  const Verdict old_rule = Decide(design, boundaries, variant, base6);
  REQUIRE_FALSE(old_rule.final);

  const Arm v = Finished("no-pos", variant);
  Arm b = Finished("baseline", base6);
  b.seeds.push_back(Outcome::Pending());
  b.seeds.push_back(Outcome::Missing("r20 failed"));
  const Course course = FollowLooks(design, boundaries, v.seeds, b.seeds);
  CHECK(course.verdict.final);
  CHECK(course.verdict.futile);
  CHECK(course.verdict.n == 3);
  CHECK(course.wants == 0);
  CHECK(course.held.empty());
  CHECK(SeedsNeeded(design, boundaries, {Point{"", b, {v}}}).empty());

  // Values arriving out of seed order take no look until the seeds before them are in.
  Arm gap = Finished("no-pos", {5.0, 5.1, 5.2});
  gap.seeds[1] = Outcome::Pending();
  const Course waiting = FollowLooks(design, boundaries, gap.seeds, Finished("b", base3).seeds);
  CHECK_FALSE(waiting.verdict.final);
  CHECK(waiting.verdict.n == 1);
  CHECK(waiting.wants == 3);
}

// The simulation the design is judged by (bench/seeds_bench.sh prints the same figures).
TEST_CASE("Simulated null studies keep the false-positive rate at alpha", "[sequential]") {
  constexpr int kStudies = 10000;
  const Simulation null = Simulate(Design(3, 12), 0, kStudies, 1);
  INFO("adaptive " << null.different << ", fixed " << null.fixed_different << ", naive "
                   << null.naive_different);
  CHECK(null.different <= UpperBound(0.05, kStudies));
  CHECK(null.fixed_different <= UpperBound(0.05, kStudies));
  // Testing p < 0.05 at every look, which the design replaces, fails the same check: the
  // simulation can tell.
  CHECK(null.naive_different > UpperBound(0.05, kStudies));
  CHECK(null.equivalent == 0);
  // Futility is non-binding: the rejection boundaries alone keep alpha too.
  const Simulation boundaries_alone = Simulate(WithoutFutility(Design(3, 12)), 0, kStudies, 1);
  CHECK(boundaries_alone.different <= UpperBound(0.05, kStudies));
  CHECK(boundaries_alone.different >= null.different);
  // Futility ends most null comparisons early.
  CHECK(null.mean_runs < 0.75 * null.fixed_runs);

  SequentialDesign futile = Design(3, 12);
  futile.futility = 0.1;
  const Simulation with_futility = Simulate(futile, 0, kStudies, 2);
  CHECK(with_futility.different <= UpperBound(0.05, kStudies));
  CHECK(with_futility.mean_runs < 0.65 * with_futility.fixed_runs);
}

TEST_CASE("Simulated equivalence at the margin is a false equivalence at most alpha of the time",
          "[sequential]") {
  constexpr int kStudies = 4000;
  const Simulation at_margin = Simulate(Design(3, 12, 1.0), 1.0, kStudies, 3);
  CHECK(at_margin.equivalent <= UpperBound(0.05, kStudies));
  const Simulation null = Simulate(Design(3, 12, 1.0), 0, kStudies, 4);
  CHECK(null.equivalent > 0.3);
  CHECK(null.mean_runs < 0.95 * null.fixed_runs);
}

TEST_CASE("Simulated real effects reach the fixed design's decisions with fewer runs",
          "[sequential]") {
  constexpr int kStudies = 4000;
  // 1 sigma: max = 12 seeds detect it about 65% of the time; the adaptive design keeps nearly all
  // of that power. The saving is small here: most rejections can only come late.
  const Simulation one = Simulate(Design(3, 12), 1.0, kStudies, 5);
  INFO("1 sigma: adaptive " << one.different << ", fixed " << one.fixed_different << ", runs "
                            << one.mean_runs << " of " << one.fixed_runs);
  // 0.529 against 0.614 here: the looks' conservative dof (stats::ConservativeDof, which holds the
  // error rate at unequal seed spreads after optional stopping) weighs most on the early looks.
  CHECK(one.different >= one.fixed_different - 0.1);
  CHECK(one.agreement >= 0.88);
  CHECK(one.mean_runs <= 0.9 * one.fixed_runs);
  // 2 sigma: both designs find it; the adaptive one with about 64% of the runs.
  const Simulation two = Simulate(Design(3, 12), 2.0, kStudies, 6);
  INFO("2 sigma: adaptive " << two.different << ", fixed " << two.fixed_different << ", runs "
                            << two.mean_runs << " of " << two.fixed_runs);
  CHECK(two.different >= two.fixed_different - 0.01);
  CHECK(two.agreement >= 0.99);
  CHECK(two.mean_runs <= 0.66 * two.fixed_runs);
}

// The acceptance criterion of adaptive seeds at the max recommended for a 1-sigma effect (28: max
// seeds tested once detect it 95% of the time; bench/seeds_bench.sh prints the same figures).
TEST_CASE("At max sized for the effect, the design decides like fixed max with <= 66% of the runs",
          "[sequential]") {
  constexpr int kStudies = 4000;
  const SequentialDesign design = Design(3, 28);
  const Simulation null = Simulate(design, 0, kStudies, 7);
  INFO("null: adaptive " << null.different << ", fixed " << null.fixed_different << ", runs "
                         << null.mean_runs << " of " << null.fixed_runs);
  CHECK(null.different <= UpperBound(0.05, kStudies));
  CHECK(null.mean_runs < 0.7 * null.fixed_runs);
  const Simulation one = Simulate(design, 1.0, kStudies, 8);
  INFO("1 sigma: adaptive " << one.different << ", fixed " << one.fixed_different << ", same "
                            << one.agreement << ", runs " << one.mean_runs << " of "
                            << one.fixed_runs);
  CHECK(one.fixed_different > 0.94);
  CHECK(one.different >= one.fixed_different - 0.05);
  CHECK(one.agreement >= 0.95);
  // 0.639 of the runs: the looks' conservative dof (stats::ConservativeDof, which holds the error
  // rate at unequal seed spreads) stops later at the first looks than Welch-Satterthwaite's.
  CHECK(one.mean_runs <= 0.66 * one.fixed_runs);
}

}  // namespace tae::stats
