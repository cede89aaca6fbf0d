// The dashboard's route table: every path the dashboard answers, the only place one is matched
// (docs/dashboard.md lists them). The first route whose method and pattern (MatchPath,
// routes.h) fit the request answers it; the catch-alls at the end answer the rest.

#include "server/http/api.h"

namespace tae::http {

const std::vector<Api::Route>& Api::Routes() {
  static const auto* const routes = new std::vector<Route>{
      {"GET", "/api/session", &Api::Session},
      {"GET", "/api/events", nullptr, nullptr, &Api::AllEvents},
      {"GET", "/api/fleet", &Api::Fleet},
      {"POST", "/api/agents/{agent}/drain", &Api::DrainAgent},

      {"GET", "/api/experiments", &Api::Experiments},
      {"GET", "/api/experiments/{exp}", &Api::ExperimentDetail},
      {"GET", "/api/experiments/{exp}/runs", &Api::ExperimentRuns},
      {"GET", "/api/experiments/{exp}/metrics", &Api::ExperimentMetrics},
      {"GET", "/api/experiments/{exp}/report", &Api::ExperimentReport},
      {"GET", "/api/experiments/{exp}/report.txt", &Api::ExperimentReportText},
      {"GET", "/api/experiments/{exp}/history", &Api::ExperimentHistory},
      {"GET", "/api/experiments/{exp}/frontier.svg", &Api::FrontierSvg},
      {"GET", "/api/experiments/{exp}/scale.svg", &Api::ScaleSvg},
      {"GET", "/api/experiments/{exp}/curves", &Api::CurvesAsJson},
      {"GET", "/api/experiments/{exp}/curves.csv", &Api::CurvesAsCsv},
      {"GET", "/api/experiments/{exp}/curves.svg", &Api::CurvesAsSvg},
      {"GET", "/api/experiments/{exp}/events", nullptr, nullptr, &Api::ExperimentEvents},
      {"POST", "/api/experiments/{exp}/cancel", &Api::CancelExperiment},
      {"POST", "/api/experiments/{exp}/pause", &Api::PauseExperiment},
      {"POST", "/api/experiments/{exp}/resume", &Api::ResumeExperiment},
      {"POST", "/api/experiments/{exp}/retry", &Api::RetryExperiment},

      {"GET", "/api/runs/{run}", &Api::RunDetail},
      {"GET", "/api/runs/{run}/series", &Api::RunSeries},
      {"GET", "/api/runs/{run}/logs", &Api::RunLogs},
      {"GET", "/api/runs/{run}/logs.txt", nullptr, &Api::RunLogText},
      {"GET", "/api/runs/{run}/logs/search", nullptr, &Api::SearchLogs},
      {"GET", "/api/runs/{run}/logs/stream", nullptr, nullptr, &Api::RunLogStream},
      {"POST", "/api/runs/{run}/cancel", &Api::CancelRun},

      {"GET", "/api/*", &Api::NoSuchEndpoint},
      {"POST", "/*", &Api::NoSuchAction},
      {"GET", "/*", nullptr, &Api::Page},  // the page and its files (assets.h)
  };
  return *routes;
}

}  // namespace tae::http
