#include "server/report/frontier.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace tae::report {
namespace {

absl::Status BarError(const std::string& expression, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--frontier '", expression, "': ", why,
                                                 "; write METRIC OP VALUE with OP one of ",
                                                 kBarOperators, " (e.g. eval/acc>=0.99)"));
}

bool Passes(double x, const Bar& bar) {
  switch (bar.op) {
    case BarOp::kGe:
      return x >= bar.value;
    case BarOp::kGt:
      return x > bar.value;
    case BarOp::kLe:
      return x <= bar.value;
    case BarOp::kLt:
      return x < bar.value;
  }
  return false;
}

// The end of the CI that must pass: the lower bound for >= and >, the upper for <= and <.
double WorstEnd(const FrontierPoint& p, const Bar& bar) {
  return bar.op == BarOp::kGe || bar.op == BarOp::kGt ? p.lo : p.hi;
}

Clears Judge(const FrontierPoint& p, const Bar& bar) {
  if (p.n == 0 || std::isnan(p.mean)) {
    return Clears::kNoValue;
  }
  if (!Passes(p.mean, bar)) {
    return Clears::kNo;
  }
  if (std::isnan(p.ci95)) {
    return Clears::kNoCi;
  }
  return Passes(WorstEnd(p, bar), bar) ? Clears::kYes : Clears::kMeanOnly;
}

}  // namespace

