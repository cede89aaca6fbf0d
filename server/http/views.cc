#include "server/http/views.h"

#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/plot/svg_plot.h"

namespace tae::http {
namespace {

constexpr char kSeedKey[] = "train.seed";

nlohmann::ordered_json Numbers(const curves::Column& column) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const std::optional<double>& value : column) {
    out.push_back(value && std::isfinite(*value) ? nlohmann::ordered_json(*value)
                                                 : nlohmann::ordered_json());
  }
  return out;
}

std::string CsvNumber(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? absl::StrCat(*value) : "";
}

std::string CsvText(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) {
    return text;
  }
  std::string out = "\"";
  for (char c : text) {
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return out + "\"";
}

}  // namespace

std::string Dump(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json LogPageJson(const query::LogPage& page) {
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  for (const store::LogRecord& line : page.lines) {
    lines.push_back({{"cursor", line.cursor},
                     {"attempt", line.attempt},
                     {"stream", line.stream},
                     {"text", line.text},
                     {"time", line.wall_time}});
  }
  return {{"lines", lines}, {"next", page.next}, {"finished", page.run_finished}};
}

nlohmann::ordered_json VaryingKeys(const std::vector<query::RunView>& runs) {
  std::map<std::string, nlohmann::json> first;  // variant -> its first run's config
  std::vector<std::string> order;
  for (const query::RunView& view : runs) {
    if (first.count(view.run.variant) > 0) {
      continue;
    }
    nlohmann::json config = nlohmann::json::parse(view.run.config_json, nullptr, false);
    if (!config.is_object()) {
      config = nlohmann::json::object();
    }
    first.emplace(view.run.variant, std::move(config));
    order.push_back(view.run.variant);
  }
  std::set<std::string> keys;
  for (const auto& [variant, config] : first) {
    for (const auto& [key, value] : config.items()) {
      keys.insert(key);
    }
  }
  std::vector<std::string> varying;
  for (const std::string& key : keys) {
    if (key == kSeedKey) {
      continue;
    }
    std::set<std::string> values;
    for (const auto& [variant, config] : first) {
      values.insert(config.contains(key) ? config[key].dump() : "null");
    }
    if (values.size() > 1) {
      varying.push_back(key);
    }
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const std::string& variant : order) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    const nlohmann::json& config = first[variant];
    for (const std::string& key : varying) {
      row[key] =
          config.contains(key) ? nlohmann::ordered_json(config[key]) : nlohmann::ordered_json();
    }
    out[variant] = row;
  }
  return out;
}

std::string CurveRequest::Key(int64_t experiment) const {
  return absl::StrCat(experiment, "|", metric, "|", x, "|", width, "|", smooth, "|", delta, "|",
                      baseline, "|", absl::StrJoin(variants, ","), "|", log_y);
}

