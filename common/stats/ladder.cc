#include "common/stats/ladder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/stats/stats.h"

namespace tae::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The points of a fit: log N - log N_ref, log value, and the variant.
struct Obs {
  int variant = 0;
  double n = 0;
  double log_y = 0;
};

// The parameter vector: [log E, log A at N_ref, alpha, mu_1.., (beta_1..)].
struct Layout {
  int variants = 1;
  bool trend = false;
  int size() const { return 3 + (variants - 1) * (trend ? 2 : 1); }
  int Mu(int v) const { return v == 0 ? -1 : 2 + v; }
  int Beta(int v) const { return v == 0 || !trend ? -1 : 2 + (variants - 1) + v; }
};

struct Bounds {
  double e_lo = 0;
  double e_hi = 0;
};

double Huber(double r, double delta) {
  const double a = std::fabs(r);
  return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

// The residual log L-hat - log y and its gradient in the parameters.
double Residual(const Layout& layout, const std::vector<double>& p, const Obs& o,
                std::vector<double>* grad) {
  const double mu = layout.Mu(o.variant) >= 0 ? p[layout.Mu(o.variant)] : 0;
  const double beta = layout.Beta(o.variant) >= 0 ? p[layout.Beta(o.variant)] : 0;
  const double x = o.n + mu + beta * o.n;
  const double E = std::exp(p[0]);
  const double t = std::exp(p[1] - p[2] * x);
  const double L = E + t;
  if (grad != nullptr) {
    std::fill(grad->begin(), grad->end(), 0.0);
    (*grad)[0] = E / L;
    (*grad)[1] = t / L;
    (*grad)[2] = -t * x / L;
    if (layout.Mu(o.variant) >= 0) {
      (*grad)[layout.Mu(o.variant)] = -p[2] * t / L;
    }
    if (layout.Beta(o.variant) >= 0) {
      (*grad)[layout.Beta(o.variant)] = -p[2] * t * o.n / L;
    }
  }
  return std::log(L) - o.log_y;
}

double Objective(const Layout& layout, const std::vector<double>& p, const std::vector<Obs>& obs,
                 double delta) {
  double total = 0;
  for (const Obs& o : obs) {
    total += Huber(Residual(layout, p, o, nullptr), delta);
  }
  return std::isfinite(total) ? total : std::numeric_limits<double>::infinity();
}

void Clamp(const Bounds& bounds, const Layout& layout, std::vector<double>* p) {
  (*p)[0] = std::clamp((*p)[0], bounds.e_lo, bounds.e_hi);
  (*p)[1] = std::clamp((*p)[1], -50.0, 50.0);
  (*p)[2] = std::clamp((*p)[2], 1e-4, 10.0);
  for (int i = 3; i < layout.size(); ++i) {
    (*p)[i] = std::clamp((*p)[i], -20.0, 20.0);
  }
}

// Solves a x = b (n x n, row-major) by Gaussian elimination with partial pivoting; false when
// singular.
bool Solve(std::vector<double> a, std::vector<double> b, int n, std::vector<double>* x) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row) {
      if (std::fabs(a[row * n + col]) > std::fabs(a[pivot * n + col])) {
        pivot = row;
      }
    }
    if (!(std::fabs(a[pivot * n + col]) > 1e-300)) {
      return false;
    }
    if (pivot != col) {
      for (int k = 0; k < n; ++k) {
        std::swap(a[col * n + k], a[pivot * n + k]);
      }
      std::swap(b[col], b[pivot]);
    }
    for (int row = col + 1; row < n; ++row) {
      const double f = a[row * n + col] / a[col * n + col];
      for (int k = col; k < n; ++k) {
        a[row * n + k] -= f * a[col * n + k];
      }
      b[row] -= f * b[col];
    }
  }
  x->assign(n, 0.0);
  for (int row = n - 1; row >= 0; --row) {
    double s = b[row];
    for (int k = row + 1; k < n; ++k) {
      s -= a[row * n + k] * (*x)[k];
    }
    (*x)[row] = s / a[row * n + row];
  }
  return true;
}

