#include "server/curves/curves.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "catch2/catch.hpp"
#include "common/stats/stats.h"

namespace tae::curves {
namespace {

RunSeries Series(int64_t id, const std::string& variant, std::vector<double> x,
                 std::vector<double> y) {
  return {id, variant, std::move(x), std::move(y)};
}

std::vector<double> Steps(int n) {
  std::vector<double> x;
  for (int i = 1; i <= n; ++i) {
    x.push_back(i);
  }
  return x;
}

TEST_CASE("a band is the mean over seeds with a t-based 95% CI and the runs' min and max") {
  Curves c = Build({Series(1, "a", {1, 2}, {1.0, 4.0}), Series(2, "a", {1, 2}, {3.0, 8.0}),
                    Series(3, "a", {1, 2}, {2.0, 6.0})},
                   {"a"}, {1000, 0});
  REQUIRE(c.x == std::vector<double>{1, 2});
  REQUIRE(c.bands.size() == 1);
  const Band& band = c.bands[0];
  CHECK(band.runs == std::vector<int64_t>{1, 2, 3});
  CHECK(band.n == std::vector<int>{3, 3});
  CHECK(band.n_max == 3);
  CHECK(*band.mean[0] == Approx(2.0));
  CHECK(*band.mean[1] == Approx(6.0));
  // sd of {1,3,2} = 1, n = 3: half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321
  const double h = stats::StudentTQuantile(0.975, 2) / std::sqrt(3.0);
  CHECK(*band.hi[0] - *band.mean[0] == Approx(h));
  CHECK(*band.mean[0] - *band.lo[0] == Approx(h));
  CHECK(*band.min[0] == 1.0);
  CHECK(*band.max[1] == 8.0);
}

TEST_CASE("downsampling keeps a one-step spike as the bucket's max") {
  std::vector<double> y(10000, 1.0);
  y[5678] = 50.0;
  Curves c = Build({Series(1, "a", Steps(10000), y)}, {"a"}, {200, 0});
  REQUIRE(c.x.size() == 200);
  double top = 0;
  double top_mean = 0;
  for (size_t i = 0; i < c.x.size(); ++i) {
    top = std::max(top, *c.bands[0].max[i]);
    top_mean = std::max(top_mean, *c.bands[0].mean[i]);
  }
  CHECK(top == 50.0);     // the spike survives in the envelope
  CHECK(top_mean < 2.0);  // while the bucket mean dilutes it (50 steps per bucket)
  CHECK(c.x.back() == 10000);
}

TEST_CASE("integer x that fit are not bucketed, and empty steps are left out") {
  // Eval every 100 steps: 10 points, 1000 buckets asked: 10 x positions, not 1000.
  std::vector<double> x, y;
  for (int s = 100; s <= 1000; s += 100) {
    x.push_back(s);
    y.push_back(s / 100.0);
  }
  Curves c = Build({Series(1, "a", x, y)}, {"a"}, {1000, 0});
  CHECK(c.x == x);
  CHECK(*c.bands[0].mean[9] == 10.0);
}

TEST_CASE("variants share one x grid, with no value where a variant has no point") {
  Curves c = Build({Series(1, "a", {1, 2, 3}, {1, 1, 1}), Series(2, "b", {1}, {5})}, {"a", "b"},
                   {1000, 0});
  REQUIRE(c.x.size() == 3);
  REQUIRE(c.bands.size() == 2);
  CHECK(c.bands[1].mean[0] == 5.0);
  CHECK_FALSE(c.bands[1].mean[1].has_value());
  CHECK(c.bands[1].n == std::vector<int>{1, 0, 0});
  CHECK(c.bands[1].n_max == 1);
}

TEST_CASE("n drops where a seed's run stops early") {
  Curves c = Build({Series(1, "a", {1, 2, 3}, {1, 1, 1}), Series(2, "a", {1, 2}, {3, 3})}, {"a"},
                   {1000, 0});
  CHECK(c.bands[0].n == std::vector<int>{2, 2, 1});
  CHECK(*c.bands[0].mean[2] == 1.0);
  CHECK(*c.bands[0].lo[2] == 1.0);  // one run: no interval
}

TEST_CASE("smoothing is a debiased EMA over the full series, before downsampling") {
  const std::vector<double> s = SmoothEma({2, 4}, 0.5);
  CHECK(s[0] == Approx(2.0));                          // debiased: not pulled to 0
  CHECK(s[1] == Approx((0.25 * 2 + 0.5 * 4) / 0.75));  // (w(1-w)y1 + (1-w)y2) / (1 - w^2)
  // An alternating series smoothed then downsampled to one bucket per 2 steps differs from
  // downsampling alone only through the EMA: the raw bucket means are all 0.5.
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) {
    y.push_back(i % 2);
  }
  Curves raw = Build({Series(1, "a", Steps(100), y)}, {"a"}, {50, 0});
  Curves smooth = Build({Series(1, "a", Steps(100), y)}, {"a"}, {50, 0.9});
  CHECK(*raw.bands[0].max[10] == 1.0);
  CHECK(*smooth.bands[0].max[10] < 0.8);
  CHECK(*smooth.bands[0].min[10] > 0.2);
}

TEST_CASE("non-finite values are skipped, not averaged") {
  Curves c =
      Build({Series(1, "a", {1, 2}, {1, NAN}), Series(2, "a", {1, 2}, {3, 5})}, {"a"}, {1000, 0});
  CHECK(*c.bands[0].mean[0] == 2.0);
  CHECK(*c.bands[0].mean[1] == 5.0);
  CHECK(c.bands[0].n[1] == 1);
}

TEST_CASE("delta mode subtracts the baseline band and combines the half-widths") {
  Curves c = Build({Series(1, "base", {1}, {1}), Series(2, "base", {1}, {3}),
                    Series(3, "v", {1}, {5}), Series(4, "v", {1}, {9})},
                   {"base", "v"}, {1000, 0});
  const double hb = *c.bands[0].hi[0] - *c.bands[0].mean[0];
  const double hv = *c.bands[1].hi[0] - *c.bands[1].mean[0];
  ToDelta(&c, [](const std::string&) { return std::string("base"); });
  CHECK(*c.bands[1].mean[0] == Approx(7.0 - 2.0));
  CHECK(*c.bands[1].hi[0] - *c.bands[1].mean[0] == Approx(std::sqrt(hb * hb + hv * hv)));
  CHECK(*c.bands[0].mean[0] == Approx(0.0));
  CHECK_FALSE(c.bands[1].min[0].has_value());
}

TEST_CASE("no points: the bands name their runs and the grid is empty") {
  Curves c = Build({Series(4, "a", {}, {})}, {"a", "b"}, {1000, 0});
  CHECK(c.x.empty());
  CHECK(c.bands[0].runs == std::vector<int64_t>{4});
  CHECK(c.bands[1].runs.empty());
}

}  // namespace
}  // namespace tae::curves

