// The ladder fit (common/stats/ladder.h): a law recovered from exact and from noisy data, its
// intervals by a seed bootstrap, each trend's word, the refusals and warnings.
#include "common/stats/ladder.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tae::stats {
namespace {

// L = E + A (m(N) N)^-alpha per variant, at 5 sizes from 1e5 to 1.6e7, `seeds` seeds each, with
// lognormal noise of `sd`; m(variant, N) gives each variant's multiplier.
LadderData Law(int variants, int seeds, double sd, const std::function<double(int, double)>& m,
               uint64_t seed = 7, double E = 1.7, double A = 400, double alpha = 0.34) {
  LadderData data;
  data.sizes = {1e5, 4e5, 1.6e6, 6.4e6, 2.56e7};
  data.variants = variants;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, sd);
  for (int v = 0; v < variants; ++v) {
    for (int r = 0; r < static_cast<int>(data.sizes.size()); ++r) {
      const double n = data.sizes[r];
      const double law = E + A * std::pow(m(v, n) * n, -alpha);
      for (int s = 0; s < seeds; ++s) {
        data.points.push_back({v, r, s, law * std::exp(sd > 0 ? noise(rng) : 0.0)});
      }
    }
  }
  return data;
}

TEST_CASE("exact data from the law gives the law back", "[ladder]") {
  const LadderData data = Law(3, 1, 0, [](int v, double) {
    return v == 1 ? 2.0 : v == 2 ? 0.5 : 1;
  });
  const LadderFit fit = FitLadder(data, false);
  REQUIRE(fit.ok);
  CHECK(fit.alpha == Approx(0.34).epsilon(1e-4));
  CHECK(fit.E == Approx(1.7).epsilon(1e-4));
  CHECK(fit.A == Approx(400).epsilon(1e-3));
  CHECK(std::exp(fit.log_multiplier[1]) == Approx(2.0).epsilon(1e-4));
  CHECK(std::exp(fit.log_multiplier[2]) == Approx(0.5).epsilon(1e-4));
  CHECK(PredictLadder(fit, 1, 1e6) == Approx(1.7 + 400 * std::pow(2e6, -0.34)).epsilon(1e-5));
  // The trend model finds no drift in it.
  const LadderFit trend = FitLadder(data, true, {}, &fit);
  REQUIRE(trend.ok);
  CHECK(std::fabs(trend.slope[1]) < 1e-3);
  CHECK(std::fabs(trend.slope[2]) < 1e-3);
}

TEST_CASE("a constant multiplier: the exponent interval holds the truth, and no trend",
          "[ladder]") {
  const LadderData data = Law(2, 4, 0.01, [](int v, double) { return v == 1 ? 1.5 : 1; });
  const LadderResult result = AnalyzeLadder(data);
  REQUIRE(result.ok);
  REQUIRE(result.intervals);
  CHECK(result.draws + result.failed_draws == 1000);
  CHECK(result.exponent.lo < 0.34);
  CHECK(result.exponent.hi > 0.34);
  CHECK(result.exponent.lo < result.exponent.value);
  CHECK(result.exponent.value < result.exponent.hi);
  CHECK(result.variants[1].multiplier.lo < 1.5);
  CHECK(result.variants[1].multiplier.hi > 1.5);
  CHECK(result.variants[1].multiplier.lo > 1);  // 1.5x with 1% noise is decided
  CHECK(result.variants[1].trend == "none");
  CHECK(result.variants[0].trend.empty());
  CHECK(result.trend_level == Approx(0.05));
  CHECK(result.warnings.empty());
  // The same data, the same intervals: the draws are seeded.
  const LadderResult again = AnalyzeLadder(data);
  CHECK(again.exponent.lo == result.exponent.lo);
}

TEST_CASE("a multiplier that fades with size shrinks, and one that grows grows", "[ladder]") {
  // m(N) = 2 at 1e5 falling toward 1 (log m halves per 16x), and the reverse.
  const auto fading = [](int v, double n) {
    return v == 1 ? std::exp(std::log(2.0) * std::pow(n / 1e5, -0.25)) : 1.0;
  };
  const auto growing = [](int v, double n) {
    return v == 1 ? std::exp(0.1 * std::pow(n / 1e5, 0.3)) : 1.0;
  };
  const LadderResult fades = AnalyzeLadder(Law(2, 4, 0.005, fading));
  REQUIRE(fades.ok);
  CHECK(fades.variants[1].trend == "shrinks");
  CHECK(fades.variants[1].slope.hi < 0);
  const LadderResult grows = AnalyzeLadder(Law(2, 4, 0.005, growing));
  REQUIRE(grows.ok);
  CHECK(grows.variants[1].trend == "grows");
  // A worse variant whose deficit grows is "grows" too: |log m| increases.
  const LadderResult worse =
      AnalyzeLadder(Law(2, 4, 0.005, [&](int v, double n) { return 1 / growing(v, n); }));
  CHECK(worse.variants[1].trend == "grows");
}