struct Minimum {
  std::vector<double> p;
  double loss = std::numeric_limits<double>::infinity();
  int iterations = 0;
  bool converged = false;
};

// Levenberg-Marquardt on the Huber objective with IRLS weights (the Huber weight of each
// residual, min(1, delta / |r|), in the Gauss-Newton matrix; its gradient exact).
Minimum Minimise(const Layout& layout, const Bounds& bounds, const std::vector<Obs>& obs,
                 std::vector<double> p, const LadderFitOptions& options) {
  const int n = layout.size();
  Clamp(bounds, layout, &p);
  Minimum best{p, Objective(layout, p, obs, options.huber_delta), 0, false};
  if (!std::isfinite(best.loss)) {
    return best;
  }
  double lambda = 1e-3;
  std::vector<double> grad_i(n);
  std::vector<double> h(n * n);
  std::vector<double> g(n);
  std::vector<double> step;
  for (int it = 0; it < options.max_iterations; ++it) {
    best.iterations = it + 1;
    std::fill(h.begin(), h.end(), 0.0);
    std::fill(g.begin(), g.end(), 0.0);
    for (const Obs& o : obs) {
      const double r = Residual(layout, best.p, o, &grad_i);
      const double a = std::fabs(r);
      const double w = a <= options.huber_delta ? 1.0 : options.huber_delta / a;
      for (int i = 0; i < n; ++i) {
        g[i] += w * r * grad_i[i];
        for (int j = 0; j < n; ++j) {
          h[i * n + j] += w * grad_i[i] * grad_i[j];
        }
      }
    }
    bool accepted = false;
    while (lambda < 1e12) {
      std::vector<double> damped = h;
      for (int i = 0; i < n; ++i) {
        damped[i * n + i] += lambda * h[i * n + i] + 1e-12;
      }
      std::vector<double> neg_g(n);
      for (int i = 0; i < n; ++i) {
        neg_g[i] = -g[i];
      }
      if (Solve(std::move(damped), std::move(neg_g), n, &step)) {
        std::vector<double> trial = best.p;
        for (int i = 0; i < n; ++i) {
          trial[i] += step[i];
        }
        Clamp(bounds, layout, &trial);
        const double loss = Objective(layout, trial, obs, options.huber_delta);
        if (loss < best.loss) {
          const double gain = best.loss - loss;
          best.p = std::move(trial);
          best.loss = loss;
          lambda = std::max(1e-9, lambda / 3);
          accepted = true;
          if (gain <= 1e-13 * (1 + best.loss)) {
            best.converged = true;
            return best;
          }
          break;
        }
      }
      lambda *= 4;
    }
    if (!accepted) {  // no step along the damped direction lowers it: a minimum
      best.converged = true;
      return best;
    }
  }
  best.converged = true;  // still moving by less each step; the caller compares the losses
  return best;
}

LadderFit ToFit(const Layout& layout, const Minimum& m, double c) {
  LadderFit fit;
  fit.ok = m.converged && std::isfinite(m.loss);
  fit.why = fit.ok ? "" : "the fit did not converge";
  fit.E = std::exp(m.p[0]);
  fit.alpha = m.p[2];
  fit.A = std::exp(m.p[1] + m.p[2] * c);
  fit.log_size_ref = c;
  fit.loss = m.loss;
  fit.iterations = m.iterations;
  fit.log_multiplier.assign(layout.variants, 0.0);
  for (int v = 1; v < layout.variants; ++v) {
    fit.log_multiplier[v] = m.p[layout.Mu(v)];
  }
  if (layout.trend) {
    fit.slope.assign(layout.variants, 0.0);
    for (int v = 1; v < layout.variants; ++v) {
      fit.slope[v] = m.p[layout.Beta(v)];
    }
  }
  return fit;
}