namespace tae::curves {
namespace {

TEST_CASE("a zoomed curve draws only its x range, smoothed over the whole series") {
  std::vector<double> x, y;
  for (int i = 1; i <= 100; ++i) {
    x.push_back(i);
    y.push_back(i % 2);
  }
  Curves whole = Build({{1, "a", x, y}}, {"a"}, {1000, 0.9});
  Options zoom{1000, 0.9, 40, 60};
  Curves part = Build({{1, "a", x, y}}, {"a"}, zoom);
  REQUIRE(part.x.size() == 21);
  CHECK(part.x.front() == 40);
  CHECK(*part.bands[0].mean[0] == *whole.bands[0].mean[39]);  // step 40, same EMA
}

}  // namespace
}  // namespace tae::curves

namespace tae::curves {
namespace {

void CheckSameCurves(const Curves& a, const Curves& b) {
  REQUIRE(a.x == b.x);
  REQUIRE(a.bands.size() == b.bands.size());
  for (size_t i = 0; i < a.bands.size(); ++i) {
    const Band& p = a.bands[i];
    const Band& q = b.bands[i];
    CHECK(p.variant == q.variant);
    CHECK(p.runs == q.runs);
    CHECK(p.n == q.n);
    CHECK(p.n_max == q.n_max);
    CHECK(p.mean == q.mean);
    CHECK(p.lo == q.lo);
    CHECK(p.hi == q.hi);
    CHECK(p.min == q.min);
    CHECK(p.max == q.max);
  }
}

// Ascending x of one kind: small whole steps, whole steps wider than the buckets, whole numbers
// past 2^53, negative ones, fractions.
std::vector<double> RandomX(std::mt19937_64& rng, int kind, int n) {
  std::uniform_int_distribution<int> gap(1, 7);
  double x = kind == 2 ? 9.1e15 : kind == 3 ? -5000 : 0;
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    switch (kind) {
      case 0:
      case 3:
        x += gap(rng);
        break;
      case 1:
        x += 40 * gap(rng);
        break;
      case 2:
        x += 2 * gap(rng);  // every double from 2^53 to 2^54 is even
        break;
      default:
        x += 0.37 * gap(rng);
    }
    out.push_back(x);
  }
  return out;
}

TEST_CASE("a range given by its ends draws what the same range read from every point does") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 1);
  for (int kind = 0; kind < 5; ++kind) {
    std::vector<RunSeries> series;
    for (int run = 1; run <= 12; ++run) {
      std::vector<double> x = RandomX(rng, kind, 50 + run * 7);
      std::vector<double> y;
      for (size_t i = 0; i < x.size(); ++i) {
        y.push_back(noise(rng));
      }
      series.push_back({run, run % 3 == 0 ? "b" : "a", x, y});
    }
    for (int buckets : {1, 40, 2000}) {
      INFO("x of kind " << kind << ", " << buckets << " buckets");
      const Curves from_points = Build(series, {"a", "b"}, {buckets, 0});
      Builder from_ends({"a", "b"}, {buckets, 0});
      CHECK_FALSE(from_ends.Zoomed());
      for (const RunSeries& s : series) {
        bool whole = true;
        for (double v : s.x) {
          whole = whole && v == std::floor(v);
        }
        from_ends.RangeSpan(s.x.front(), s.x.back(), whole);
      }
      for (const RunSeries& s : series) {
        from_ends.Add(s.run_id, s.variant, s.x, s.y);
      }
      CheckSameCurves(from_points, from_ends.Finish());
    }
  }
  CHECK(Builder({"a"}, {100, 0, 1, 2}).Zoomed());
  CHECK(Builder({"a"}, {100, 0, -std::numeric_limits<double>::infinity(), 2}).Zoomed());
}

