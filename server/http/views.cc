#include "server/http/views.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/plot/svg_plot.h"

namespace tae::http {
namespace {

constexpr char kSeedKey[] = "train.seed";

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
  for (const model::LogRecord& line : page.lines) {
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
  // job.command as the expansion of its template: variants that agree on every other varying
  // key run the same command.
  constexpr char kCommandKey[] = "job.command";
  if (auto command = std::find(varying.begin(), varying.end(), kCommandKey);
      command != varying.end() && varying.size() > 1) {
    std::map<std::string, std::string> command_of;  // the other keys' values -> the command
    bool derived = true;
    for (const auto& [variant, config] : first) {
      std::string others;
      for (const std::string& key : varying) {
        if (key != kCommandKey) {
          absl::StrAppend(&others, config.contains(key) ? config[key].dump() : "null", "\x1f");
        }
      }
      const std::string value = config.contains(kCommandKey) ? config[kCommandKey].dump() : "null";
      derived = command_of.emplace(others, value).first->second == value && derived;
    }
    if (derived) {
      varying.erase(command);
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
                      baseline, "|", absl::StrJoin(variants, ","), "|", log_y, "|", x_min, "|",
                      x_max);
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
  for (auto [name, bound] : {std::pair<const char*, double*>{"x_min", &out.x_min},
                             std::pair<const char*, double*>{"x_max", &out.x_max}}) {
    if (std::string text = request.Param(name); !text.empty()) {
      if (!absl::SimpleAtod(text, bound) || !std::isfinite(*bound)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": a number (the zoom's x range)"));
      }
    }
  }
  if (out.x_min > out.x_max) {
    return absl::InvalidArgumentError("x_min: larger than x_max");
  }
  out.baseline = request.Param("baseline", "baseline");
  if (out.baseline.empty()) {
    out.baseline = "baseline";
  }
  for (absl::string_view v : absl::StrSplit(request.Param("variants"), ',', absl::SkipEmpty())) {
    out.variants.emplace_back(v);
  }
  return out;
}

absl::StatusOr<XAxis> XAxisOf(const std::string& x, const model::RunRecord& run) {
  if (x == "step") {
    return XAxis{XAxis::Kind::kStep};
  }
  if (x == "wall" || x == "rel") {
    return XAxis{x == "wall" ? XAxis::Kind::kWall : XAxis::Kind::kRel};
  }
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
  return XAxis{XAxis::Kind::kTokens, *batch * *seq * number("resources.hosts").value_or(1)};
}

std::optional<XAxis::Span> XAxis::SpanOfSteps(int64_t min_step, int64_t max_step) const {
  const auto lo = static_cast<double>(min_step);
  const auto hi = static_cast<double>(max_step);
  switch (kind) {
    case Kind::kStep:
      return Span{lo, hi, true};
    case Kind::kTokens: {
      // x = step x per_step, monotone in the step; every product of whole numbers is whole.
      if (!std::isfinite(per_step) || per_step != std::trunc(per_step)) {
        return std::nullopt;
      }
      const double a = lo * per_step;
      const double b = hi * per_step;
      if (!std::isfinite(a) || !std::isfinite(b)) {
        return std::nullopt;
      }
      return Span{std::min(a, b), std::max(a, b), true};
    }
    case Kind::kWall:
    case Kind::kRel:
      break;
  }
  return std::nullopt;
}

void XValues(const XAxis& axis, const store::SeriesColumns& columns, std::vector<double>* out) {
  const size_t n = columns.steps.size();
  out->resize(n);
  double* x = out->data();
  switch (axis.kind) {
    case XAxis::Kind::kStep:
      for (size_t i = 0; i < n; ++i) {
        x[i] = static_cast<double>(columns.steps[i]);
      }
      return;
    case XAxis::Kind::kTokens:
      for (size_t i = 0; i < n; ++i) {
        x[i] = static_cast<double>(columns.steps[i]) * axis.per_step;
      }
      return;
    case XAxis::Kind::kWall:
    case XAxis::Kind::kRel: {
      const double origin = axis.kind == XAxis::Kind::kRel && n > 0 ? columns.walls[0] : 0;
      for (size_t i = 0; i < n; ++i) {
        x[i] = columns.walls[i] - origin;
      }
      return;
    }
  }
}

std::string CurvesJson(int64_t experiment, const CurveRequest& request, const std::string& goal,
                       const curves::Curves& curves) {
  // Written directly: a 50-variant view is half a million numbers, which a JSON DOM would take
  // several times longer to build and print. Values have 6 significant digits (absl's default,
  // more than a chart shows); x keeps 15 (wall-clock seconds).
  std::string out;
  out.reserve(64 + curves.x.size() * (16 + curves.bands.size() * 60));
  auto text = [](const std::string& t) { return nlohmann::json(t).dump(); };
  absl::StrAppend(&out, "{\"experiment\":", experiment, ",\"metric\":", text(request.metric),
                  ",\"goal\":", text(goal), ",\"x_kind\":", text(request.x),
                  ",\"smooth\":", request.smooth, ",\"delta\":", request.delta ? "true" : "false",
                  ",\"baseline\":", text(request.baseline), ",\"buckets\":", request.width * 2,
                  ",\"x\":[");
  for (size_t i = 0; i < curves.x.size(); ++i) {
    const double x = curves.x[i];
    if (i > 0) out += ',';
    if (x == std::floor(x) && std::fabs(x) < 9e15) {
      absl::StrAppend(&out, static_cast<int64_t>(x));
    } else {
      absl::StrAppendFormat(&out, "%.15g", x);
    }
  }
  out += "],\"variants\":[";
  auto column = [&out](const char* name, const curves::Column& values) {
    absl::StrAppend(&out, ",\"", name, "\":[");
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      if (values[i] && std::isfinite(*values[i])) {
        absl::StrAppend(&out, *values[i]);
      } else {
        out += "null";
      }
    }
    out += ']';
  };
  for (size_t b = 0; b < curves.bands.size(); ++b) {
    const curves::Band& band = curves.bands[b];
    absl::StrAppend(&out, b > 0 ? "," : "", "{\"variant\":", text(band.variant), ",\"runs\":[",
                    absl::StrJoin(band.runs, ","), "],\"n_max\":", band.n_max);
    column("mean", band.mean);
    column("lo", band.lo);
    column("hi", band.hi);
    column("min", band.min);
    column("max", band.max);
    absl::StrAppend(&out, ",\"n\":[", absl::StrJoin(band.n, ","), "]}");
  }
  out += "]}";
  return out;
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
