#pragma once

// A ladder of model sizes (a [scale] study): does an ablation's effect survive scale?
//
// The law, per metric (a loss: positive, lower is better):
//     L_v(N) = E + A * (m_v * N / N_ref) ^ -alpha
// with E, A and alpha shared by every variant and m_v each variant's effective-parameter
// multiplier (the baseline's is 1): a variant with m_v = 2 is worth a baseline twice its size at
// every N. Fitting each variant's own curve is ill-conditioned, and shared exponents compare the
// variants directly (Volkova et al. 2026). N_ref is the ladder's geometric-mean size, which only
// conditions the fit (A is reported at N_ref = 1).
//
// The trend model lets each multiplier drift with size, log m_v(N) = mu_v + beta_v * log(N /
// N_ref) (an interaction with size, as in Clark et al. 2022); beta_v is the trend.
//
// The fit minimises the Huber loss of the log residuals, log L-hat - log L, over every run's value
// (Hoffmann et al. 2022, approach 3), by Levenberg-Marquardt on IRLS weights from a grid of
// starts, the best kept. Intervals come from a bootstrap over seeds, never from the Hessian
// (Besiroglu et al. 2024): each draw picks each cell's seeds anew (with replacement, each cell on
// its own), each cell's spread around its mean rescaled by sqrt(n / (n - 1)) so that 2 or 3
// seeds do not shrink it; the fit is
// redone from the point estimate, and the percentiles of the draws, widened about the estimate by
// t_dof / z (dof: the seeds' degrees of freedom within their cells), give the interval.
//
// Pure functions on doubles; the random draws come from `LadderOptions::seed` (the same ladder
// gives the same intervals every time).

#include <cstdint>
#include <string>
#include <vector>

namespace tae::stats {

// One run's value: variant 0 is the baseline; rung indexes LadderData::sizes.
struct LadderPoint {
  int variant = 0;
  int rung = 0;
  int64_t seed = 0;
  double value = 0;
};

struct LadderData {
  std::vector<double> sizes;  // N per rung, ascending, > 0
  int variants = 1;           // the baseline and the ablations
  std::vector<LadderPoint> points;
};

struct LadderFit {
  bool ok = false;
  std::string why;  // !ok: why there is no fit
  double E = 0;
  double A = 0;  // at N_ref = 1
  double alpha = 0;
  double log_size_ref = 0;             // log N_ref
  std::vector<double> log_multiplier;  // mu_v, per variant (0 for the baseline)
  std::vector<double> slope;           // beta_v (trend model; 0 for the baseline), else empty
  double loss = 0;                     // the Huber objective at the fit
  int iterations = 0;
};

// The model's L_v(N).
double PredictLadder(const LadderFit& fit, int variant, double size);

struct LadderFitOptions {
  // The Huber loss's delta on log residuals: residuals beyond 5% of the loss (a diverged or broken
  // seed) count linearly, seed noise (typically < 2%) quadratically.
  double huber_delta = 0.05;
  int max_iterations = 200;
};

// The fit from a grid of starts (alpha x E), or from `start` alone when given (a bootstrap draw).
// Not ok: no finite positive values, fewer than 2 rungs with values, or no start converged.
LadderFit FitLadder(const LadderData& data, bool trend, const LadderFitOptions& options = {},
                    const LadderFit* start = nullptr);

struct Estimate {
  double value = 0;
  double lo = 0;  // the interval; NaN without one
  double hi = 0;
};

struct LadderVariant {
  Estimate multiplier;  // m_v (constant model), 95% interval
  Estimate slope;       // beta_v (trend model), at the trend family's level
  // "grows" (|log m| increases with N), "shrinks" (decreases toward no effect), "none" (the
  // slope's interval holds 0), "reverses near N ≈ X" (the trend crosses m = 1 within the
  // ladder), or "" without intervals. The baseline's is "".
  std::string trend;
  double crossing = 0;  // reverses: the N where m_v(N) = 1
};

struct LadderOptions {
  LadderFitOptions fit;
  int draws = 1000;     // bootstrap draws
  double alpha = 0.05;  // the intervals are 1 - alpha; the trend verdicts a family (below)
  uint64_t seed = 0x5ca1e;
};

struct LadderResult {
  bool ok = false;
  std::string why;
  LadderFit fit;        // constant multipliers
  LadderFit trend_fit;  // multipliers that drift with N
  // alpha and E: the trend model's when there is one (a variant whose multiplier drifts, forced
  // into a constant one, would bend them), else the constant model's.
  Estimate exponent;
  // E; {0, NaN, NaN} when fitted at its floor (below kLadderEFloor of the smallest loss: not
  // identified, with a warning saying so).
  Estimate irreducible;
  std::vector<LadderVariant> variants;  // per variant, the baseline first
  // Intervals need >= 2 seeds in every cell (a variant at a rung); else none (intervals false).
  bool intervals = false;
  int draws = 0;         // bootstrap draws that gave a fit (of options.draws)
  int failed_draws = 0;  // draws whose fit did not converge (left out)
  // The trend verdicts are one family over the ablations: each slope's interval is at level
  // 1 - alpha / K (Bonferroni, K = ablations), so the chance of any false "grows"/"shrinks" is at
  // most alpha.
  double trend_level = 0;
  // The degrees of freedom of the seeds' spread (the sum over cells of n - 1): each percentile
  // interval is widened about its estimate by t_dof / z at its level.
  double dof = 0;
  std::vector<std::string> warnings;  // fewer than 4 rungs, less than one decade of N, ...
  // The draws, for ExtrapolateLadder.
  std::vector<LadderFit> fit_draws;
  std::vector<LadderFit> trend_draws;
};

// E below this fraction of the smallest loss is at the fit's floor.
inline constexpr double kLadderEFloor = 1e-6;

LadderResult AnalyzeLadder(const LadderData& data, const LadderOptions& options = {});

// How far beyond the ladder an extrapolation may go: a factor of the largest (or smallest) rung.
inline constexpr double kLadderReach = 10;

struct LadderExtrapolation {
  bool ok = false;
  std::string why;     // refused: beyond the ladder's reach, or no fit
  Estimate effect;     // L_v(N) - L_baseline(N), interval from the draws
  Estimate baseline;   // L_baseline(N)
  bool trend = false;  // from the trend model (the variant's trend is not "none")
};

// The effect of `variant` at size N: by the trend model when its trend is decided, else by the
// constant multiplier. Refused beyond kLadderReach times the ladder's ends.
LadderExtrapolation ExtrapolateLadder(const LadderData& data, const LadderResult& result,
                                      int variant, double size);

}  // namespace tae::stats