absl::StatusOr<Bar> ParseBar(const std::string& expression) {
  const size_t op_at = expression.find_first_of("<>=!");
  if (op_at == std::string::npos) {
    return BarError(expression, "no operator");
  }
  size_t op_end = op_at;
  while (op_end < expression.size() &&
         std::string("<>=!").find(expression[op_end]) != std::string::npos) {
    ++op_end;
  }
  const std::string op = expression.substr(op_at, op_end - op_at);
  Bar bar;
  if (op == ">=") {
    bar.op = BarOp::kGe;
  } else if (op == ">") {
    bar.op = BarOp::kGt;
  } else if (op == "<=") {
    bar.op = BarOp::kLe;
  } else if (op == "<") {
    bar.op = BarOp::kLt;
  } else {
    return BarError(expression,
                    absl::StrCat("'", op, "' at column ", op_at + 1, " is not an operator"));
  }
  bar.metric = std::string(absl::StripAsciiWhitespace(expression.substr(0, op_at)));
  if (bar.metric.empty()) {
    return BarError(expression, absl::StrCat("no metric before '", op, "'"));
  }
  if (std::any_of(bar.metric.begin(), bar.metric.end(),
                  [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
    return BarError(expression, absl::StrCat("'", bar.metric, "' is not a metric name (spaces)"));
  }
  const std::string value(absl::StripAsciiWhitespace(expression.substr(op_end)));
  char* end = nullptr;
  bar.value = value.empty() ? kNaN : std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(bar.value)) {
    return BarError(expression, absl::StrCat("'", value, "' after '", op, "' at column ",
                                             op_end + 1, " is not a finite number"));
  }
  return bar;
}

std::string OpText(BarOp op) {
  switch (op) {
    case BarOp::kGe:
      return ">=";
    case BarOp::kGt:
      return ">";
    case BarOp::kLe:
      return "<=";
    case BarOp::kLt:
      return "<";
  }
  return "?";
}

std::string BarText(const Bar& bar) {
  return absl::StrCat(bar.metric, " ", OpText(bar.op), " ", absl::StrFormat("%g", bar.value));
}

absl::StatusOr<CostAxis> ParseCost(const std::string& name) {
  if (name.empty() || name == "params") {
    return CostAxis::kParams;
  }
  if (name == "flops") {
    return CostAxis::kFlops;
  }
  if (name == "tokens_per_s") {
    return CostAxis::kTokensPerS;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--cost: '", name, "' is not one of params, flops, tokens_per_s"));
}

std::string CostName(CostAxis cost) {
  switch (cost) {
    case CostAxis::kParams:
      return "params";
    case CostAxis::kFlops:
      return "flops";
    case CostAxis::kTokensPerS:
      return "tokens_per_s";
  }
  return "?";
}

bool LowerIsCheaper(CostAxis cost) { return cost != CostAxis::kTokensPerS; }

double CostOf(const Row& row, CostAxis cost) {
  switch (cost) {
    case CostAxis::kParams:
      return row.params;
    case CostAxis::kFlops:
      return row.flops_per_token;
    case CostAxis::kTokensPerS:
      return row.tokens_per_s;
  }
  return kNaN;
}

std::string ClearsName(Clears clears) {
  switch (clears) {
    case Clears::kYes:
      return "yes";
    case Clears::kMeanOnly:
      return "mean_only";
    case Clears::kNo:
      return "no";
    case Clears::kNoCi:
      return "no_ci";
    case Clears::kNoValue:
      return "no_value";
    case Clears::kFailed:
      return "failed_seeds";
  }
  return "?";
}

Frontier BuildFrontier(const std::vector<Row>& rows, const Bar& bar, CostAxis cost, bool maximize,
                       const std::string& estimates) {
  Frontier frontier;
  frontier.bar = bar;
  frontier.cost = cost;
  frontier.maximize = maximize;
  for (const Row& row : rows) {
    FrontierPoint& p = frontier.points.emplace_back();
    p.variant = row.variant;
    const double c = CostOf(row, cost);
    p.cost = std::isfinite(c) ? c : kNaN;
    for (const Cell& cell : row.cells) {
      if (cell.metric == bar.metric) {
        p.n = cell.n;
        p.mean = cell.mean;
        p.ci95 = cell.ci95;
        p.lo = cell.mean - cell.ci95;
        p.hi = cell.mean + cell.ci95;
      }
    }
    p.clears = Judge(p, bar);
    if (row.runs_failed > 0 && p.clears != Clears::kNoValue) {
      p.clears = Clears::kFailed;  // judged on the seeds that survived: never clears
    }
  }
  const bool lower = LowerIsCheaper(cost);
  // Cheapest first; unknown costs last; stable, so ties keep the rows' order.
  std::stable_sort(frontier.points.begin(), frontier.points.end(),
                   [&](const FrontierPoint& a, const FrontierPoint& b) {
                     if (std::isnan(a.cost) || std::isnan(b.cost)) {
                       return !std::isnan(a.cost) && std::isnan(b.cost);
                     }
                     return lower ? a.cost < b.cost : a.cost > b.cost;
                   });
  auto good_gt = [&](double a, double b) { return maximize ? a > b : a < b; };
  // One sweep in cost order: a point is on the front when no point of its cost has a better mean
  // and its mean beats every strictly cheaper point's (so at most O(n log n) for a wide grid).
  bool any_cheaper = false;
  double cheaper_best = kNaN;  // the best mean of the strictly cheaper points with a mean
  for (size_t begin = 0; begin < frontier.points.size();) {
    if (std::isnan(frontier.points[begin].cost)) {
      break;  // unknown costs are last and never on the front
    }
    size_t end = begin;
    bool any_mean = false;
    double group_best = kNaN;
    for (; end < frontier.points.size() && frontier.points[end].cost == frontier.points[begin].cost;
         ++end) {
      const double mean = frontier.points[end].mean;
      if (!std::isnan(mean) && (!any_mean || good_gt(mean, group_best))) {
        group_best = mean;
        any_mean = true;
      }
    }
    for (size_t i = begin; i < end; ++i) {
      FrontierPoint& p = frontier.points[i];
      p.on_front = !std::isnan(p.mean) && !good_gt(group_best, p.mean) &&
                   (!any_cheaper || good_gt(p.mean, cheaper_best));
    }
    if (any_mean && (!any_cheaper || good_gt(group_best, cheaper_best))) {
      cheaper_best = group_best;
      any_cheaper = true;
    }
    begin = end;
  }
  // The cheapest that clears, by a fixed sequence from the most expensive down (Hsu & Berger
  // 1999): each step tests "clears" at the CI's one-sided 2.5% and the walk stops at the first
  // point that does not clear, so the chance of naming one that does not clear is at most 2.5%
  // however many variants there are. A scan for the cheapest of all that clear alone is not.
  frontier.estimates = estimates;
  // In levels of equal cost: a level is passed only when each of its members in the sequence
  // clears (so a false claim at the first level that has one must clear for anything at or below
  // it to be named); the answer at a passed level is its best mean, then the rows' order.
  for (size_t end = frontier.points.size(); end > 0;) {
    size_t begin = end - 1;
    while (begin > 0 && frontier.points[begin - 1].cost == frontier.points[end - 1].cost) {
      --begin;
    }
    bool passed = true;
    std::optional<size_t> best;
    for (size_t i = begin; i < end; ++i) {
      FrontierPoint& p = frontier.points[i];
      if (std::isnan(p.cost) || p.clears == Clears::kNoValue || p.clears == Clears::kNoCi ||
          p.clears == Clears::kFailed) {
        // No cost, no estimate, fewer than 2 seeds or a failed seed: never claimed, so not in the
        // sequence (which of them are left out does not depend on any variant's values).
        continue;
      }
      p.reached = true;
      if (p.clears != Clears::kYes) {
        passed = false;
      } else if (!best.has_value() || good_gt(p.mean, frontier.points[*best].mean)) {
        best = i;
      }
    }
    if (!passed) {
      break;
    }
    if (best.has_value() && estimates != "optimistic") {
      frontier.cheapest = best;
    }
    end = begin;
  }
  return frontier;
}

}  // namespace tae::report
