#pragma once

// The figure of a report's ladder fit (ReportResponse.scale): what taectl plot --scale writes and
// the dashboard's /scale.svg answers, from one implementation.

#include "common/plot/scale_svg.h"
#include "tae/v1/control.pb.h"

namespace tae::api {

// Fit `index` of report.scale (one per grid point): title "<name> (e<id>): <metric> against N
// [at <point>]", the exponent and E with their intervals as the subtitle (or why there is no
// fit), each variant's rung means ± 95% CI at its rung's N, the fitted law per variant with its
// multiplier, the legend "m = 1.12 [1.05, 1.19], trend none", and the fit's warnings as notes.
// `index` must be < report.scale_size().
plot::ScaleFigure ScaleFigureOf(const tae::v1::ReportResponse& report, int index = 0);

}  // namespace tae::api