absl::StatusOr<CurveRequest> ParseCurveRequest(const Request& request) {
  CurveRequest out;
  out.metric = request.Param("metric");
  out.x = request.Param("x", "step");
  if (out.x != "step" && out.x != "tokens" && out.x != "wall" && out.x != "rel") {
    return absl::InvalidArgumentError(
        absl::StrCat("x: '", out.x, "' is not one of step, tokens, wall, rel"));
  }
  if (std::string width = request.Param("width"); !width.empty()) {
    if (!absl::SimpleAtoi(width, &out.width) || out.width < 50 || out.width > 8000) {
      return absl::InvalidArgumentError("width: the chart's width in pixels, 50..8000");
    }
  }
  if (std::string smooth = request.Param("smooth"); !smooth.empty()) {
    if (!absl::SimpleAtod(smooth, &out.smooth) || !(out.smooth >= 0 && out.smooth < 1)) {
      return absl::InvalidArgumentError("smooth: an EMA weight in [0, 1), e.g. 0.6");
    }
  }
  const std::string delta = request.Param("delta", "0");
  if (delta != "0" && delta != "1") {
    return absl::InvalidArgumentError("delta: 0 or 1");
  }
  out.delta = delta == "1";
  const std::string logy = request.Param("logy", "0");
  out.log_y = logy == "1";
  out.baseline = request.Param("baseline", "baseline");
  if (out.baseline.empty()) {
    out.baseline = "baseline";
  }
  for (absl::string_view v : absl::StrSplit(request.Param("variants"), ',', absl::SkipEmpty())) {
    out.variants.emplace_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<double>> XValues(const std::string& x, const store::RunRecord& run,
                                            const std::vector<store::MetricPoint>& points) {
  std::vector<double> out;
  out.reserve(points.size());
  if (x == "step") {
    for (const store::MetricPoint& p : points) {
      out.push_back(static_cast<double>(p.step));
    }
  } else if (x == "wall" || x == "rel") {
    const double origin = x == "rel" && !points.empty() ? points.front().wall_time : 0;
    for (const store::MetricPoint& p : points) {
      out.push_back(p.wall_time - origin);
    }
  } else {
    const nlohmann::json config = nlohmann::json::parse(run.config_json, nullptr, false);
    auto number = [&](const char* key) -> std::optional<double> {
      if (!config.is_object() || !config.contains(key) || !config[key].is_number()) {
        return std::nullopt;
      }
      return config[key].get<double>();
    };
    std::optional<double> batch = number("train.batch_size");
    std::optional<double> seq = number("train.seq_len");
    if (!batch || !seq) {
      return absl::InvalidArgumentError(absl::StrCat(
          "x: tokens needs train.batch_size and train.seq_len in the runs' config, and r", run.id,
          " has no ", !batch ? "train.batch_size" : "train.seq_len"));
    }
    const double per_step = *batch * *seq * number("resources.hosts").value_or(1);
    for (const store::MetricPoint& p : points) {
      out.push_back(static_cast<double>(p.step) * per_step);
    }
  }
  return out;
}

nlohmann::ordered_json CurvesJson(int64_t experiment, const CurveRequest& request,
                                  const std::string& goal, const curves::Curves& curves) {
  nlohmann::ordered_json bands = nlohmann::ordered_json::array();
  for (const curves::Band& band : curves.bands) {
    bands.push_back({{"variant", band.variant},
                     {"runs", band.runs},
                     {"n_max", band.n_max},
                     {"mean", Numbers(band.mean)},
                     {"lo", Numbers(band.lo)},
                     {"hi", Numbers(band.hi)},
                     {"min", Numbers(band.min)},
                     {"max", Numbers(band.max)},
                     {"n", band.n}});
  }
  return {{"experiment", experiment},
          {"metric", request.metric},
          {"goal", goal},
          {"x_kind", request.x},
          {"smooth", request.smooth},
          {"delta", request.delta},
          {"baseline", request.baseline},
          {"buckets", request.width * 2},
          {"x", curves.x},
          {"variants", bands}};
}

std::string CurvesCsv(const CurveRequest& request, const curves::Curves& curves) {
  std::string out = absl::StrCat(request.x, ",variant,n,mean,lo,hi,min,max\n");
  for (const curves::Band& band : curves.bands) {
    for (size_t i = 0; i < curves.x.size(); ++i) {
      if (band.n[i] == 0) {
        continue;
      }
      absl::StrAppend(&out, curves.x[i], ",", CsvText(band.variant), ",", band.n[i], ",",
                      CsvNumber(band.mean[i]), ",", CsvNumber(band.lo[i]), ",",
                      CsvNumber(band.hi[i]), ",", CsvNumber(band.min[i]), ",",
                      CsvNumber(band.max[i]), "\n");
    }
  }
  return out;
}

std::string CurvesSvg(const std::string& title, const CurveRequest& request,
                      const curves::Curves& curves) {
  std::vector<plot::Series> series;
  for (const curves::Band& band : curves.bands) {
    plot::Series s;
    s.name = absl::StrCat(band.variant, " (n=", band.n_max, ")");
    for (size_t i = 0; i < curves.x.size(); ++i) {
      if (!band.mean[i]) {
        continue;
      }
      s.x.push_back(curves.x[i]);
      s.mean.push_back(*band.mean[i]);
      s.lo.push_back(band.lo[i].value_or(*band.mean[i]));
      s.hi.push_back(band.hi[i].value_or(*band.mean[i]));
    }
    series.push_back(std::move(s));
  }
  plot::PlotOptions options;
  options.title = title;
  options.x_label = request.x == "rel" ? "seconds since start" : request.x;
  options.y_label =
      request.delta ? absl::StrCat("Δ ", request.metric, " vs ", request.baseline) : request.metric;
  options.log_y = request.log_y;
  return plot::RenderSvg(series, options);
}

}  // namespace tae::http