TEST_CASE("buckets of equal width take each x by floor, the largest x in the last one") {
  std::mt19937_64 rng(9);
  for (int kind = 0; kind < 5; ++kind) {
    for (int buckets : {3, 40, 997}) {
      const std::vector<double> x = RandomX(rng, kind, 3000);
      const Curves c =
          Build({{1, "a", x, std::vector<double>(x.size(), 1.0)}}, {"a"}, {buckets, 0});
      // The grid as floor((x - lo) * buckets / span), clamped, gives it; whole x whose span
      // fits take a bucket each.
      const double lo = x.front();
      const double span = x.back() - lo;
      bool whole = true;
      for (double v : x) {
        whole = whole && v == std::floor(v);
      }
      std::vector<double> grid;
      int last = -1;
      for (double v : x) {
        int b = 0;
        if (whole && span + 1 <= buckets) {
          b = static_cast<int>(v - lo);
        } else {
          b = std::clamp(static_cast<int>(std::floor((v - lo) * (buckets / span))), 0, buckets - 1);
        }
        if (b != last) {
          grid.push_back(v);
          last = b;
        } else {
          grid.back() = v;
        }
      }
      INFO("x of kind " << kind << ", " << buckets << " buckets");
      CHECK(c.x == grid);
      CHECK(c.x.back() == x.back());
    }
  }
}

}  // namespace
}  // namespace tae::curves
