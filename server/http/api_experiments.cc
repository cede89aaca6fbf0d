// The experiments' handlers (their routes: api_routes.cc): GET /api/experiments,
// /api/experiments/ID (with its search savings), /api/experiments/ID/runs, /metrics (the names and
// the default ones), /report (with each metric's goal and the config keys that tell the variants
// apart; ?frontier= adds the cost frontier) and /frontier.svg (its figure); POST
// /api/experiments/ID/cancel|pause|resume|retry. The curves are api_curves.cc's.

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/api/frontier_figure.h"
#include "common/api/json.h"
#include "common/api/scale_figure.h"
#include "common/metrics/names.h"
#include "common/report_text/report_text.h"
#include "common/spec/spec.h"
#include "common/status/macros.h"
#include "server/http/api.h"
#include "server/http/reply.h"
#include "server/http/views.h"
#include "server/report/report.h"
#include "server/wire/wire.h"

namespace tae::http {
namespace {

using nlohmann::ordered_json;

}  // namespace

absl::StatusOr<int64_t> Api::ExperimentOf(const PathParams& params) {
  return query_->ResolveExperiment(params.at("exp"));
}

Response Api::Experiments(const Request& request, const PathParams& params) {
  absl::StatusOr<std::vector<model::ExperimentRecord>> exps = query_->ListExperiments(0);
  if (!exps.ok()) return FromStatus(exps.status());
  ordered_json list = ordered_json::array();
  for (const model::ExperimentRecord& exp : *exps) {
    tae::v1::Experiment proto;
    wire::ToProto(exp, &proto);
    list.push_back(api::ExperimentJson(proto));
  }
  return Ok({{"experiments", list}});
}

Response Api::ExperimentDetail(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(*id);
  if (!exp.ok()) return FromStatus(exp.status());
  tae::v1::Experiment proto;
  wire::ToProto(*exp, &proto);
  absl::StatusOr<std::optional<report::SearchSavings>> savings = query_->SearchSavings(*exp);
  if (!savings.ok()) return FromStatus(savings.status());
  if (*savings) {
    wire::ToProto(**savings, proto.mutable_search_savings());
  }
  return Ok(api::ExperimentJson(proto));
}

Response Api::ExperimentRuns(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  // ?limit=N&after=RUN: a page (the dashboard's runs list: the first at once, more on demand).
  int64_t limit = 0;
  int64_t after = 0;
  for (const auto& [name, value] : {std::pair{"limit", &limit}, std::pair{"after", &after}}) {
    const std::string text = request.Param(name);
    if (!text.empty() && (!absl::SimpleAtoi(text, value) || *value < 0)) {
      return Response::Error(400, absl::StrCat(name, ": a whole number >= 0"));
    }
  }
  const std::string form = request.Param("form");
  if (!form.empty() && form != "rows" && form != "columns") {
    return Response::Error(400, absl::StrCat("form: '", form, "' is not rows or columns"));
  }
  // Asked again while nothing was stored (a notebook's runs(), the dashboard's list of an ended
  // study): the same bytes.
  const std::string key = absl::StrCat("runs|", *id, "|", form, "|", after, "|", limit);
  const int64_t version = query_->DataVersion();
  if (std::optional<Response> cached = CachedAnswer(key, version)) {
    return *std::move(cached);
  }
  absl::StatusOr<query::RunsPage> page = query_->ListRunsPage(absl::StrCat(*id), after, limit);
  if (!page.ok()) return FromStatus(page.status());
  if (form == "columns") {
    Response response = RunsAsColumns(*page);
    KeepAnswer(key, version, response);
    return response;
  }
  ordered_json list = ordered_json::array();
  for (const query::RunView& run : page->runs) {
    tae::v1::Run proto;
    wire::ToProto(run, &proto);
    list.push_back(api::RunJson(proto));
  }
  Response response =
      Ok({{"runs", list}, {"total", page->total}, {"next_after", page->next_after}});
  KeepAnswer(key, version, response);
  return response;
}

// ?form=columns: the page as columns, for a reader that makes a table of it (the `tae` Python
// library's runs()): "columns" {field: [one value per run]} of every field a run's JSON has but
// its config and final metrics (null where a run lacks it), "final_metrics" {metric: [...]}
// with "final_null" [[row, metric], ...] where a run has the metric as null (NaN or inf),
// "configs" [each variant's config, that of its first run on the page], "config_ref" [per run,
// its variant's index there], "config_diff" [[row, key, value], ...] where a run's config
// differs (a key it lacks: [row, key] in "config_absent"), "rows", "total" and "next_after".
Response Api::RunsAsColumns(const query::RunsPage& page) {
  const size_t rows = page.runs.size();
  // Columns in the order their fields first appear, found by name in a hash (an ordered_json
  // object finds a key by a linear scan), each an array of one value per run (null: absent).
  struct Columns {
    std::vector<std::string> keys;
    std::unordered_map<std::string, size_t> index;
    std::vector<ordered_json> values;
    ordered_json& Of(const std::string& key, size_t rows) {
      auto [it, fresh] = index.try_emplace(key, values.size());
      if (fresh) {
        keys.push_back(key);
        values.push_back(ordered_json(std::vector<std::nullptr_t>(rows, nullptr)));
      }
      return values[it->second];
    }
    ordered_json Json() {
      ordered_json out = ordered_json::object();
      for (size_t i = 0; i < keys.size(); ++i) {
        out[keys[i]] = std::move(values[i]);
      }
      return out;
    }
  };
  // A variant's config: the first run's on the page, parsed once; and its text around the seed's
  // value, so that a run whose config differs only there is told apart without parsing it.
  struct Base {
    ordered_json config;
    std::map<std::string, const ordered_json*> keys;  // into `config`
    std::string text;
    std::optional<std::pair<std::string, std::string>> around_seed;  // text before and after
  };
  Columns columns;
  Columns finals;
  std::deque<Base> bases;                 // a deque: `keys` point into its elements
  std::map<std::string, size_t> base_of;  // variant: its index in bases
  ordered_json refs = ordered_json::array();
  ordered_json changed = ordered_json::array();
  ordered_json absent = ordered_json::array();
  ordered_json nulls = ordered_json::array();
  const std::string seed_key(spec::kSeedKey);
  const std::string seed_field = absl::StrCat("\"", seed_key, "\":");
  for (size_t row = 0; row < rows; ++row) {
    const query::RunView& run = page.runs[row];
    tae::v1::Run proto;
    wire::ToProto(run, &proto);
    const std::string text = std::move(*proto.mutable_config_json());
    // RunJson's fields straight into the columns (no object per run); the config below.
    api::RunFields(
        proto,
        [&](const char* key, ordered_json value) {
          if (std::strcmp(key, "final_metrics") != 0) {
            columns.Of(key, rows)[row] = std::move(value);
            return;
          }
          for (auto& [metric, number] : value.items()) {
            if (number.is_null()) {
              nulls.push_back(ordered_json::array({row, metric}));  // NaN or inf: diverged
            }
            finals.Of(metric, rows)[row] = std::move(number);
          }
        },
        /*config=*/false);
    auto [at, fresh] = base_of.try_emplace(run.run.variant, bases.size());
    if (fresh) {
      Base& base = bases.emplace_back();
      base.config = ordered_json::parse(text, nullptr, false);
      if (!base.config.is_object()) {
        base.config = ordered_json::object();
      }
      for (const auto& [key, value] : base.config.items()) {
        base.keys[key] = &value;
      }
      base.text = text;
      if (const size_t key = text.find(seed_field); key != std::string::npos) {
        const size_t from = key + seed_field.size();
        const size_t to = text.find_first_of(",}", from);
        if (to != std::string::npos) {
          base.around_seed.emplace(text.substr(0, from), text.substr(to));
        }
      }
    }
    refs.push_back(at->second);
    const Base& base = bases[at->second];
    if (text == base.text) {
      continue;
    }
    if (base.around_seed.has_value()) {
      const auto& [before, after] = *base.around_seed;
      if (text.size() > before.size() + after.size() && absl::StartsWith(text, before) &&
          absl::EndsWith(text, after)) {
        int64_t seed = 0;
        if (absl::SimpleAtoi(absl::string_view(text).substr(
                                 before.size(), text.size() - before.size() - after.size()),
                             &seed)) {
          changed.push_back(ordered_json::array({row, seed_key, seed}));
          continue;  // the same config but its seed
        }
      }
    }
    ordered_json config = ordered_json::parse(text, nullptr, false);
    if (!config.is_object()) {
      config = ordered_json::object();
    }
    size_t found = 0;
    for (const auto& [key, value] : config.items()) {
      auto it = base.keys.find(key);
      if (it == base.keys.end() || *it->second != value) {
        changed.push_back(ordered_json::array({row, key, value}));
      }
      found += it == base.keys.end() ? 0 : 1;
    }
    if (found < base.keys.size()) {
      for (const auto& [key, value] : base.keys) {
        if (!config.contains(key)) {
          absent.push_back(ordered_json::array({row, key}));
        }
      }
    }
  }
  ordered_json config_list = ordered_json::array();
  for (Base& base : bases) {
    config_list.push_back(std::move(base.config));
  }
  return Ok({{"columns", columns.Json()},
             {"final_metrics", finals.Json()},
             {"final_null", std::move(nulls)},
             {"configs", std::move(config_list)},
             {"config_ref", std::move(refs)},
             {"config_diff", std::move(changed)},
             {"config_absent", std::move(absent)},
             {"rows", rows},
             {"total", page.total},
             {"next_after", page.next_after}});
}

Response Api::ExperimentMetrics(const Request& request, const PathParams& params) {
  absl::StatusOr<int64_t> id = ExperimentOf(params);
  if (!id.ok()) return FromStatus(id.status());
  absl::StatusOr<std::vector<std::string>> names = query_->MetricNames(*id);
  if (!names.ok()) return FromStatus(names.status());
  absl::StatusOr<model::ExperimentRecord> exp = query_->GetExperiment(*id);
  if (!exp.ok()) return FromStatus(exp.status());
  std::vector<std::string> defaults = exp->report.metrics;
  if (defaults.empty()) {
    defaults = metrics::DefaultMetrics(*names);
  }
  return Ok({{"metrics", *names}, {"default", defaults}});
}

absl::StatusOr<query::ReportResult> Api::ReportOf(const Request& request,
                                                  const PathParams& params) {
  ASSIGN_OR_RETURN(int64_t id, ExperimentOf(params));
  std::vector<std::string> metrics =
      absl::StrSplit(request.Param("metrics"), ',', absl::SkipEmpty());
  return query_->Report(absl::StrCat(id), metrics, request.Param("baseline"), request.Param("sort"),
                        request.Param("view"), request.Param("frontier"), request.Param("cost"),
                        !request.Param("scale").empty() && request.Param("scale") != "0",
                        std::strtod(request.Param("at").c_str(), nullptr));
}

Response Api::ExperimentReport(const Request& request, const PathParams& params) {
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  ordered_json out = api::ReportJson(proto);
  ordered_json goal = ordered_json::object();
  for (const std::string& metric : report->metrics) {
    goal[metric] = report::HigherIsBetter(metric, report->experiment.report.goal) ? "max" : "min";
  }
  out["goal"] = goal;
  absl::StatusOr<std::vector<query::RunView>> runs =
      query_->ListRuns(absl::StrCat(report->experiment.id));
  if (!runs.ok()) return FromStatus(runs.status());
  out["varying"] = VaryingKeys(*runs);
  return Ok(out);
}

Response Api::ExperimentReportText(const Request& request, const PathParams& params) {
  const std::string format = request.Param("format", "table");
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  // What `taectl report [--frontier BAR | --scale] --format F` prints on stdout, from the same
  // code.
  const bool scale = !request.Param("scale").empty() && request.Param("scale") != "0";
  if (scale && format != "table") {
    return FromStatus(absl::InvalidArgumentError(
        absl::StrCat("format: the scale fit is text (table) or JSON (/report), not ", format)));
  }
  absl::StatusOr<std::string> text =
      scale ? absl::StatusOr<std::string>(report_text::RenderScale(proto))
      : !request.Param("frontier").empty() && format == "table"
          ? report_text::RenderFrontier(proto)
          : report_text::RenderReport(proto, format);
  if (!text.ok()) return FromStatus(text.status());
  Response response;
  response.status = 200;
  response.content_type = "text/plain; charset=utf-8";
  response.body = *std::move(text);
  return response;
}

Response Api::FrontierSvg(const Request& request, const PathParams& params) {
  if (request.Param("frontier").empty()) {
    return FromStatus(absl::InvalidArgumentError(
        absl::StrCat("frontier: a bar such as eval/acc>=0.99 is required (operators ",
                     report::kBarOperators, ")")));
  }
  absl::StatusOr<query::ReportResult> report = ReportOf(request, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  Response response;
  response.content_type = "image/svg+xml";
  response.body = plot::RenderFrontierSvg(api::FrontierFigureOf(proto));
  return Download(
      std::move(response),
      absl::StrCat("e", report->experiment.id, "-frontier-",
                   absl::StrReplaceAll(proto.frontier().metric(), {{"/", "_"}}), ".svg"),
      request.Param("download") == "1");
}

// ?metrics=LOSS&at=N&point=GRIDPOINT: the ladder fit's figure (taectl plot --scale); with a [grid]
// the first point's unless `point` names one.
Response Api::ScaleSvg(const Request& request, const PathParams& params) {
  Request scaled = request;
  scaled.query["scale"] = "1";
  absl::StatusOr<query::ReportResult> report = ReportOf(scaled, params);
  if (!report.ok()) return FromStatus(report.status());
  tae::v1::ReportResponse proto;
  wire::ToProto(*report, &proto);
  const std::string point = request.Param("point");
  int index = -1;
  std::vector<std::string> points;
  for (int i = 0; i < proto.scale_size(); ++i) {
    points.push_back(proto.scale(i).point());
    if (index < 0 && (point.empty() || proto.scale(i).point() == point)) index = i;
  }
  if (index < 0) {
    return FromStatus(absl::NotFoundError(
        point.empty() ? "the report has no ladder fit"
                      : absl::StrCat("point: '", point, "' is not a grid point of the ladder (",
                                     absl::StrJoin(points, ", "), ")")));
  }
  Response response;
  response.content_type = "image/svg+xml";
  response.body = plot::RenderScaleSvg(api::ScaleFigureOf(proto, index));
  return Download(
      std::move(response),
      absl::StrCat("e", report->experiment.id, "-scale-",
                   absl::StrReplaceAll(proto.scale(index).metric(), {{"/", "_"}}), ".svg"),
      request.Param("download") == "1");
}

Response Api::CancelExperiment(const Request& request, const PathParams& params) {
  absl::StatusOr<int> n = controller_->Cancel(params.at("exp"), "cancelled from the dashboard");
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"ok", true}, {"cancelled", *n}});
}

namespace {

Response Paused(const absl::StatusOr<int64_t>& id, bool paused) {
  if (!id.ok()) return FromStatus(id.status());
  return Ok({{"ok", true}, {"experiment", *id}, {"paused", paused}});
}

}  // namespace

Response Api::PauseExperiment(const Request& request, const PathParams& params) {
  return Paused(controller_->SetPaused(params.at("exp"), true), true);
}

Response Api::ResumeExperiment(const Request& request, const PathParams& params) {
  return Paused(controller_->SetPaused(params.at("exp"), false), false);
}

Response Api::RetryExperiment(const Request& request, const PathParams& params) {
  absl::StatusOr<int> n = controller_->Retry(params.at("exp"));
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"ok", true}, {"requeued", *n}});
}

}  // namespace tae::http
