#include "common/stats/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

// Reference values come from Debian's python3-scipy 1.10.1 (numpy 1.24.2), computed with the call
// written next to each. scipy 1.10's t.ppf (cdflib's stdtrit) is only good to ~1e-9 relative
// (t.ppf(0.975, 6) is off by 9.6e-10, t.ppf(1e-300, 30) by a factor 4), so quantile references
// come from mpmath 1.2.1 at 60 digits (Newton on 0.5 * betainc(dof/2, 1/2, 0, dof/(dof+t^2)) in
// mpmath precision), with scipy's value in the comment where it differs.

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;

Approx Near(double reference, double relative = 1e-12) {
  return Approx(reference).epsilon(relative).margin(0);
}

}  // namespace

TEST_CASE("StudentTCdf matches scipy's t.cdf", "[stats]") {
  // scipy.stats.t.cdf(t, dof)
  CHECK(StudentTCdf(1.5, 1) == Near(0.8128329581890013));
  CHECK(StudentTCdf(-2, 2) == Near(0.09175170953613696));
  CHECK(StudentTCdf(0.7, 2.5) == Near(0.7282975284052259));
  CHECK(StudentTCdf(2.776, 4) == Near(0.9749886108400118));
  CHECK(StudentTCdf(-3.5, 4) == Near(0.012448081730111376));
  CHECK(StudentTCdf(2.042, 30) == Near(0.9749856646719011));
  CHECK(StudentTCdf(1.96, 1000) == Near(0.9748634075221256));
  CHECK(StudentTCdf(5, 0.3) == Near(0.7845644694231817));
}

TEST_CASE("StudentTCdf keeps its relative precision in the far tails", "[stats]") {
  // scipy.stats.t.cdf(t, dof)
  CHECK(StudentTCdf(-40, 2.5) == Near(7.097817145246693e-05));
  CHECK(StudentTCdf(-8, 30) == Near(3.132911237850386e-09));
  CHECK(StudentTCdf(-1e6, 1) == Near(3.1830988618368455e-07));
  // Cauchy (dof 1) in closed form: 1/2 + atan(t)/pi, so about 1 / (pi * 1e200) here, where t^2
  // and dof / t^2 are out of the double range (scipy 1.10 returns 0).
  CHECK(StudentTCdf(-1e200, 1) == Near(1 / (kPi * 1e200)));
  CHECK(StudentTCdf(1, 1) == Near(0.75));
  CHECK(StudentTCdf(0, 3.7) == 0.5);
}

TEST_CASE("StudentTCdf is symmetric and monotone", "[stats]") {
  for (double dof : {0.5, 1.0, 2.5, 30.0, 1e7}) {
    double previous = 0;
    for (double t = -20; t <= 20; t += 0.25) {
      const double cdf = StudentTCdf(t, dof);
      CHECK(cdf >= previous);
      CHECK(cdf + StudentTCdf(-t, dof) == Near(1, 1e-15));
      previous = cdf;
    }
  }
}

TEST_CASE("StudentTCdf edge cases", "[stats]") {
  CHECK(std::isnan(StudentTCdf(kNaN, 3)));
  CHECK(std::isnan(StudentTCdf(1, kNaN)));
  CHECK(std::isnan(StudentTCdf(1, 0)));
  CHECK(std::isnan(StudentTCdf(1, -2)));
  CHECK(StudentTCdf(kInf, 3) == 1);
  CHECK(StudentTCdf(-kInf, 3) == 0);
  // Infinite dof is the standard normal: scipy.stats.norm.cdf(1.5), norm.cdf(-6).
  CHECK(StudentTCdf(1.5, kInf) == Near(0.9331927987311419));
  CHECK(StudentTCdf(-6, kInf) == Near(9.865876450376946e-10));
}

TEST_CASE("StudentTQuantile matches high-precision reference values", "[stats]") {
  // mpmath; scipy.stats.t.ppf(p, dof) in the comment when it differs beyond 1e-13.
  CHECK(StudentTQuantile(0.975, 1) == Near(12.706204736174693));    // scipy 12.706204736432095
  CHECK(StudentTQuantile(0.975, 2) == Near(4.3026527297494618));    // scipy 4.302652729911275
  CHECK(StudentTQuantile(0.975, 2.5) == Near(3.5746548420036818));  // scipy 3.5746548420118773
  CHECK(StudentTQuantile(0.975, 3) == Near(3.1824463052837084));    // scipy 3.182446305284263
  CHECK(StudentTQuantile(0.975, 4) == Near(2.7764451051977935));
  CHECK(StudentTQuantile(0.975, 6) == Near(2.4469118511449693));  // scipy 2.4469118487916806
  CHECK(StudentTQuantile(0.975, 30) == Near(2.0422724563012379));
  CHECK(StudentTQuantile(0.975, 1000) == Near(1.9623390808264081));
  CHECK(StudentTQuantile(0.6, 7.3) == Near(0.26275680525071924));
  CHECK(StudentTQuantile(0.3, 1) == Near(-0.72654252800536094));  // scipy -0.7265425280172028
}

