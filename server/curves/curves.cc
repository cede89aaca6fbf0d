#include "server/curves/curves.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/stats/stats.h"

namespace tae::curves {
namespace {

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
  int Of(double x) const {
    const int b = static_cast<int>(std::floor((x - lo_) * scale_));
    return std::clamp(b, 0, count_ - 1);
  }

 private:
  double lo_;
  double scale_ = 0;
  int count_ = 1;
};

// Per variant and bucket: Welford's running mean and M2 of the runs' bucket means, the runs'
// min and max.
struct Accumulator {
  int n = 0;
  double mean = 0;
  double m2 = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();

  void Add(double run_mean, double run_min, double run_max) {
    ++n;
    const double d = run_mean - mean;
    mean += d / n;
    m2 += d * (run_mean - mean);
    min = std::min(min, run_min);
    max = std::max(max, run_max);
  }
};

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

Curves Build(const std::vector<RunSeries>& series, const std::vector<std::string>& variants,
             const Options& options) {
  Curves out;
  std::map<std::string, size_t> band_of;
  for (const std::string& variant : variants) {
    if (band_of.emplace(variant, out.bands.size()).second) {
      Band band;
      band.variant = variant;
      out.bands.push_back(std::move(band));
    }
  }
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool integral = true;
  auto in_range = [&](double x) {
    return std::isfinite(x) && x >= options.x_min && x <= options.x_max;
  };
  for (const RunSeries& run : series) {
    for (double x : run.x) {
      if (in_range(x)) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        integral = integral && x == std::floor(x);
      }
    }
  }
  if (!(lo <= hi)) {
    for (const RunSeries& run : series) {
      auto it = band_of.find(run.variant);
      if (it != band_of.end()) {
        out.bands[it->second].runs.push_back(run.run_id);
      }
    }
    for (Band& band : out.bands) {
      std::sort(band.runs.begin(), band.runs.end());
    }
    return out;
  }
  const Bucketer bucketer(lo, hi, integral, std::max(1, options.buckets));
  const int count = bucketer.count();
  std::vector<std::vector<Accumulator>> acc(out.bands.size(), std::vector<Accumulator>(count));
  std::vector<double> bucket_x(count, -std::numeric_limits<double>::infinity());

  const bool smooth = options.smooth > 0 && options.smooth < 1;
  for (const RunSeries& run : series) {
    auto it = band_of.find(run.variant);
    if (it == band_of.end()) {
      continue;
    }
    Band& band = out.bands[it->second];
    band.runs.push_back(run.run_id);
    std::vector<double> smoothed;
    const std::vector<double>& y = smooth ? (smoothed = SmoothEma(run.y, options.smooth)) : run.y;
    // One pass over the run: its points arrive in x order, so each bucket's points are adjacent.
    int current = -1;
    double sum = 0, min = 0, max = 0;
    int n = 0;
    auto flush = [&] {
      if (n > 0) {
        acc[it->second][current].Add(sum / n, min, max);
      }
    };
    for (size_t i = 0; i < run.x.size() && i < y.size(); ++i) {
      if (!in_range(run.x[i]) || !std::isfinite(y[i])) {
        continue;
      }
      const int b = bucketer.Of(run.x[i]);
      bucket_x[b] = std::max(bucket_x[b], run.x[i]);
      if (b != current) {
        flush();
        current = b;
        sum = 0;
        n = 0;
        min = max = y[i];
      }
      sum += y[i];
      ++n;
      min = std::min(min, y[i]);
      max = std::max(max, y[i]);
    }
    flush();
  }

  std::map<int, double> t_cache;
  for (int b = 0; b < count; ++b) {
    bool any = false;
    for (const auto& per_band : acc) {
      any = any || per_band[b].n > 0;
    }
    if (!any) {
      continue;
    }
    out.x.push_back(bucket_x[b]);
    for (size_t i = 0; i < out.bands.size(); ++i) {
      const Accumulator& a = acc[i][b];
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
