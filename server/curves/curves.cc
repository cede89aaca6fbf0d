#include "server/curves/curves.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "common/stats/stats.h"

namespace tae::curves {

// Maps x to a bucket: one per integer x when the x are integers that fit, else equal widths.
class Bucketer {
 public:
  Bucketer(double lo, double hi, bool integral, int buckets) : lo_(lo) {
    const double span = hi - lo;
    if (integral && span + 1 <= buckets) {
      count_ = static_cast<int>(span) + 1;
      scale_ = 1;
    } else {
      count_ = std::max(1, buckets);
      scale_ = span > 0 ? count_ / span : 0;
    }
  }
  int count() const { return count_; }
  // floor((x - lo) * scale) clamped to the buckets, without a call to floor (x86-64's baseline
  // has no instruction for it, and this runs for every point of a study): truncation is floor
  // from 0 up.
  int Of(double x) const {
    const double t = (x - lo_) * scale_;
    if (!(t >= 0)) {
      return 0;
    }
    return t < count_ ? static_cast<int>(t) : count_ - 1;
  }

 private:
  double lo_;
  double scale_ = 0;
  int count_ = 1;
};

// Per variant and bucket: Welford's running mean and M2 of the runs' bucket means, the runs'
// min and max, and the largest x of their points there.
struct Accumulator {
  int n = 0;
  double mean = 0;
  double m2 = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double x_max = -std::numeric_limits<double>::infinity();

  void Add(double run_mean, double run_min, double run_max, double run_x_max) {
    ++n;
    const double d = run_mean - mean;
    mean += d / n;
    m2 += d * (run_mean - mean);
    min = std::min(min, run_min);
    max = std::max(max, run_max);
    x_max = std::max(x_max, run_x_max);
  }
};

namespace {

// Whether finite `v` is a whole number, without a call to floor: from 2^53 up every double is.
bool IsWhole(double v) {
  constexpr double kAllWhole = 9007199254740992.0;  // 2^53
  return std::abs(v) >= kAllWhole || v == static_cast<double>(static_cast<int64_t>(v));
}

double HalfWidth(int n, double m2, std::map<int, double>* t_cache) {
  if (n < 2) {
    return 0;
  }
  auto [it, fresh] = t_cache->try_emplace(n, 0.0);
  if (fresh) {
    it->second = stats::StudentTQuantile(0.975, n - 1);
  }
  return it->second * std::sqrt(m2 / (n - 1)) / std::sqrt(static_cast<double>(n));
}

}  // namespace

std::vector<double> SmoothEma(const std::vector<double>& y, double weight) {
  std::vector<double> out(y.size());
  double ema = 0;
  int k = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      out[i] = y[i];
      continue;
    }
    ++k;
    ema = weight * ema + (1 - weight) * y[i];
    const double debias = 1 - std::pow(weight, k);
    out[i] = debias > 0 ? ema / debias : y[i];
  }
  return out;
}

Builder::Builder(const std::vector<std::string>& variants, const Options& options)
    : options_(options) {
  for (const std::string& variant : variants) {
    if (band_of_.emplace(variant, out_.bands.size()).second) {
      Band band;
      band.variant = variant;
      out_.bands.push_back(std::move(band));
    }
  }
}

bool Builder::InRange(double x) const {
  return std::isfinite(x) && x >= options_.x_min && x <= options_.x_max;
}

