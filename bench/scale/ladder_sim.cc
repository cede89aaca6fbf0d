// Ladders of model sizes simulated through the real fit (common/stats/ladder.h): studies whose
// loss follows a known law L = E + A (m N)^-alpha with seed noise, each analysed as taectl report
// --scale analyses one, and the error rates of what it reports.
//
//   tae-ladder-sim [--ladders N] [--seed S] [--threads T] [--only PREFIX] [--draws B]
//                  [--dump FILE --dump-ladders K]
//
// Per shape: how often the exponent's and E's 95% intervals hold the true values, how often each
// constant multiplier's interval holds its true value, how often a constant multiplier is called
// "grows" or "shrinks" (any, over the shape's constant ablations: the trend family's error), and
// how often a multiplier that fades with size is called "shrinks" (power). Each with its
// standard error. --dump writes K ladders (the shapes in turn) with the point fit as JSON lines,
// for the independent fit (tests/stats/ladder_oracle_test.py). Deterministic: the same flags print
// the same numbers.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/stats/ladder.h"

namespace {

using tae::stats::LadderData;
using tae::stats::LadderResult;

struct Shape {
  std::string name;
  std::vector<double> sizes;
  int seeds = 3;
  double sd = 0.01;  // lognormal seed noise of each run's loss
  double rho = 0;    // correlation of a seed's noise across cells (a seed fixes data order)
  double E = 2.0;
  double A = 100;
  double alpha = 0.3;
  // Per ablation: its multiplier at N, and whether it is constant (its truth) or fades.
  std::vector<std::function<double(double)>> multipliers;
  std::vector<double> constant;  // the true m of a constant ablation; NaN: not constant
  std::vector<bool> fades;
};

std::vector<double> Ladder(double first, double factor, int rungs) {
  std::vector<double> sizes;
  for (int r = 0; r < rungs; ++r) {
    sizes.push_back(first * std::pow(factor, r));
  }
  return sizes;
}

Shape Make(std::string name, std::vector<double> sizes, int seeds, double sd, double rho = 0) {
  Shape shape;
  shape.name = std::move(name);
  shape.sizes = std::move(sizes);
  shape.seeds = seeds;
  shape.sd = sd;
  shape.rho = rho;
  return shape;
}

std::vector<Shape> Shapes() {
  const auto constant = [](double m) { return [m](double) { return m; }; };
  // log m falls linearly in log N, from log 2 at the ladder's bottom to 0.4 log 2 at its top: the
  // trend model's own form.
  const auto fading = [](const std::vector<double>& sizes) {
    const double lo = std::log(sizes.front());
    const double span = std::log(sizes.back()) - lo;
    return [lo, span](double n) {
      return std::exp(std::log(2.0) * (1 - 0.6 * (std::log(n) - lo) / span));
    };
  };
  // A fade the models do not have: log m = log 2 * (N / 1e5)^-0.3, steep at first, then flat.
  const auto curved = [](double n) { return std::exp(std::log(2.0) * std::pow(n / 1e5, -0.3)); };
  std::vector<Shape> shapes;
  {
    Shape s =
        Make("4 rungs x4, 3 seeds, 1% noise, constant multipliers", Ladder(1e6, 4, 4), 3, 0.01);
    s.multipliers = {constant(1.0), constant(1.5)};
    s.constant = {1.0, 1.5};
    s.fades = {false, false};
    shapes.push_back(s);
  }
  {
    Shape s = Make("4 rungs x4, 3 seeds, 1% noise, and a fading one", Ladder(1e6, 4, 4), 3, 0.01);
    s.multipliers = {constant(1.0), constant(1.5), fading(s.sizes)};
    s.constant = {1.0, 1.5, NAN};
    s.fades = {false, false, true};
    shapes.push_back(s);
  }
  {
    Shape s = Make("5 rungs x3, 2 seeds, 2% noise, and a fading one", Ladder(1e6, 3, 5), 2, 0.02);
    s.multipliers = {constant(1.0), constant(0.7), fading(s.sizes)};
    s.constant = {1.0, 0.7, NAN};
    s.fades = {false, false, true};
    shapes.push_back(s);
  }
  {
    Shape s = Make("4 rungs x4, 5 seeds, 1% noise, seeds paired (rho 0.8), and a fading one",
                   Ladder(1e6, 4, 4), 5, 0.01, 0.8);
    s.multipliers = {constant(1.0), constant(1.25), fading(s.sizes)};
    s.constant = {1.0, 1.25, NAN};
    s.fades = {false, false, true};
    shapes.push_back(s);
  }
  {
    Shape s = Make("6 rungs x2.5, 3 seeds, 0.5% noise, alpha 0.5, constant multipliers",
                   Ladder(1e5, 2.5, 6), 3, 0.005);
    s.alpha = 0.5;
    s.A = 800;
    s.multipliers = {constant(1.0), constant(2.0)};
    s.constant = {1.0, 2.0};
    s.fades = {false, false};
    shapes.push_back(s);
  }
  {
    Shape s = Make("6 rungs x2.5, 3 seeds, 0.5% noise, alpha 0.5, a fade neither model has",
                   Ladder(1e5, 2.5, 6), 3, 0.005);
    s.alpha = 0.5;
    s.A = 800;
    s.multipliers = {constant(1.0), constant(2.0), curved};
    s.constant = {1.0, 2.0, NAN};
    s.fades = {false, false, true};
    shapes.push_back(s);
  }
  return shapes;
}

LadderData Simulate(const Shape& shape, std::mt19937_64* rng) {
  LadderData data;
  data.sizes = shape.sizes;
  data.variants = 1 + static_cast<int>(shape.multipliers.size());
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> seed_noise(shape.seeds);
  for (double& z : seed_noise) {
    z = normal(*rng);
  }
  for (int v = 0; v < data.variants; ++v) {
    for (size_t r = 0; r < shape.sizes.size(); ++r) {
      const double n = shape.sizes[r];
      const double m = v == 0 ? 1.0 : shape.multipliers[v - 1](n);
      const double law = shape.E + shape.A * std::pow(m * n, -shape.alpha);
      for (int s = 0; s < shape.seeds; ++s) {
        const double z =
            std::sqrt(shape.rho) * seed_noise[s] + std::sqrt(1 - shape.rho) * normal(*rng);
        data.points.push_back({v, static_cast<int>(r), s, law * std::exp(shape.sd * z)});
      }
    }
  }
  return data;
}

struct Counts {
  long ladders = 0;
  long fitted = 0;
  long exponent_in = 0;
  long e_in = 0;
  long multiplier_n = 0;
  long multiplier_in = 0;
  long false_any = 0;  // a constant ablation called grows/shrinks/reverses (any of them)
  long false_grows = 0;
  long false_shrinks = 0;
  long false_reverses = 0;
  long constant_n = 0;  // constant ablations judged
  long fading_n = 0;
  long fading_shrinks = 0;
  long failed_draws = 0;
  long draws = 0;
  void Add(const Counts& o) {
    ladders += o.ladders;
    fitted += o.fitted;
    exponent_in += o.exponent_in;
    e_in += o.e_in;
    multiplier_n += o.multiplier_n;
    multiplier_in += o.multiplier_in;
    false_any += o.false_any;
    false_grows += o.false_grows;
    false_shrinks += o.false_shrinks;
    false_reverses += o.false_reverses;
    constant_n += o.constant_n;
    fading_n += o.fading_n;
    fading_shrinks += o.fading_shrinks;
    failed_draws += o.failed_draws;
    draws += o.draws;
  }
};

void Judge(const Shape& shape, const LadderResult& result, Counts* c) {
  ++c->ladders;
  if (!result.ok || !result.intervals) {
    return;
  }
  ++c->fitted;
  c->draws += result.draws;
  c->failed_draws += result.failed_draws;
  c->exponent_in += result.exponent.lo <= shape.alpha && shape.alpha <= result.exponent.hi;
  c->e_in += result.irreducible.lo <= shape.E && shape.E <= result.irreducible.hi;
  bool any = false;
  for (size_t a = 0; a < shape.multipliers.size(); ++a) {
    const auto& v = result.variants[a + 1];
    if (shape.fades[a]) {
      ++c->fading_n;
      c->fading_shrinks += v.trend == "shrinks";
      continue;
    }
    if (std::isnan(shape.constant[a])) {
      continue;
    }
    ++c->multiplier_n;
    c->multiplier_in +=
        v.multiplier.lo <= shape.constant[a] && shape.constant[a] <= v.multiplier.hi;
    ++c->constant_n;
    const bool grows = v.trend == "grows";
    const bool shrinks = v.trend == "shrinks";
    const bool reverses = v.trend.rfind("reverses", 0) == 0;
    c->false_grows += grows;
    c->false_shrinks += shrinks;
    c->false_reverses += reverses;
    any = any || grows || shrinks || reverses;
  }
  c->false_any += any;
}

std::string Rate(long k, long n) {
  if (n == 0) {
    return "-";
  }
  const double p = static_cast<double>(k) / static_cast<double>(n);
  return std::to_string(p).substr(0, 5) + " ± " +
         std::to_string(std::sqrt(p * (1 - p) / static_cast<double>(n))).substr(0, 6);
}

void Dump(const Shape& shape, const LadderData& data, const LadderResult& result, FILE* out) {
  std::fprintf(out, "{\"shape\": \"%s\", \"sizes\": [", shape.name.c_str());
  for (size_t r = 0; r < data.sizes.size(); ++r) {
    std::fprintf(out, "%s%.17g", r ? ", " : "", data.sizes[r]);
  }
  std::fprintf(out, "], \"variants\": %d, \"points\": [", data.variants);
  for (size_t i = 0; i < data.points.size(); ++i) {
    const auto& p = data.points[i];
    std::fprintf(out, "%s[%d, %d, %ld, %.17g]", i ? ", " : "", p.variant, p.rung,
                 static_cast<long>(p.seed), p.value);
  }
  std::fprintf(out,
               "], \"fit\": {\"ok\": %s, \"E\": %.17g, \"A\": %.17g, \"alpha\": %.17g, "
               "\"log_multiplier\": [",
               result.fit.ok ? "true" : "false", result.fit.E, result.fit.A, result.fit.alpha);
  for (size_t v = 0; v < result.fit.log_multiplier.size(); ++v) {
    std::fprintf(out, "%s%.17g", v ? ", " : "", result.fit.log_multiplier[v]);
  }
  std::fprintf(out, "], \"loss\": %.17g}}\n", result.fit.loss);
}

}  // namespace