std::vector<double> FromFit(const Layout& layout, const LadderFit& fit) {
  std::vector<double> p(layout.size(), 0.0);
  p[0] = std::log(fit.E);
  p[2] = fit.alpha;
  p[1] = std::log(fit.A) - fit.alpha * fit.log_size_ref;
  for (int v = 1; v < layout.variants; ++v) {
    p[layout.Mu(v)] = v < static_cast<int>(fit.log_multiplier.size()) ? fit.log_multiplier[v] : 0;
    if (layout.trend) {
      p[layout.Beta(v)] = v < static_cast<int>(fit.slope.size()) ? fit.slope[v] : 0;
    }
  }
  return p;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) {
    return kNaN;
  }
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (at - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

// The percentile interval of the draws at 1 - level_alpha, widened about `value` by
// t_{dof} / z at that level: the draws' spread rests on each cell's few seeds (dof: the points'
// degrees of freedom within their cells), as a t interval's does.
Estimate Interval(double value, const std::vector<double>& draws, double level_alpha, double dof) {
  if (draws.empty()) {
    return {value, kNaN, kNaN};
  }
  const double p = 1 - level_alpha / 2;
  const double z = StudentTQuantile(p, std::numeric_limits<double>::infinity());
  const double widen = dof > 0 ? StudentTQuantile(p, dof) / z : 1;
  const double lo = Quantile(draws, level_alpha / 2);
  const double hi = Quantile(draws, p);
  return {value, value - widen * (value - lo), value + widen * (hi - value)};
}

std::string SizeText(double n) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int unit = 0;
  while (std::fabs(n) >= 1000 && unit < 4) {
    n /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.3g%s", n, units[unit]);
}

// The slope's interval: estimate +- t_{dof} * the draws' standard deviation. Its level is the
// trend family's (alpha / K), far in the tails, where a few draws' percentiles are noisy.
Estimate SlopeInterval(double value, const std::vector<double>& draws, double level_alpha,
                       double dof) {
  if (draws.size() < 2) {
    return {value, kNaN, kNaN};
  }
  double mean = 0;
  for (double d : draws) {
    mean += d / static_cast<double>(draws.size());
  }
  double ss = 0;
  for (double d : draws) {
    ss += (d - mean) * (d - mean);
  }
  const double sd = std::sqrt(ss / static_cast<double>(draws.size() - 1));
  const double t = StudentTQuantile(1 - level_alpha / 2,
                                    dof > 0 ? dof : std::numeric_limits<double>::infinity());
  return {value, value - t * sd, value + t * sd};
}

}  // namespace

double PredictLadder(const LadderFit& fit, int variant, double size) {
  const double log_n = std::log(size);
  const double mu =
      variant < static_cast<int>(fit.log_multiplier.size()) ? fit.log_multiplier[variant] : 0;
  const double beta = variant < static_cast<int>(fit.slope.size()) ? fit.slope[variant] : 0;
  const double x = log_n + mu + beta * (log_n - fit.log_size_ref);
  return fit.E + std::exp(std::log(fit.A) - fit.alpha * x);
}

