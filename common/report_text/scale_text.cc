// RenderScale: a [scale] ladder's fit as text (report_text.h).
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/report_text/report_text.h"
#include "common/text/table.h"

namespace tae::report_text {
namespace {

using text::FormatNumber;
using text::Table;

std::string Num(double value) { return std::isfinite(value) ? FormatNumber(value) : "-"; }

std::string Size(double n) {
  if (!std::isfinite(n)) {
    return "?";
  }
  const char* units[] = {"", "K", "M", "B", "T"};
  int unit = 0;
  while (std::fabs(n) >= 1000 && unit < 4) {
    n /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.3g%s", n, units[unit]);
}

std::string Signed(double value) {
  return std::isfinite(value) ? absl::StrFormat("%+.4g", value) : "-";
}

std::string WithInterval(const tae::v1::ScaleEstimate& e, bool sign = false) {
  const auto show = [&](double x) { return sign ? Signed(x) : Num(x); };
  if (!std::isfinite(e.lo()) || !std::isfinite(e.hi())) {
    return show(e.value());
  }
  return absl::StrCat(show(e.value()), " [", show(e.lo()), ", ", show(e.hi()), "]");
}

std::string Percent(double level) { return absl::StrFormat("%.4g%%", 100 * (1 - level)); }

void RenderFit(const tae::v1::ScaleFit& fit, std::string* out) {
  absl::StrAppend(out, fit.metric(), fit.point().empty() ? "" : absl::StrCat(" at ", fit.point()),
                  ": L = E + A·(m·N)^-α over ", fit.rungs_size(), " rungs\n\n");
  Table rungs({"rung", "N", "from", "overrides"});
  for (const tae::v1::ScaleRung& r : fit.rungs()) {
    rungs.Add({absl::StrCat(r.rung()), Size(r.size()),
               r.size_source().empty() ? "unknown" : r.size_source(), r.overrides()});
  }
  absl::StrAppend(out, rungs.Render(), "\n");
  Table effects({"variant", "rung", "N", absl::StrCat(fit.metric(), " ± 95% CI"),
                 "Δ vs the rung's baseline [interval]", "verdict"});
  for (int v = 1; v < fit.variants_size(); ++v) {
    const tae::v1::ScaleVariant& variant = fit.variants(v);
    for (const tae::v1::ScaleRungEffect& e : variant.rungs()) {
      const double size = e.rung() < fit.rungs_size() ? fit.rungs(e.rung()).size() : NAN;
      const std::string mean =
          e.n() == 0
              ? "-"
              : absl::StrCat(Num(e.mean()),
                             std::isfinite(e.ci95()) ? absl::StrCat(" ± ", Num(e.ci95())) : "");
      std::string delta = Signed(e.delta());
      if (std::isfinite(e.delta_lo()) && std::isfinite(e.delta_hi())) {
        absl::StrAppend(&delta, " [", Signed(e.delta_lo()), ", ", Signed(e.delta_hi()), "]");
      }
      std::string verdict = e.decision().empty() ? (e.note().empty() ? "-" : e.note())
                                                 : absl::StrCat(e.decision(), " ", e.mark());
      effects.Add({variant.variant(), absl::StrCat(e.rung()), Size(size), mean, delta, verdict});
    }
  }
  absl::StrAppend(out, effects.Render(), "\n");
  if (!fit.ok()) {
    absl::StrAppend(out, "no fit: ", fit.why(), "\n");
    return;
  }
  const bool e_at_floor = fit.irreducible().value() == 0 && !std::isfinite(fit.irreducible().lo());
  absl::StrAppend(out, "exponent α = ", WithInterval(fit.exponent()), "   E = ",
                  e_at_floor ? "0 (at its floor: not identified)" : WithInterval(fit.irreducible()),
                  "   A = ", Num(fit.coefficient()), "\n\n");
  Table variants(
      {"variant", "multiplier m [95% CI]",
       absl::StrCat("trend (slope d log m / d log N [", Percent(fit.trend_level()), " CI])")});
  for (int v = 1; v < fit.variants_size(); ++v) {
    const tae::v1::ScaleVariant& variant = fit.variants(v);
    std::string trend = variant.trend().empty() ? "-" : variant.trend();
    if (std::isfinite(variant.slope().value())) {
      absl::StrAppend(&trend, " (", WithInterval(variant.slope(), true), ")");
    }
    variants.Add({variant.variant(), WithInterval(variant.multiplier()), trend});
  }
  absl::StrAppend(out, variants.Render());
  absl::StrAppend(out,
                  "m > 1: the variant is worth a baseline m times its size; the trend says "
                  "whether that grows or shrinks with N\n");
  for (const tae::v1::ScaleVariant& variant : fit.variants()) {
    if (variant.skipped() > 0) {
      absl::StrAppend(out, variant.variant(), ": ", variant.skipped(), " run(s) of larger rungs ",
                      variant.skipped_why(), " (saved about ",
                      absl::StrFormat("%.3g", variant.skipped_hours()), " accelerator-hours)\n");
    }
  }
  if (fit.at() > 0) {
    absl::StrAppend(out, "\nat N = ", Size(fit.at()), " (baseline ", fit.metric(), " ",
                    WithInterval(fit.at_baseline()), "):\n");
    for (int v = 1; v < fit.variants_size(); ++v) {
      const tae::v1::ScaleVariant& variant = fit.variants(v);
      if (variant.at_ok()) {
        absl::StrAppend(
            out, "  ", variant.variant(), ": Δ ", WithInterval(variant.at_effect(), true),
            variant.at_trend() ? " (by its trend)" : " (by its constant multiplier)", "\n");
      } else {
        absl::StrAppend(out, "  ", variant.variant(), ": refused: ", variant.at_refused(), "\n");
      }
    }
  }
  for (const std::string& warning : fit.warnings()) {
    absl::StrAppend(out, "warning: ", warning, "\n");
  }
  absl::StrAppend(out, "controls: ", fit.controls(), "\n");
}

}  // namespace

std::string RenderScale(const tae::v1::ReportResponse& report) {
  std::string out = absl::StrCat("e", report.experiment().id(), " ", report.experiment().name(),
                                 ": a ladder of model sizes\n");
  for (const tae::v1::ScaleFit& fit : report.scale()) {
    absl::StrAppend(&out, "\n");
    RenderFit(fit, &out);
  }
  return out;
}

}  // namespace tae::report_text
