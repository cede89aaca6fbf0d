#pragma once

// Curves of an experiment as the dashboard draws them: per variant one band (the mean over its
// seeds with a 95% confidence interval, the number of runs n behind each point, and the min/max
// envelope of the raw values) on one x grid shared by every variant, at most `buckets` points
// wide. Pure: the numbers are unit-tested, and taed's HTTP adapter only reads and serialises.
//
// The order of work is the one that keeps what a chart must show:
// 1. smoothing (debiased EMA) runs over each run's full series, before anything is dropped
//    (points outside the x range asked for included);
// 2. each run is reduced to buckets of equal x width: per bucket its mean, min and max, so a
//    spike of one step survives as the bucket's max however many points the bucket holds;
// 3. per variant and bucket: the mean of the runs' means, the 95% CI half-width
//    t(0.975, n-1) * sd / sqrt(n) over the n runs with a point in that bucket, min and max.
// Buckets where no variant has a point are left out, so a metric logged every 100 steps does not
// become 99 empty columns.

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tae::curves {

// One run's points of one metric, in ascending x.
struct RunSeries {
  int64_t run_id = 0;
  std::string variant;
  std::vector<double> x;
  std::vector<double> y;
};

struct Options {
  int buckets = 1000;  // at most this many x positions (>= 1)
  double smooth = 0;   // EMA weight in [0, 1): 0 = none; 0.9 = heavy
  // Only points with x in [x_min, x_max] are drawn (a zoom at full resolution); the smoothing
  // still runs over each whole series, so a zoomed curve is the same curve.
  double x_min = -std::numeric_limits<double>::infinity();
  double x_max = std::numeric_limits<double>::infinity();
};

// A value per x position; nullopt where the variant has no point there.
using Column = std::vector<std::optional<double>>;

struct Band {
  std::string variant;
  std::vector<int64_t> runs;  // ascending
  int n_max = 0;              // the most runs behind any of its points
  Column mean, lo, hi, min, max;
  std::vector<int> n;  // runs with a point in each bucket (0 where none)
};

struct Curves {
  std::vector<double> x;    // ascending; each the largest x of the points in its bucket
  std::vector<Band> bands;  // in the order of `variants`
};

// TensorBoard's smoothing: ema_k = w * ema_{k-1} + (1 - w) * y_k, divided by (1 - w^k) so the
// start is not pulled towards 0. Non-finite values are passed through and do not enter the EMA.
std::vector<double> SmoothEma(const std::vector<double>& y, double weight);

// The bands of `series` grouped by variant, in the order of `variants` (variants with no series
// get an empty band). Non-finite y values are skipped.
Curves Build(const std::vector<RunSeries>& series, const std::vector<std::string>& variants,
             const Options& options);

class Bucketer;
struct Accumulator;

// Build one run at a time, so that a caller need not hold every run's x and y at once (a metric
// of a 10,000-run study is 10 million points): first Range with every run's x (the buckets depend
// on all of them), then Add each run, then Finish. Build is Range, Add and Finish over `series`.
// Add may run on several threads at once after EndRange, so long as no two add to one variant.
class Builder {
 public:
  Builder(const std::vector<std::string>& variants, const Options& options);
  ~Builder();
  void Range(const std::vector<double>& x);
  // The same as Range over x known to run from `lo` to `hi` (both finite), every one whole or
  // not, for a caller that knows that without the points (a run's least and greatest step).
  // Only while nothing is zoomed (Zoomed() false): a zoom drops x that only every point shows.
  void RangeSpan(double lo, double hi, bool whole);
  bool Zoomed() const;
  // No more Range: the buckets are fixed (the first Add does it where this was not called).
  void EndRange();
  void Add(int64_t run_id, const std::string& variant, const std::vector<double>& x,
           const std::vector<double>& y);
  Curves Finish();

 private:
  bool InRange(double x) const;

  Options options_;
  Curves out_;
  std::map<std::string, size_t> band_of_;
  double lo_ = std::numeric_limits<double>::infinity();
  double hi_ = -std::numeric_limits<double>::infinity();
  bool integral_ = true;
  std::unique_ptr<Bucketer> bucketer_;
  bool ranged_ = false;
  std::vector<std::vector<Accumulator>> acc_;  // per band, per bucket
};

// Each band minus the band of its baseline (`baseline_of(variant)`) at the same x: mean is the
// difference of the means, lo/hi that difference -/+ sqrt(ci_a^2 + ci_b^2) (the half-widths of
// both bands combined), n the smaller n; min/max are dropped. A variant whose baseline has no
// band, or a bucket where either side has no point, gets nullopt.
template <typename BaselineOf>
void ToDelta(Curves* curves, BaselineOf baseline_of);

// Implementation detail of ToDelta: `base[i]` is the index of band i's baseline band (or -1).
void ToDeltaByIndex(Curves* curves, const std::vector<int>& base);

template <typename BaselineOf>
void ToDelta(Curves* curves, BaselineOf baseline_of) {
  std::vector<int> base(curves->bands.size(), -1);
  for (size_t i = 0; i < curves->bands.size(); ++i) {
    const std::string name = baseline_of(curves->bands[i].variant);
    for (size_t j = 0; j < curves->bands.size(); ++j) {
      if (curves->bands[j].variant == name) {
        base[i] = static_cast<int>(j);
      }
    }
  }
  ToDeltaByIndex(curves, base);
}

}  // namespace tae::curves