LadderFit FitLadder(const LadderData& data, bool trend, const LadderFitOptions& options,
                    const LadderFit* start) {
  LadderFit none;
  const int rungs = static_cast<int>(data.sizes.size());
  if (rungs < 2 || data.variants < 1) {
    none.why = "a ladder needs at least 2 rungs";
    return none;
  }
  double c = 0;
  for (double size : data.sizes) {
    if (!(size > 0) || !std::isfinite(size)) {
      none.why = "every rung needs a positive size N";
      return none;
    }
    c += std::log(size) / rungs;
  }
  std::vector<Obs> obs;
  double min_y = std::numeric_limits<double>::infinity();
  double max_y = 0;
  std::vector<std::set<int>> rungs_of(data.variants);
  for (const LadderPoint& point : data.points) {
    if (point.variant < 0 || point.variant >= data.variants || point.rung < 0 ||
        point.rung >= rungs || !(point.value > 0) || !std::isfinite(point.value)) {
      continue;
    }
    obs.push_back(Obs{point.variant, std::log(data.sizes[point.rung]) - c, std::log(point.value)});
    min_y = std::min(min_y, point.value);
    max_y = std::max(max_y, point.value);
    rungs_of[point.variant].insert(point.rung);
  }
  for (int v = 0; v < data.variants; ++v) {
    if (rungs_of[v].size() < 2) {
      none.why = v == 0 ? "the baseline has values at fewer than 2 rungs"
                        : absl::StrFormat("variant %d has values at fewer than 2 rungs", v);
      return none;
    }
  }
  const Layout layout{data.variants, trend};
  const Bounds bounds{std::log(min_y) - 30, std::log(max_y) + 1};
  Minimum best;
  if (start != nullptr && start->ok) {
    best = Minimise(layout, bounds, obs, FromFit(layout, *start), options);
  } else {
    for (double alpha : {0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5}) {
      for (double fraction : {0.0, 0.5, 0.8, 0.95}) {
        const double E = fraction * min_y;
        std::vector<double> p(layout.size(), 0.0);
        p[0] = fraction > 0 ? std::log(E) : bounds.e_lo;
        p[2] = alpha;
        double sum = 0;
        for (const Obs& o : obs) {  // log A at N_ref for this alpha and E, multipliers at 1
          sum += std::log(std::max(std::exp(o.log_y) - E, 1e-12 * min_y)) + alpha * o.n;
        }
        p[1] = sum / static_cast<double>(obs.size());
        Minimum m = Minimise(layout, bounds, obs, std::move(p), options);
        if (m.converged && m.loss < best.loss) {
          best = std::move(m);
        }
      }
    }
  }
  if (best.p.empty()) {
    none.why = "no start of the fit converged";
    return none;
  }
  return ToFit(layout, best, c);
}

namespace {

// The cells of a ladder: (variant, rung) -> its points with a value.
using Cells = std::map<std::pair<int, int>, std::vector<const LadderPoint*>>;

Cells CellsOf(const LadderData& data) {
  Cells cells;
  for (const LadderPoint& point : data.points) {
    if (point.value > 0 && std::isfinite(point.value)) {
      cells[{point.variant, point.rung}].push_back(&point);
    }
  }
  return cells;
}

// One bootstrap draw of the data: every cell keeps its mean log value and draws its seeds'
// deviations from it anew, with replacement, from the pooled deviations of all cells (each
// rescaled by sqrt(n / (n - 1)), n its cell's seeds, so that 2 or 3 seeds do not shrink them).
// Pooled: a cell's own 2 or 3 seeds would give it as many distinct draws and a spread estimated on
// 1 or 2 degrees of freedom, and the intervals then fall short (bench/scale/ladder_sim.cc).
LadderData Resample(const LadderData& data, const Cells& cells,
                    const std::vector<double>& deviations, std::mt19937_64* rng) {
  LadderData out;
  out.sizes = data.sizes;
  out.variants = data.variants;
  std::uniform_int_distribution<size_t> pick(0, deviations.size() - 1);
  for (const auto& [cell, points] : cells) {
    double mean = 0;
    for (const LadderPoint* p : points) {
      mean += std::log(p->value) / static_cast<double>(points.size());
    }
    for (const LadderPoint* source : points) {
      LadderPoint point = *source;
      point.value = std::exp(mean + deviations[pick(*rng)]);
      out.points.push_back(point);
    }
  }
  return out;
}

std::vector<double> Deviations(const Cells& cells) {
  std::vector<double> deviations;
  for (const auto& [cell, points] : cells) {
    const size_t n = points.size();
    if (n < 2) {
      continue;
    }
    double mean = 0;
    for (const LadderPoint* p : points) {
      mean += std::log(p->value) / static_cast<double>(n);
    }
    const double inflate = std::sqrt(static_cast<double>(n) / static_cast<double>(n - 1));
    for (const LadderPoint* p : points) {
      deviations.push_back(inflate * (std::log(p->value) - mean));
    }
  }
  return deviations;
}

}  // namespace