TEST_CASE("a multiplier that crosses 1 inside the ladder reverses there", "[ladder]") {
  // log m = 0.5 log(N / 1.6e6) * -0.4: better below 1.6M, worse above.
  const LadderResult result = AnalyzeLadder(Law(2, 4, 0.005, [](int v, double n) {
    return v == 1 ? std::exp(-0.4 * std::log(n / 1.6e6)) : 1.0;
  }));
  REQUIRE(result.ok);
  CHECK(result.variants[1].trend.rfind("reverses near N ≈ ", 0) == 0);
  CHECK(result.variants[1].crossing == Approx(1.6e6).epsilon(0.2));
}

TEST_CASE("the trend verdicts are a family: Bonferroni over the ablations", "[ladder]") {
  const LadderResult result =
      AnalyzeLadder(Law(4, 3, 0.01, [](int v, double) { return 1.0 + 0.2 * v; }));
  REQUIRE(result.ok);
  CHECK(result.trend_level == Approx(0.05 / 3));
  for (int v = 1; v < 4; ++v) {
    INFO(v);
    CHECK(result.variants[v].slope.hi - result.variants[v].slope.lo > 0);
  }
}

TEST_CASE("one seed per cell: estimates, no intervals, and the reason", "[ladder]") {
  const LadderResult result =
      AnalyzeLadder(Law(2, 1, 0.01, [](int v, double) { return v == 1 ? 1.5 : 1; }));
  REQUIRE(result.ok);
  CHECK_FALSE(result.intervals);
  CHECK(std::isnan(result.exponent.lo));
  CHECK(result.variants[1].trend.empty());
  CHECK(result.warnings.back().find("at least 2 seeds") != std::string::npos);
  CHECK(result.draws == 0);
}

TEST_CASE("refusals: too few rungs, no values, non-positive sizes", "[ladder]") {
  LadderData data = Law(2, 2, 0.01, [](int, double) { return 1.0; });
  LadderData one = data;
  one.points.erase(
      std::remove_if(one.points.begin(), one.points.end(),
                     [](const LadderPoint& p) { return p.variant == 1 && p.rung > 0; }),
      one.points.end());
  const LadderResult missing = AnalyzeLadder(one);
  CHECK_FALSE(missing.ok);
  CHECK(missing.why == "variant 1 has values at fewer than 2 rungs");
  LadderData bad = data;
  bad.sizes[0] = 0;
  CHECK(FitLadder(bad, false).why == "every rung needs a positive size N");
  LadderData nan = data;
  for (LadderPoint& p : nan.points) {
    p.value = p.variant == 0 ? std::nan("") : p.value;
  }
  CHECK(FitLadder(nan, false).why == "the baseline has values at fewer than 2 rungs");
  // A diverged seed (inf) is left out, not fitted.
  LadderData inf = data;
  inf.points[0].value = INFINITY;
  CHECK(FitLadder(inf, false).ok);
}

TEST_CASE("warnings: few rungs, less than a decade", "[ladder]") {
  LadderData data = Law(2, 3, 0.01, [](int v, double) { return v == 1 ? 1.3 : 1; });
  LadderData narrow;
  narrow.variants = 2;
  narrow.sizes = {1e5, 4e5, 1.6e6};
  for (const LadderPoint& p : data.points) {
    if (p.rung < 3) {
      narrow.points.push_back(p);
    }
  }
  const LadderResult result = AnalyzeLadder(narrow);
  REQUIRE(result.ok);
  REQUIRE(result.warnings.size() == 1);
  CHECK(result.warnings[0].find("3 rungs") == 0);
  narrow.sizes = {1e5, 2e5, 4e5};
  const LadderResult short_range = AnalyzeLadder(narrow);
  REQUIRE(short_range.warnings.size() == 2);
  CHECK(short_range.warnings[1].find("less than one decade of N (100K to 400K)") !=
        std::string::npos);
}

TEST_CASE("extrapolation: within reach with an interval, refused far beyond", "[ladder]") {
  const LadderData data = Law(2, 4, 0.01, [](int v, double) { return v == 1 ? 1.5 : 1; });
  const LadderResult result = AnalyzeLadder(data);
  REQUIRE(result.ok);
  const LadderExtrapolation at = ExtrapolateLadder(data, result, 1, 1.2e8);
  REQUIRE(at.ok);
  const double truth = 400 * (std::pow(1.5 * 1.2e8, -0.34) - std::pow(1.2e8, -0.34));
  CHECK(at.effect.value < 0);
  CHECK(at.effect.lo < truth);
  CHECK(at.effect.hi > truth);
  CHECK_FALSE(at.trend);
  const LadderExtrapolation far = ExtrapolateLadder(data, result, 1, 1e9);
  CHECK_FALSE(far.ok);
  CHECK(far.why.find("beyond the ladder's reach") != std::string::npos);
  CHECK_FALSE(ExtrapolateLadder(data, result, 1, 1e3).ok);
  CHECK_FALSE(ExtrapolateLadder(data, result, 5, 1e6).ok);
}

}  // namespace
}  // namespace tae::stats