int main(int argc, char** argv) {
  long ladders = 2000;
  uint64_t seed = 1;
  int threads = 2;
  int draws = 1000;
  std::string only;
  std::string dump;
  long dump_ladders = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tae-ladder-sim: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--ladders") {
      ladders = std::atol(next());
    } else if (arg == "--seed") {
      seed = std::strtoull(next(), nullptr, 10);
    } else if (arg == "--threads") {
      threads = std::max(1, std::atoi(next()));
    } else if (arg == "--draws") {
      draws = std::max(1, std::atoi(next()));
    } else if (arg == "--only") {
      only = next();
    } else if (arg == "--dump") {
      dump = next();
    } else if (arg == "--dump-ladders") {
      dump_ladders = std::atol(next());
    } else {
      std::fprintf(stderr,
                   "usage: tae-ladder-sim [--ladders N] [--seed S] [--threads T] [--draws B] "
                   "[--only PREFIX] [--dump FILE [--dump-ladders K]]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  tae::stats::LadderOptions options;
  options.draws = draws;
  const std::vector<Shape> shapes = Shapes();
  if (!dump.empty()) {  // ladders and their point fits, for the scipy fit
    FILE* out = std::fopen(dump.c_str(), "w");
    if (out == nullptr) {
      std::perror(dump.c_str());
      return 1;
    }
    std::mt19937_64 rng(seed);
    for (long k = 0; k < dump_ladders; ++k) {
      const Shape& shape = shapes[k % shapes.size()];
      const LadderData data = Simulate(shape, &rng);
      LadderResult result;
      result.fit = tae::stats::FitLadder(data, false, options.fit);
      Dump(shape, data, result, out);
    }
    std::fclose(out);
    return 0;
  }
  std::printf(
      "ladders per shape: %ld; bootstrap draws: %d; trend family: the shape's 2 constant "
      "ablations, alpha 0.05\n\n",
      ladders, draws);
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& shape = shapes[si];
    if (!only.empty() && shape.name.rfind(only, 0) != 0) {
      continue;
    }
    std::vector<Counts> per(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (long k = t; k < ladders; k += threads) {
          std::mt19937_64 rng(seed * 1000003 + si * 7919 + static_cast<uint64_t>(k));
          const LadderData data = Simulate(shape, &rng);
          tae::stats::LadderOptions own = options;
          own.seed = static_cast<uint64_t>(k) + 1;
          Judge(shape, tae::stats::AnalyzeLadder(data, own), &per[t]);
        }
      });
    }
    for (std::thread& t : pool) {
      t.join();
    }
    Counts c;
    for (const Counts& p : per) {
      c.Add(p);
    }
    std::printf("%s (alpha %.2g, E %.2g)\n", shape.name.c_str(), shape.alpha, shape.E);
    std::printf("  fitted with intervals: %ld of %ld; bootstrap fits that failed: %ld of %ld\n",
                c.fitted, c.ladders, c.failed_draws, c.draws + c.failed_draws);
    std::printf("  coverage of the 95%% intervals: exponent %s, E %s, constant multipliers %s\n",
                Rate(c.exponent_in, c.fitted).c_str(), Rate(c.e_in, c.fitted).c_str(),
                Rate(c.multiplier_in, c.multiplier_n).c_str());
    std::printf(
        "  constant multipliers called a trend: any %s (grows %s, shrinks %s, reverses "
        "%s per ablation)\n",
        Rate(c.false_any, c.fitted).c_str(), Rate(c.false_grows, c.constant_n).c_str(),
        Rate(c.false_shrinks, c.constant_n).c_str(), Rate(c.false_reverses, c.constant_n).c_str());
    std::printf("  a fading multiplier called \"shrinks\": %s\n\n",
                Rate(c.fading_shrinks, c.fading_n).c_str());
    std::fflush(stdout);
  }
  return 0;
}
