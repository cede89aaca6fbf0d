// Tick placement and tick labels for the plot axes.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/plot/svg_plot.h"

namespace tae::plot {
namespace {

// Slack when deciding whether a multiple of a step lies inside a range, in units of the step.
constexpr double kEps = 1e-9;
constexpr int kMaxDecimals = 6;
constexpr int kMaxDecades = 8;

// 10^e, correctly rounded for negative e too (1 / 10^3 rounds better than pow(10, -3)).
double Pow10(int e) { return e >= 0 ? std::pow(10.0, e) : 1.0 / std::pow(10.0, -e); }

// k * mantissa * 10^e, rounded once, so 3 * 0.2 gives 0.6 and not 0.6000000000000001.
double Multiple(long long k, int mantissa, int e) {
  const double km = static_cast<double>(k) * mantissa;
  return e >= 0 ? km * Pow10(e) : km / Pow10(-e);
}

struct Step {
  int mantissa;  // 1, 2 or 5
  int exponent;
  double Value() const { return Multiple(1, mantissa, exponent); }
};

long long FirstIndex(double lo, double step) {
  return static_cast<long long>(std::ceil(lo / step - kEps));
}
long long LastIndex(double hi, double step) {
  return static_cast<long long>(std::floor(hi / step + kEps));
}

std::string StripZeros(std::string text) {
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') {
      text.pop_back();
    }
    if (text.back() == '.') {
      text.pop_back();
    }
  }
  if (text == "-0") {
    text = "0";
  }
  return text;
}

// Decimals needed to write `step` exactly (0.25 -> 2, 500 -> 0), at most kMaxDecimals.
int Decimals(double step) {
  int decimals = 0;
  double scaled = step;
  while (decimals < kMaxDecimals && std::fabs(scaled - std::round(scaled)) > 1e-6 * scaled) {
    scaled *= 10;
    ++decimals;
  }
  return decimals;
}

// `value` with the decimals of `step`, trailing zeros removed.
std::string Fixed(double value, double step) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", Decimals(step), value);
  return StripZeros(buffer);
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
    return {};
  }
  if (lo == hi) {
    return {lo};
  }
  target = std::max(target, 2);
  const int base = static_cast<int>(std::floor(std::log10((hi - lo) / target)));
  Step best{1, base};
  long long best_miss = -1;
  // Ascending steps; "<=" lets the larger step win a tie.
  for (int e = base - 1; e <= base + 1; ++e) {
    for (int mantissa : {1, 2, 5}) {
      const double step = Multiple(1, mantissa, e);
      const long long count = LastIndex(hi, step) - FirstIndex(lo, step) + 1;
      const long long miss = std::llabs(count - target);
      if (best_miss < 0 || miss <= best_miss) {
        best = Step{mantissa, e};
        best_miss = miss;
      }
    }
  }
  const double step = best.Value();
  std::vector<double> ticks;
  for (long long k = FirstIndex(lo, step); k <= LastIndex(hi, step); ++k) {
    ticks.push_back(Multiple(k, best.mantissa, best.exponent));
  }
  return ticks;
}

std::vector<double> LogTicks(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo <= 0 || lo > hi) {
    return {};
  }
  const int first = static_cast<int>(std::ceil(std::log10(lo) - kEps));
  const int last = static_cast<int>(std::floor(std::log10(hi) + kEps));
  std::vector<double> ticks;
  if (last - first + 1 >= 3) {
    const int stride = (last - first + kMaxDecades) / kMaxDecades;
    for (int e = first; e <= last; ++e) {
      if (((e % stride) + stride) % stride == 0) {
        ticks.push_back(Pow10(e));
      }
    }
    return ticks;
  }
  for (int e = first - 1; e <= last; ++e) {
    for (int mantissa : {1, 2, 5}) {
      const double value = Multiple(1, mantissa, e);
      if (value >= lo * (1 - kEps) && value <= hi * (1 + kEps)) {
        ticks.push_back(value);
      }
    }
  }
  if (ticks.size() >= 3) {
    return ticks;
  }
  ticks.clear();
  for (double value : NiceTicks(lo, hi, 4)) {
    if (value > 0) {
      ticks.push_back(value);
    }
  }
  return ticks;
}

std::string FormatTick(double value, double step) {
  if (!std::isfinite(value)) {
    return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  }
  step = std::fabs(step);
  if (!std::isfinite(step) || step == 0) {
    step = value != 0 ? std::fabs(value) : 1;
  }
  const double magnitude = std::fabs(value);
  if (magnitude < step * 1e-6) {
    return "0";
  }
  if (magnitude < 0.01 || magnitude >= 1e9) {
    const int exponent = static_cast<int>(std::floor(std::log10(magnitude) + kEps));
    const double unit = Pow10(exponent);
    return Fixed(value / unit, step / unit) + "e" + std::to_string(exponent);
  }
  if (magnitude >= 1e6) {
    return Fixed(value / 1e6, step / 1e6) + "M";
  }
  if (magnitude >= 1e3) {
    return Fixed(value / 1e3, step / 1e3) + "k";
  }
  return Fixed(value, step);
}

}  // namespace tae::plot
