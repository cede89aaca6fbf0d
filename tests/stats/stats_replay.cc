// Reads one JSON object per line on stdin and prints, one line each, what TAE's statistics code
// computes for it (tests/stats/stats_oracle_test.py checks every number against scipy and
// statsmodels):
//   {"a": [...], "b": [...], "level": 0.05}   two samples: Welch's test, the table's test
//     (stats::TableTest), the paired t (when the sizes match), the interval of mean(a) - mean(b)
//     at two-sided `level` with each test's dof, and the 80%-power detectable effect
//   {"p": [...], "alpha": 0.05}              one family's p values: Holm- and
//     Bonferroni-adjusted p, and the interval levels of stats::IntervalLevels under Holm
// A field that does not apply is null.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "common/stats/family.h"
#include "common/stats/stats.h"
#include "nlohmann/json.hpp"

namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json Numbers(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) {
    out.push_back(Number(v));
  }
  return out;
}

nlohmann::json Test(const std::optional<tae::stats::WelchTest>& test, double delta, double level) {
  if (!test.has_value()) {
    return nullptr;
  }
  const tae::stats::Interval ci = tae::stats::DeltaInterval(delta, test->se, test->dof, level);
  return {{"t", Number(test->t)},
          {"dof", Number(test->dof)},
          {"p", Number(test->p_two_sided)},
          {"se", Number(test->se)},
          {"lo", Number(ci.lo)},
          {"hi", Number(ci.hi)},
          {"detectable", Number(tae::stats::DetectableEffect(test->se, test->dof, level))}};
}

// A JSON array of numbers, null read as NaN (JSON has no NaN).
std::vector<double> Read(const nlohmann::json& array) {
  std::vector<double> out;
  for (const nlohmann::json& v : array) {
    out.push_back(v.is_null() ? std::nan("") : v.get<double>());
  }
  return out;
}

double MeanOf(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) {
    sum += x;
  }
  return sum / static_cast<double>(v.size());
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) {
      continue;
    }
    const nlohmann::json in = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (in.is_discarded() || !in.is_object()) {
      std::cerr << "stats_replay: not a JSON object: " << line << "\n";
      return 2;
    }
    nlohmann::json out;
    if (in.contains("a")) {
      const auto a = Read(in.at("a"));
      const auto b = Read(in.at("b"));
      const double level = in.value("level", 0.05);
      const double delta = MeanOf(a) - MeanOf(b);
      out["welch"] = Test(tae::stats::Welch(a, b), delta, level);
      out["table"] = Test(tae::stats::TableTest(a, b), delta, level);
      out["paired"] = Test(tae::stats::PairedT(a, b), delta, level);
    } else {
      const auto p = Read(in.at("p"));
      const double alpha = in.value("alpha", 0.05);
      out["holm"] = Numbers(tae::stats::AdjustedP(tae::stats::Correction::kHolm, p));
      out["bonferroni"] = Numbers(tae::stats::AdjustedP(tae::stats::Correction::kBonferroni, p));
      out["levels"] = Numbers(tae::stats::IntervalLevels(tae::stats::Correction::kHolm, p, alpha));
    }
    std::cout << out.dump() << "\n";
  }
  return 0;
}