TEST_CASE("StudentTQuantile agrees with closed forms for dof 1 and 2", "[stats]") {
  for (double p : {1e-12, 0.001, 0.025, 0.2, 0.45, 0.55, 0.9, 0.975, 0.999999}) {
    // dof 1 (Cauchy): tan(pi (p - 1/2)), written as -cot(pi p) (or cot(pi (1 - p))) to stay
    // well-conditioned in double. dof 2: (2p - 1) / sqrt(2 p (1 - p)).
    const double cauchy = p < 0.5 ? -1 / std::tan(kPi * p) : 1 / std::tan(kPi * (1 - p));
    CHECK(StudentTQuantile(p, 1) == Near(cauchy, 1e-12));
    CHECK(StudentTQuantile(p, 2) == Near((2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-12));
  }
}

TEST_CASE("StudentTQuantile in the tails", "[stats]") {
  // mpmath; scipy.stats.t.ppf gives -416.1751403292461, -13.822193110834323 and
  // -209658374467.6586 (wrong by a factor of 4).
  CHECK(StudentTQuantile(1e-10, 4) == Near(-416.17514032960412));
  CHECK(StudentTQuantile(0.001, 2.5) == Near(-13.822193110865965));
  CHECK(StudentTQuantile(1e-300, 30) == Near(-50178575360.505081));
  // Beyond the double range: t ~ -(1e100)^(1/0.3).
  CHECK(StudentTQuantile(1e-100, 0.3) == -kInf);
}

TEST_CASE("StudentTQuantile inverts StudentTCdf", "[stats]") {
  for (double dof : {0.7, 1.0, 2.0, 2.5, 4.0, 30.0, 1000.0, 1e6}) {
    for (double p : {1e-20, 1e-6, 0.01, 0.3, 0.5, 0.7, 0.975, 1 - 1e-9}) {
      const double t = StudentTQuantile(p, dof);
      CHECK(StudentTCdf(t, dof) == Near(p, 1e-12));
    }
    // Symmetry, with p whose complement 1 - p is exact in double.
    for (int k : {2, 7, 20, 40}) {
      const double p = std::ldexp(1.0, -k);
      CHECK(StudentTQuantile(1 - p, dof) == Near(-StudentTQuantile(p, dof), 1e-14));
    }
  }
}

TEST_CASE("StudentTQuantile edge cases", "[stats]") {
  CHECK(StudentTQuantile(0.5, 3) == 0);
  CHECK(StudentTQuantile(0, 3) == -kInf);
  CHECK(StudentTQuantile(1, 3) == kInf);
  CHECK(std::isnan(StudentTQuantile(-0.1, 3)));
  CHECK(std::isnan(StudentTQuantile(1.1, 3)));
  CHECK(std::isnan(StudentTQuantile(kNaN, 3)));
  CHECK(std::isnan(StudentTQuantile(0.9, 0)));
  CHECK(std::isnan(StudentTQuantile(0.9, kNaN)));
}

TEST_CASE("Summarize gives mean, sample sd and the t confidence interval", "[stats]") {
  // numpy mean, std(ddof=1); ci95 = t_{0.975, n-1} (mpmath) * scipy.stats.sem(values).
  const Summary four = Summarize({1, 2, 3, 4});
  CHECK(four.n == 4);
  CHECK(four.mean == 2.5);
  CHECK(four.stddev == Near(1.2909944487358056));
  CHECK(four.ci95 == Near(2.0542602567605212));
  CHECK(four.min == 1);
  CHECK(four.max == 4);

  const Summary seven = Summarize({0.913, 0.921, 0.904, 0.917, 0.925, 0.909, 0.912});
  CHECK(seven.n == 7);
  CHECK(seven.mean == Near(0.9144285714285714, 1e-15));
  CHECK(seven.stddev == Near(0.0071614044911395966));
  CHECK(seven.ci95 == Near(0.0066231944956161798));  // scipy t.ppf * sem: 0.0066231944892464
  CHECK(seven.min == 0.904);
  CHECK(seven.max == 0.925);
}

TEST_CASE("Summarize does not lose the spread to a large offset", "[stats]") {
  const Summary shifted = Summarize({1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4});
  CHECK(shifted.mean == 1e9 + 2.5);
  CHECK(shifted.stddev == Near(1.2909944487358056));
}

TEST_CASE("Summarize edge cases", "[stats]") {
  const Summary empty = Summarize({});
  CHECK(empty.n == 0);
  CHECK(std::isnan(empty.mean));
  CHECK(std::isnan(empty.stddev));
  CHECK(std::isnan(empty.ci95));
  CHECK(std::isnan(empty.min));
  CHECK(std::isnan(empty.max));

  const Summary one = Summarize({0.25});
  CHECK(one.n == 1);
  CHECK(one.mean == 0.25);
  CHECK(one.min == 0.25);
  CHECK(one.max == 0.25);
  CHECK(std::isnan(one.stddev));
  CHECK(std::isnan(one.ci95));

  const Summary constant = Summarize({0.5, 0.5, 0.5});
  CHECK(constant.mean == 0.5);
  CHECK(constant.stddev == 0);
  CHECK(constant.ci95 == 0);

  const Summary with_nan = Summarize({1, kNaN, 3});
  CHECK(with_nan.n == 3);
  CHECK(std::isnan(with_nan.mean));
  CHECK(std::isnan(with_nan.stddev));
  CHECK(std::isnan(with_nan.ci95));
  CHECK(std::isnan(with_nan.min));
  CHECK(std::isnan(with_nan.max));
}

TEST_CASE("Welch matches scipy's ttest_ind with equal_var=False", "[stats]") {
  // scipy.stats.ttest_ind(a, b, equal_var=False) for t and p; dof from the Welch-Satterthwaite
  // formula in numpy (var(ddof=1)).
  struct Case {
    std::vector<double> a;
    std::vector<double> b;
    double t;
    double dof;
    double p;
  };
  const std::vector<Case> cases = {
      {{0.81, 0.79, 0.84, 0.80, 0.83},
       {0.74, 0.78, 0.71, 0.77, 0.76, 0.69, 0.75},
       4.621026211174347,
       9.94278681637856,
       0.000963525616583738},
      {{2.1, 2.3, 1.9, 2.2},
       {3.5, 1.0, 4.2, 0.4, 2.9, 3.3},
       -0.6848383533866905,
       5.191625920437522,
       0.5228203086095345},
      {{10.0, 10.1, 10.2},
       {1.0, 1.1, 1.2, 1.05},
       125.50998994405843,
       3.990093635500077,
       2.5083487078099737e-08},
  };
  for (const Case& c : cases) {
    const std::optional<WelchTest> test = Welch(c.a, c.b);
    REQUIRE(test.has_value());
    CHECK(test->t == Near(c.t, 1e-11));
    CHECK(test->dof == Near(c.dof, 1e-11));
    CHECK(test->p_two_sided == Near(c.p, 1e-10));
    // Swapping the samples flips the sign of t only.
    const std::optional<WelchTest> swapped = Welch(c.b, c.a);
    REQUIRE(swapped.has_value());
    CHECK(swapped->t == Near(-test->t, 1e-14));
    CHECK(swapped->dof == Near(test->dof, 1e-14));
    CHECK(swapped->p_two_sided == Near(test->p_two_sided, 1e-13));
  }
}

TEST_CASE("Welch with one constant sample is the one-sample t-test of the other", "[stats]") {
  // scipy.stats.ttest_ind([1, 2, 3, 4], [2, 2, 2], equal_var=False): t = sqrt(0.6), dof = 3.
  const std::optional<WelchTest> test = Welch({1, 2, 3, 4}, {2, 2, 2});
  REQUIRE(test.has_value());
  CHECK(test->t == Near(0.7745966692414834));
  CHECK(test->dof == Near(3));
  CHECK(test->p_two_sided == Near(0.495025346059711, 1e-11));
}

TEST_CASE("Welch edge cases", "[stats]") {
  CHECK_FALSE(Welch({}, {1, 2}).has_value());
  CHECK_FALSE(Welch({1}, {1, 2}).has_value());
  CHECK_FALSE(Welch({1, 2}, {3}).has_value());
  CHECK_FALSE(Welch({1, 1}, {1, 1, 1}).has_value());  // 0 / 0
  CHECK_FALSE(Welch({1, 1}, {2, 2, 2}).has_value());  // d / 0
  const std::optional<WelchTest> same = Welch({1, 2, 3}, {1, 2, 3});
  REQUIRE(same.has_value());
  CHECK(same->t == 0);
  CHECK(same->p_two_sided == 1);
  const std::optional<WelchTest> with_nan = Welch({1, kNaN, 3}, {1, 2, 3});
  REQUIRE(with_nan.has_value());
  CHECK(std::isnan(with_nan->t));
  CHECK(std::isnan(with_nan->dof));
  CHECK(std::isnan(with_nan->p_two_sided));
}

TEST_CASE("SignificanceMark thresholds", "[stats]") {
  CHECK(SignificanceMark(0) == "***");
  CHECK(SignificanceMark(0.00099) == "***");
  CHECK(SignificanceMark(0.001) == "**");
  CHECK(SignificanceMark(0.0099) == "**");
  CHECK(SignificanceMark(0.01) == "*");
  CHECK(SignificanceMark(0.0499) == "*");
  CHECK(SignificanceMark(0.05) == "");
  CHECK(SignificanceMark(1) == "");
  CHECK(SignificanceMark(kNaN) == "");
}

}  // namespace tae::stats
