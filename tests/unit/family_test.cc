#include "common/stats/family.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

// Hand values: Holm (1979) and Bonferroni on a four-comparison family, the levels of intervals
// that agree with the step-down, the table's dof. statsmodels and scipy check the same functions
// on random data (tests/stats/stats_oracle_test.py).

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST_CASE(
    "Holm's adjusted p is the running max of (m - j + 1) p over the sorted p, in input order") {
  const std::vector<double> p = {0.01, 0.04, 0.03, 0.005};
  const std::vector<double> holm = AdjustedP(Correction::kHolm, p);
  REQUIRE(holm.size() == 4);
  CHECK(holm[0] == Approx(0.03));
  CHECK(holm[1] == Approx(0.06));
  CHECK(holm[2] == Approx(0.06));
  CHECK(holm[3] == Approx(0.02));
  const std::vector<double> bonferroni = AdjustedP(Correction::kBonferroni, p);
  CHECK(bonferroni[0] == Approx(0.04));
  CHECK(bonferroni[1] == Approx(0.16));
  CHECK(bonferroni[2] == Approx(0.12));
  CHECK(bonferroni[3] == Approx(0.02));
  CHECK(AdjustedP(Correction::kNone, p) == p);
  // Adjusted p never exceeds 1.
  CHECK(AdjustedP(Correction::kBonferroni, {0.5, 0.9})[1] == 1.0);
}

TEST_CASE("A NaN p is not part of the family: it stays NaN and m counts the others") {
  const std::vector<double> holm = AdjustedP(Correction::kHolm, {0.02, kNaN, 0.01});
  CHECK(holm[0] == Approx(0.02));
  CHECK(std::isnan(holm[1]));
  CHECK(holm[2] == Approx(0.02));
}

TEST_CASE("Interval levels agree with Holm's decisions and are never above alpha") {
  const std::vector<double> p = {0.01, 0.04, 0.03, 0.005};
  const std::vector<double> levels = IntervalLevels(Correction::kHolm, p, 0.05);
  // Rejected at steps 1 and 2 (0.005 at 0.05/4, 0.01 at 0.05/3), stopped at 0.03 > 0.05/2: the
  // two not rejected get 0.05 / (4 - 2).
  CHECK(levels[3] == Approx(0.0125));
  CHECK(levels[0] == Approx(0.05 / 3));
  CHECK(levels[1] == Approx(0.025));
  CHECK(levels[2] == Approx(0.025));

  // On random families: p <= level exactly when the adjusted p is <= alpha.
  std::mt19937_64 rng(52);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    const int m = 1 + static_cast<int>(u(rng) * 12);
    std::vector<double> ps(m);
    for (double& x : ps) {
      x = std::pow(u(rng), 4);
    }
    for (Correction c : {Correction::kHolm, Correction::kBonferroni, Correction::kNone}) {
      const std::vector<double> adj = AdjustedP(c, ps);
      const std::vector<double> lv = IntervalLevels(c, ps, 0.05);
      for (int i = 0; i < m; ++i) {
        INFO("trial " << trial << " comparison " << i << " " << CorrectionName(c));
        CHECK(lv[i] <= 0.05 + 1e-15);
        CHECK((ps[i] <= lv[i]) == (adj[i] <= 0.05));
      }
    }
  }
}

TEST_CASE("The table's dof is a quarter of the way from the smaller arm's n - 1 to Welch's") {
  CHECK(TableDof(10, 3, 5) == Approx(4));
  CHECK(TableDof(2, 3, 3) == Approx(2));    // Welch's lowest at 3 and 3
  CHECK(TableDof(4, 3, 3) == Approx(2.5));  // equal variances at 3 and 3
  const auto test = TableTest({1.0, 2.0, 4.0}, {0.0, 0.5, 0.7, 1.1});
  REQUIRE(test.has_value());
  const auto welch = Welch({1.0, 2.0, 4.0}, {0.0, 0.5, 0.7, 1.1});
  CHECK(test->t == welch->t);
  CHECK(test->dof == Approx(TableDof(welch->dof, 3, 4)));
  CHECK(test->p_two_sided > welch->p_two_sided);  // fewer dof: a wider tail
  CHECK_FALSE(TableTest({1.0, 1.0}, {2.0, 2.0}).has_value());
}

TEST_CASE("Adaptive seeds split alpha among the family's comparisons unless uncorrected") {
  CHECK(SharedAlpha(Correction::kHolm, 0.05, 5) == Approx(0.01));
  CHECK(SharedAlpha(Correction::kBonferroni, 0.05, 4) == Approx(0.0125));
  CHECK(SharedAlpha(Correction::kNone, 0.05, 5) == Approx(0.05));
  CHECK(SharedAlpha(Correction::kHolm, 0.05, 0) == Approx(0.05));
}

TEST_CASE("Intervals of a difference and the smallest detectable effect") {
  const Interval ci = DeltaInterval(1.0, 0.5, 1e9, 0.05);
  CHECK(ci.lo == Approx(1.0 - 1.959964 * 0.5).epsilon(1e-6));
  CHECK(ci.hi == Approx(1.0 + 1.959964 * 0.5).epsilon(1e-6));
  // (z_{0.975} + z_{0.8}) se at large dof; larger at few dof.
  CHECK(DetectableEffect(1.0, 1e9, 0.05) == Approx(1.959964 + 0.841621).epsilon(1e-6));
  CHECK(DetectableEffect(1.0, 2, 0.05) > DetectableEffect(1.0, 10, 0.05));
  CHECK(std::isnan(DetectableEffect(0, 4, 0.05)));
}

TEST_CASE("Corrections are named and parsed both ways") {
  for (Correction c : {Correction::kHolm, Correction::kBonferroni, Correction::kNone}) {
    CHECK(ParseCorrection(CorrectionName(c)) == c);
  }
  CHECK_FALSE(ParseCorrection("dunnett").has_value());
}

}  // namespace
}  // namespace tae::stats
