#include "common/api/frontier_figure.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::api {

plot::FrontierFigure FrontierFigureOf(const tae::v1::ReportResponse& report) {
  const tae::v1::ReportFrontier& f = report.frontier();
  const std::string cost = f.cost() == "flops"          ? "FLOPs/token"
                           : f.cost() == "tokens_per_s" ? "tokens/s"
                                                        : "params";
  const std::string bar =
      absl::StrCat(f.metric(), " ", f.op(), " ", absl::StrFormat("%g", f.value()));
  plot::FrontierFigure figure;
  figure.title = absl::StrCat(report.experiment().name(), " (e", report.experiment().id(),
                              "): ", f.metric(), " against ", cost);
  figure.x_label = absl::StrCat(
      cost, f.lower_is_cheaper() ? " (lower is cheaper)" : " (higher is faster, so cheaper)");
  figure.y_label = absl::StrCat(f.metric(), " (mean ± 95% CI; ",
                                f.goal() == "max" ? "higher" : "lower", " is better)");
  figure.bar_label = bar;
  figure.bar = f.value();
  // What the estimates are goes with the answer: a tuned view without search.confirm names none.
  const std::string estimates = f.estimates().empty() ? "as run" : f.estimates();
  figure.verdict =
      f.cheapest().empty()
          ? (estimates == "optimistic"
                 ? absl::StrCat("none named: estimates optimistic (chosen on the same seeds)")
                 : absl::StrCat("none clears ", bar, " (from the most expensive down); estimates ",
                                estimates))
          : absl::StrCat(f.lower_is_cheaper() ? "cheapest" : "fastest", " that clears ", bar, ": ",
                         f.cheapest(), "; estimates ", estimates);
  for (const tae::v1::FrontierPoint& p : f.points()) {
    plot::FrontierMark& m = figure.marks.emplace_back();
    m.name = p.variant();
    m.cost = p.cost();
    m.mean = p.mean();
    m.lo = p.lo();
    m.hi = p.hi();
    m.on_front = p.on_front();
    m.clears = p.clears() == "yes";
    m.cheapest = p.variant() == f.cheapest();
  }
  return figure;
}

}  // namespace tae::api