LadderResult AnalyzeLadder(const LadderData& data, const LadderOptions& options) {
  LadderResult result;
  result.variants.resize(data.variants);
  result.fit = FitLadder(data, false, options.fit);
  if (!result.fit.ok) {
    result.why = result.fit.why;
    return result;
  }
  const int rungs = static_cast<int>(data.sizes.size());
  if (rungs < 4) {
    result.warnings.push_back(absl::StrFormat(
        "%d rungs: the exponent and each trend rest on few sizes (4 or more are advised)", rungs));
  }
  if (data.sizes.back() / data.sizes.front() < 10) {
    result.warnings.push_back(absl::StrFormat(
        "the ladder spans less than one decade of N (%s to %s): its exponent is poorly "
        "determined",
        SizeText(data.sizes.front()), SizeText(data.sizes.back())));
  }
  const bool trend = rungs >= 3 && data.variants > 1;
  if (trend) {
    result.trend_fit = FitLadder(data, true, options.fit, &result.fit);
  } else if (data.variants > 1) {
    result.warnings.push_back("2 rungs: no trend (a multiplier's drift needs 3 sizes or more)");
  }
  std::map<std::pair<int, int>, int> counts;
  for (const LadderPoint& point : data.points) {
    if (point.value > 0 && std::isfinite(point.value)) {
      ++counts[{point.variant, point.rung}];
    }
  }
  result.intervals = !counts.empty() && std::all_of(counts.begin(), counts.end(),
                                                    [](const auto& c) { return c.second >= 2; });
  double dof = 0;  // within the cells: what the seeds' spread is estimated from
  for (const auto& [cell, n] : counts) {
    dof += n - 1;
  }
  if (!result.intervals) {
    result.warnings.push_back(
        "no intervals: a seed bootstrap needs at least 2 seeds of every variant at every rung");
  }
  const int ablations = data.variants - 1;
  result.dof = dof;
  result.trend_level = ablations > 0 ? options.alpha / ablations : options.alpha;
  std::vector<double> alphas;
  std::vector<double> es;
  std::vector<std::vector<double>> mus(data.variants);
  std::vector<std::vector<double>> betas(data.variants);
  if (result.intervals) {
    std::mt19937_64 rng(options.seed);
    const Cells cells = CellsOf(data);
    const std::vector<double> deviations = Deviations(cells);
    for (int b = 0; b < options.draws; ++b) {
      const LadderData draw = Resample(data, cells, deviations, &rng);
      LadderFit fit = FitLadder(draw, false, options.fit, &result.fit);
      LadderFit trend_fit;
      if (trend && result.trend_fit.ok) {
        trend_fit = FitLadder(draw, true, options.fit, &result.trend_fit);
      }
      if (!fit.ok || (trend && result.trend_fit.ok && !trend_fit.ok)) {
        ++result.failed_draws;
        continue;
      }
      // The shared exponent and E from the model that lets multipliers drift, when there is one:
      // a drifting variant forced into a constant multiplier bends them.
      alphas.push_back(trend_fit.ok ? trend_fit.alpha : fit.alpha);
      es.push_back(trend_fit.ok ? trend_fit.E : fit.E);
      for (int v = 1; v < data.variants; ++v) {
        mus[v].push_back(fit.log_multiplier[v]);
        if (trend_fit.ok) {
          betas[v].push_back(trend_fit.slope[v]);
        }
      }
      result.fit_draws.push_back(std::move(fit));
      if (trend_fit.ok) {
        result.trend_draws.push_back(std::move(trend_fit));
      }
    }
    result.draws = static_cast<int>(result.fit_draws.size());
    if (result.failed_draws > options.draws / 10) {
      result.warnings.push_back(
          absl::StrFormat("%d of %d bootstrap fits did not converge: the intervals are of the rest",
                          result.failed_draws, options.draws));
    }
  }
  const LadderFit& shared = result.trend_fit.ok ? result.trend_fit : result.fit;
  result.exponent = Interval(shared.alpha, alphas, options.alpha, dof);
  result.irreducible = Interval(shared.E, es, options.alpha, dof);
  // E at its floor: the losses are far above the loss they tend to, so the ladder cannot tell E
  // from alpha (a larger E with a larger alpha fits as well within the seeds' noise, but every
  // fit runs to the floor). An interval of draws that all sit there would claim E = 0 for sure.
  double min_y = std::numeric_limits<double>::infinity();
  for (const LadderPoint& point : data.points) {
    if (std::isfinite(point.value) && point.value > 0) {
      min_y = std::min(min_y, point.value);
    }
  }
  if (shared.E < kLadderEFloor * min_y) {
    result.irreducible = {0, kNaN, kNaN};
    result.warnings.push_back(
        "E is fitted at 0, its floor: these losses are far from the loss they tend to, so the "
        "ladder cannot tell E from α; α and the multipliers are those of L = A·(m·N)^-α, and "
        "their intervals leave out what E's uncertainty would add (a ladder that reaches lower "
        "losses, more rungs or longer training, would tell)");
  }
  result.variants[0].multiplier = {1, 1, 1};
  for (int v = 1; v < data.variants; ++v) {
    LadderVariant& out = result.variants[v];
    const Estimate mu = Interval(result.fit.log_multiplier[v], mus[v], options.alpha, dof);
    out.multiplier = {std::exp(mu.value), std::exp(mu.lo), std::exp(mu.hi)};
    if (!trend || !result.trend_fit.ok) {
      out.slope = {kNaN, kNaN, kNaN};
      continue;
    }
    out.slope = SlopeInterval(result.trend_fit.slope[v], betas[v], result.trend_level, dof);
    if (!result.intervals || betas[v].empty()) {
      continue;
    }
    if (out.slope.lo <= 0 && out.slope.hi >= 0) {
      out.trend = "none";
      continue;
    }
    // log m(N) = mu + beta (log N - c): where it crosses 0, and whether |log m| grows.
    const double mu_c = result.trend_fit.log_multiplier[v];
    const double beta = result.trend_fit.slope[v];
    const double log_cross = result.trend_fit.log_size_ref - mu_c / beta;
    if (log_cross >= std::log(data.sizes.front()) && log_cross <= std::log(data.sizes.back())) {
      out.crossing = std::exp(log_cross);
      out.trend = absl::StrFormat("reverses near N ≈ %s", SizeText(out.crossing));
    } else {
      // At the ladder's top, |log m| increases with N when mu(top) and beta agree in sign.
      const double mu_top =
          mu_c + beta * (std::log(data.sizes.back()) - result.trend_fit.log_size_ref);
      out.trend = mu_top * beta > 0 ? "grows" : "shrinks";
    }
  }
  result.ok = true;
  return result;
}