void Builder::Range(const std::vector<double>& x) {
  // Locals, not members, in the loop: it runs over every point of the study.
  double lo = lo_;
  double hi = hi_;
  bool integral = integral_;
  for (double v : x) {
    if (InRange(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      integral = integral && IsWhole(v);
    }
  }
  lo_ = lo;
  hi_ = hi;
  integral_ = integral;
}

void Builder::RangeSpan(double lo, double hi, bool whole) {
  lo_ = std::min(lo_, lo);
  hi_ = std::max(hi_, hi);
  integral_ = integral_ && whole;
}

bool Builder::Zoomed() const {
  return options_.x_min != -std::numeric_limits<double>::infinity() ||
         options_.x_max != std::numeric_limits<double>::infinity();
}

void Builder::EndRange() {
  ranged_ = true;
  if (lo_ <= hi_) {
    bucketer_ = std::make_unique<Bucketer>(lo_, hi_, integral_, std::max(1, options_.buckets));
    acc_.assign(out_.bands.size(), std::vector<Accumulator>(bucketer_->count()));
  }
}

void Builder::Add(int64_t run_id, const std::string& variant, const std::vector<double>& x,
                  const std::vector<double>& y) {
  auto it = band_of_.find(variant);
  if (it == band_of_.end()) {
    return;
  }
  if (!ranged_) {
    EndRange();
  }
  out_.bands[it->second].runs.push_back(run_id);
  if (!bucketer_) {
    return;  // no point in range anywhere: the bands list their runs only
  }
  const bool smooth = options_.smooth > 0 && options_.smooth < 1;
  std::vector<double> smoothed;
  const std::vector<double>& ys = smooth ? (smoothed = SmoothEma(y, options_.smooth)) : y;
  std::vector<Accumulator>& acc = acc_[it->second];
  const Bucketer bucketer = *bucketer_;
  // One pass over the run: its points arrive in x order, so each bucket's points are adjacent.
  // A bucket's sum, min, max and largest x are kept in locals until the run leaves it.
  int current = -1;
  double sum = 0, min = 0, max = 0, x_max = 0;
  int n = 0;
  auto flush = [&] {
    if (n > 0) {
      // n == 1 is the same, without a division: most buckets hold one point.
      acc[current].Add(n == 1 ? sum : sum / n, min, max, x_max);
    }
  };
  const size_t points = std::min(x.size(), ys.size());
  for (size_t i = 0; i < points; ++i) {
    const double xi = x[i];
    const double yi = ys[i];
    if (!InRange(xi) || !std::isfinite(yi)) {
      continue;
    }
    const int b = bucketer.Of(xi);
    if (b != current) {
      flush();
      current = b;
      sum = 0;
      n = 0;
      min = max = yi;
      x_max = xi;
    }
    sum += yi;
    ++n;
    min = std::min(min, yi);
    max = std::max(max, yi);
    x_max = std::max(x_max, xi);
  }
  flush();
}

Curves Builder::Finish() {
  Curves out = std::move(out_);
  std::map<int, double> t_cache;
  const int buckets = bucketer_ ? bucketer_->count() : 0;
  for (int b = 0; b < buckets; ++b) {
    bool any = false;
    double x = -std::numeric_limits<double>::infinity();
    for (const auto& per_band : acc_) {
      if (per_band[b].n > 0) {
        any = true;
        x = std::max(x, per_band[b].x_max);
      }
    }
    if (!any) {
      continue;
    }
    out.x.push_back(x);
    for (size_t i = 0; i < out.bands.size(); ++i) {
      const Accumulator& a = acc_[i][b];
      Band& band = out.bands[i];
      band.n.push_back(a.n);
      band.n_max = std::max(band.n_max, a.n);
      if (a.n == 0) {
        for (Column* column : {&band.mean, &band.lo, &band.hi, &band.min, &band.max}) {
          column->push_back(std::nullopt);
        }
        continue;
      }
      const double h = HalfWidth(a.n, a.m2, &t_cache);
      band.mean.push_back(a.mean);
      band.lo.push_back(a.mean - h);
      band.hi.push_back(a.mean + h);
      band.min.push_back(a.min);
      band.max.push_back(a.max);
    }
  }
  for (Band& band : out.bands) {
    std::sort(band.runs.begin(), band.runs.end());
  }
  return out;
}

Builder::~Builder() = default;

Curves Build(const std::vector<RunSeries>& series, const std::vector<std::string>& variants,
             const Options& options) {
  Builder builder(variants, options);
  for (const RunSeries& run : series) {
    builder.Range(run.x);
  }
  for (const RunSeries& run : series) {
    builder.Add(run.run_id, run.variant, run.x, run.y);
  }
  return builder.Finish();
}

void ToDeltaByIndex(Curves* curves, const std::vector<int>& base) {
  const std::vector<Band> original = curves->bands;
  for (size_t i = 0; i < curves->bands.size(); ++i) {
    Band& band = curves->bands[i];
    const size_t len = curves->x.size();
    band.min.assign(len, std::nullopt);
    band.max.assign(len, std::nullopt);
    if (base[i] < 0) {
      band.mean.assign(len, std::nullopt);
      band.lo.assign(len, std::nullopt);
      band.hi.assign(len, std::nullopt);
      band.n.assign(len, 0);
      band.n_max = 0;
      continue;
    }
    const Band& a = original[i];
    const Band& b = original[static_cast<size_t>(base[i])];
    band.n_max = 0;
    for (size_t k = 0; k < len; ++k) {
      if (!a.mean[k] || !b.mean[k]) {
        band.mean[k] = band.lo[k] = band.hi[k] = std::nullopt;
        band.n[k] = 0;
        continue;
      }
      const double ha = *a.hi[k] - *a.mean[k];
      const double hb = *b.hi[k] - *b.mean[k];
      const double d = *a.mean[k] - *b.mean[k];
      const double h = std::sqrt(ha * ha + hb * hb);
      band.mean[k] = d;
      band.lo[k] = d - h;
      band.hi[k] = d + h;
      band.n[k] = std::min(a.n[k], b.n[k]);
      band.n_max = std::max(band.n_max, band.n[k]);
    }
  }
}

}  // namespace tae::curves
