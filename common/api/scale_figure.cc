#include "common/api/scale_figure.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::api {
namespace {

std::string Num(double x) { return absl::StrFormat("%.3g", x); }

std::string WithInterval(const tae::v1::ScaleEstimate& e) {
  if (!std::isfinite(e.value())) {
    return "-";
  }
  if (!std::isfinite(e.lo()) || !std::isfinite(e.hi())) {
    return Num(e.value());
  }
  return absl::StrCat(Num(e.value()), " [", Num(e.lo()), ", ", Num(e.hi()), "]");
}

}  // namespace

plot::ScaleFigure ScaleFigureOf(const tae::v1::ReportResponse& report, int index) {
  const tae::v1::ScaleFit& fit = report.scale(index);
  plot::ScaleFigure figure;
  figure.title =
      absl::StrCat(report.experiment().name(), " (e", report.experiment().id(), "): ", fit.metric(),
                   " against N", fit.point().empty() ? "" : absl::StrCat(" at ", fit.point()));
  std::string source;
  for (const tae::v1::ScaleRung& r : fit.rungs()) {
    if (!r.size_source().empty() && source.empty()) {
      source = r.size_source();
    }
  }
  figure.x_label = source.empty() ? "N (parameters)" : absl::StrCat("N (parameters, ", source, ")");
  figure.y_label = absl::StrCat(fit.metric(), " (mean ± 95% CI per rung)");
  if (fit.ok()) {
    figure.E = fit.irreducible().value();
    figure.A = fit.coefficient();
    figure.alpha = fit.exponent().value();
    figure.subtitle =
        absl::StrCat("L = E + A·(m·N)^-α:  α = ", WithInterval(fit.exponent()), ",  E = ",
                     fit.irreducible().value() == 0 && !std::isfinite(fit.irreducible().lo())
                         ? std::string("0 (at its floor)")
                         : WithInterval(fit.irreducible()));
  } else {
    figure.alpha = NAN;
    figure.subtitle = absl::StrCat("no fit: ", fit.why());
  }
  figure.at = fit.at();
  figure.log_size_ref = fit.curve_log_size_ref();
  for (int v = 0; v < fit.variants_size(); ++v) {
    const tae::v1::ScaleVariant& variant = fit.variants(v);
    plot::ScaleLine& line = figure.lines.emplace_back();
    line.name = variant.variant();
    // The curve of the model alpha, E and A come from (with a trend model, m drifts with N).
    line.multiplier = fit.ok() ? std::exp(variant.curve_log_multiplier()) : NAN;
    line.slope = variant.curve_slope();
    if (v == 0) {
      line.detail = "baseline (m = 1)";
    } else if (fit.ok()) {
      line.detail = absl::StrCat("m = ", WithInterval(variant.multiplier()),
                                 variant.trend().empty() ? "" : ", trend ", variant.trend());
    }
    if (variant.skipped() > 0) {
      absl::StrAppend(&line.detail, line.detail.empty() ? "" : "; ", variant.skipped(),
                      " runs skipped");
    }
    for (const tae::v1::ScaleRungEffect& e : variant.rungs()) {
      if (e.rung() < 0 || e.rung() >= fit.rungs_size() || e.n() == 0) {
        continue;
      }
      plot::ScaleMark& m = line.marks.emplace_back();
      m.size = fit.rungs(e.rung()).size();
      m.mean = e.mean();
      m.lo = std::isfinite(e.ci95()) ? e.mean() - e.ci95() : NAN;
      m.hi = std::isfinite(e.ci95()) ? e.mean() + e.ci95() : NAN;
    }
  }
  for (const std::string& warning : fit.warnings()) {
    figure.notes.push_back(absl::StrCat("warning: ", warning));
  }
  if (fit.ok()) {
    figure.notes.push_back(
        "lines: the fitted law, each variant's multiplier drifting with N as the trend model "
        "fits it; bars and bands: 95% CI of the rung's mean over seeds");
  }
  return figure;
}

}  // namespace tae::api