LadderExtrapolation ExtrapolateLadder(const LadderData& data, const LadderResult& result,
                                      int variant, double size) {
  LadderExtrapolation out;
  if (!result.ok || variant < 0 || variant >= static_cast<int>(result.variants.size())) {
    out.why = result.ok ? "no such variant" : result.why;
    return out;
  }
  const double lo = data.sizes.front() / kLadderReach;
  const double hi = data.sizes.back() * kLadderReach;
  if (!(size >= lo && size <= hi)) {
    out.why = absl::StrFormat(
        "N = %s is beyond the ladder's reach (%s to %s, %gx its ends): a law fitted on %s to %s "
        "says nothing there",
        SizeText(size), SizeText(lo), SizeText(hi), kLadderReach, SizeText(data.sizes.front()),
        SizeText(data.sizes.back()));
    return out;
  }
  const std::string& trend = result.variants[variant].trend;
  out.trend = !trend.empty() && trend != "none" && result.trend_fit.ok;
  const LadderFit& fit = out.trend ? result.trend_fit : result.fit;
  const std::vector<LadderFit>& draws = out.trend ? result.trend_draws : result.fit_draws;
  std::vector<double> effects;
  std::vector<double> baselines;
  for (const LadderFit& draw : draws) {
    effects.push_back(PredictLadder(draw, variant, size) - PredictLadder(draw, 0, size));
    baselines.push_back(PredictLadder(draw, 0, size));
  }
  constexpr double kAlpha = 0.05;
  out.effect = Interval(PredictLadder(fit, variant, size) - PredictLadder(fit, 0, size), effects,
                        kAlpha, result.dof);
  out.baseline = Interval(PredictLadder(fit, 0, size), baselines, kAlpha, result.dof);
  out.ok = true;
  return out;
}

}  // namespace tae::stats
