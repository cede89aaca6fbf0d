#pragma once

// The figure of a report's cost frontier (ReportResponse.frontier): what taectl plot --frontier
// writes and the dashboard's /frontier.svg answers, from one implementation.

#include "common/plot/frontier_svg.h"
#include "tae/v1/control.pb.h"

namespace tae::api {

// Title "<name> (e<id>): <metric> against <cost>", the axes' labels (with which way is
// cheaper), the bar, every point as a mark, and the verdict: "cheapest that clears eval/acc >=
// 0.99: small" ("fastest" on tokens_per_s) or "none clears eval/acc >= 0.99 with its whole 95%
// CI". `report` must have a frontier.
plot::FrontierFigure FrontierFigureOf(const tae::v1::ReportResponse& report);

}  // namespace tae::api
