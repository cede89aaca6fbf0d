#include "common/api/json.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "proto/tae/v1/states.h"

namespace tae::api {

nlohmann::ordered_json ExperimentJson(const tae::v1::Experiment& exp) {
  const tae::v1::RunCounts& c = exp.counts();
  nlohmann::ordered_json out = {
      {"id", exp.id()},
      {"name", exp.name()},
      {"description", exp.description()},
      {"state", exp.state()},
      {"paused", exp.paused()},
      {"spec_hash", exp.spec_hash()},
      {"spec_path", exp.spec_path()},
      {"created_at", exp.created_at()},
      {"variants", std::vector<std::string>(exp.variants().begin(), exp.variants().end())},
      {"counts",
       {{"total", c.total()},
        {"queued", c.queued()},
        {"running", c.running()},
        {"succeeded", c.succeeded()},
        {"failed", c.failed()},
        {"cancelled", c.cancelled()},
        {"pruned", c.pruned()},
        {"lost", c.lost()}}},
  };
  if (exp.has_search_savings()) {
    out["search_savings"] = SavingsJson(exp.search_savings());
  }
  return out;
}

nlohmann::ordered_json SavingsJson(const tae::v1::SearchSavings& savings) {
  nlohmann::ordered_json rungs = nlohmann::ordered_json::array();
  for (const tae::v1::SearchRung& rung : savings.rungs()) {
    rungs.push_back({{"rung", rung.rung()},
                     {"step", rung.step()},
                     {"judged", rung.judged()},
                     {"pruned", rung.pruned()},
                     {"nodata", rung.nodata()}});
  }
  nlohmann::ordered_json fraction;
  if (savings.steps_full() > 0) {
    fraction = static_cast<double>(savings.steps_run()) / static_cast<double>(savings.steps_full());
  }
  return {{"steps_run", savings.steps_run()},
          {"steps_full", savings.steps_full()},
          {"fraction", fraction},
          {"runs", savings.runs()},
          {"runs_without_steps", savings.runs_without_steps()},
          {"points_pruned", savings.points_pruned()},
          {"rungs", rungs}};
}

nlohmann::ordered_json PointJson(const std::string& point) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (absl::string_view part : absl::StrSplit(point, ',', absl::SkipEmpty())) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      continue;
    }
    const std::string key(part.substr(0, eq));
    const std::string text(part.substr(eq + 1));
    nlohmann::ordered_json value = nlohmann::ordered_json::parse(text, nullptr, false);
    out[key] = value.is_discarded() ? nlohmann::ordered_json(text) : value;
  }
  return out;
}

namespace {

// Absent values are null in JSON: 0 / "" mean "not yet" in the wire message.
template <typename T>
nlohmann::ordered_json OrNull(const T& value, bool present) {
  return present ? nlohmann::ordered_json(value) : nlohmann::ordered_json();
}

}  // namespace

void RunFields(const tae::v1::Run& run,
               absl::FunctionRef<void(const char* name, nlohmann::ordered_json value)> field,
               bool config) {
  const bool exited = tae::v1::IsFinal(run.state()) && run.started_at() > 0;
  field("id", run.id());
  field("experiment", run.experiment_id());
  field("variant", run.variant());
  field("seed", run.seed());
  field("confirm", run.confirm());
  field("state", tae::v1::StateName(run.state()));
  field("attempt", run.attempt());
  field("agent", OrNull(run.agent_id(), !run.agent_id().empty()));
  field("pid", OrNull(run.pid(), run.pid() > 0));
  field("exit_code", OrNull(run.exit_code(), exited));
  field("reason", run.reason());
  field("created_at", run.created_at());
  field("started_at", OrNull(run.started_at(), run.started_at() > 0));
  field("finished_at", OrNull(run.finished_at(), run.finished_at() > 0));
  field("last_step", run.last_step());
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (const tae::v1::Scalar& s : run.final_metrics()) {
    metrics[s.key()] = s.value();
  }
  field("final_metrics", std::move(metrics));
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [key, value] :
       std::map<std::string, std::string>(run.meta().begin(), run.meta().end())) {
    meta[key] = value;  // sorted: a proto map has no order
  }
  field("meta", std::move(meta));
  if (config) {
    nlohmann::ordered_json parsed =
        nlohmann::ordered_json::parse(run.config_json(), nullptr, false);
    field("config", parsed.is_discarded() ? nlohmann::ordered_json() : std::move(parsed));
  }
}

nlohmann::ordered_json RunJson(const tae::v1::Run& run) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  RunFields(run, [&out](const char* name, nlohmann::ordered_json value) {
    out.emplace(name, std::move(value));
  });
  return out;
}

nlohmann::ordered_json AgentJson(const tae::v1::AgentInfo& agent) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [key, value] : agent.labels()) {
    labels[key] = value;
  }
  return {
      {"id", agent.id()},
      {"host", agent.host()},
      {"state", tae::v1::StateName(agent.state())},
      {"slots", agent.slots()},
      {"busy_slots", agent.busy_slots()},
      {"labels", labels},
      {"version", agent.version()},
      {"connected_at", agent.connected_at()},
      {"last_seen", agent.last_seen()},
      {"runs", std::vector<int64_t>(agent.run_ids().begin(), agent.run_ids().end())},
      {"drained", agent.drained()},
      {"quarantine", agent.quarantine()},
      {"revoked", agent.revoked()},
  };
}

nlohmann::ordered_json FleetJson(const tae::v1::ListAgentsResponse& response) {
  nlohmann::ordered_json agents = nlohmann::ordered_json::array();
  for (const tae::v1::AgentInfo& agent : response.agents()) {
    agents.push_back(AgentJson(agent));
  }
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const tae::v1::ProviderEvent& event : response.provider_events()) {
    events.push_back({{"time", event.time()},
                      {"provider", event.provider()},
                      {"subject", event.subject()},
                      {"event", event.event()},
                      {"detail", event.detail()}});
  }
  nlohmann::ordered_json vms = nlohmann::ordered_json::array();
  for (const tae::v1::CloudVm& vm : response.vms()) {
    vms.push_back({{"provider", vm.provider()},
                   {"pool", vm.pool()},
                   {"name", vm.name()},
                   {"zone", vm.zone()},
                   {"detail", vm.detail()},
                   {"state", vm.state()}});
  }
  return {{"agents", agents}, {"provider_events", events}, {"vms", vms}};
}

std::string NoMetricsHint() { return "No run has reported a metric. " + WaysToReport(); }

std::string WaysToReport() {
  return "A command job reports in any of these ways "
         "(docs/cli.md, \"Metric lines\"):\n"
         "  - tae_log.log(step=40, loss=2.31) from agent/python/tae_log.py, or JSON lines on "
         "$TAE_METRICS_FD;\n"
         "  - key=value lines on stdout: step=40 loss=2.31;\n"
         "  - [job.metrics] pattern = '...(?P<step>\\d+)...(?P<loss>\\S+)': regular expressions "
         "over "
         "the lines it prints in its own format;\n"
         "  - job.tensorboard = \"DIR\": the TensorBoard event files it writes there.\n";
}

bool HasDeltaInterval(const tae::v1::ReportCell& cell) {
  return cell.delta_level() > 0 && cell.delta_level() < 1 && std::isfinite(cell.delta_lo()) &&
         std::isfinite(cell.delta_hi());
}

bool HasDetectable(const tae::v1::ReportCell& cell) {
  return cell.detectable() > 0 && std::isfinite(cell.detectable());
}

nlohmann::ordered_json ReportJson(const tae::v1::ReportResponse& report) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const tae::v1::ReportRow& row : report.rows()) {
    nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
    for (const tae::v1::ReportCell& cell : row.cells()) {
      auto number = [](double x) {
        return std::isnan(x) ? nlohmann::ordered_json() : nlohmann::ordered_json(x);
      };
      nlohmann::ordered_json value = {{"n", cell.n()}};
      value["mean"] = number(cell.mean());
      value["std"] = number(cell.std());
      value["ci95"] = number(cell.ci95());
      value["best"] = number(cell.best());
      value["delta"] = cell.has_delta() ? number(cell.delta()) : nullptr;
      value["rel_delta"] = cell.has_delta() ? number(cell.rel_delta()) : nullptr;
      // The interval of delta, consistent with the decision, at delta_level (null: no test).
      const bool interval = HasDeltaInterval(cell);
      value["delta_ci95"] = interval ? nlohmann::ordered_json({cell.delta_lo(), cell.delta_hi()})
                                     : nlohmann::ordered_json();
      value["delta_level"] = interval ? number(cell.delta_level()) : nullptr;
      value["p_value"] = cell.has_test() ? number(cell.p_value()) : nullptr;
      value["p_adjusted"] = cell.has_test() && interval ? number(cell.p_adjusted()) : nullptr;
      value["mark"] = cell.mark();
      value["detectable"] = HasDetectable(cell) ? number(cell.detectable()) : nullptr;
      value["note"] =
          cell.note().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(cell.note());
      // The decision of the comparison with the baseline and the seeds per arm it rests on
      // (null for a baseline); the level the mean sits at (null when none).
      value["decision"] = cell.decision().empty() ? nlohmann::ordered_json()
                                                  : nlohmann::ordered_json(cell.decision());
      value["decision_n"] = cell.decision().empty() ? nlohmann::ordered_json()
                                                    : nlohmann::ordered_json(cell.decision_n());
      value["decision_final"] = cell.decision_final();
      value["decision_futile"] = cell.decision_futile();
      value["decision_held"] = cell.decision_held().empty()
                                   ? nlohmann::ordered_json()
                                   : nlohmann::ordered_json(cell.decision_held());
      value["margin"] = cell.margin() > 0 ? nlohmann::ordered_json(cell.margin()) : nullptr;
      // Seeds whose metric went NaN or infinite, and the earliest step one did (null: none).
      value["diverged"] = cell.diverged();
      value["diverged_step"] =
          cell.diverged() > 0 ? nlohmann::ordered_json(cell.diverged_step()) : nullptr;
      value["level"] = cell.level_kind().empty()
                           ? nlohmann::ordered_json()
                           : nlohmann::ordered_json({{"kind", cell.level_kind()},
                                                     {"value", cell.level()},
                                                     {"what", cell.level_what()}});
      metrics[cell.metric()] = value;
    }
    auto number = [](double x) {
      return std::isnan(x) ? nlohmann::ordered_json() : nlohmann::ordered_json(x);
    };
    rows.push_back({{"variant", row.variant()},
                    {"baseline", row.baseline()},
                    {"runs", row.runs()},
                    {"runs_total", row.runs_total()},
                    {"runs_pruned", row.runs_pruned()},
                    {"runs_failed", row.runs_failed()},
                    {"seeds_identical", row.seeds_identical()},
                    {"metrics", metrics},
                    {"params", number(row.params())},
                    {"flops_per_token", number(row.flops_per_token())},
                    {"tokens_per_s", number(row.tokens_per_s())}});
    if (report.view() == "tuned") {
      nlohmann::ordered_json& r = rows.back();
      r["ablation"] = row.ablation();
      r["point_name"] = row.point();
      r["point"] = row.point().empty() ? nlohmann::ordered_json() : PointJson(row.point());
      r["points"] = row.points();
      r["candidates"] = row.candidates();
      if (report.search_confirm() > 0) {
        r["confirm_runs"] = row.confirm_runs();
        r["confirm_pending"] = row.confirm_pending();
      }
    }
  }
  nlohmann::ordered_json out = {
      {"experiment", report.experiment().id()},
      {"name", report.experiment().name()},
      {"state", report.experiment().state()},
      {"baseline", report.baseline()},
      {"metrics", std::vector<std::string>(report.metrics().begin(), report.metrics().end())},
      {"metrics_source", report.metrics_source()},
      {"adaptive", report.adaptive()},
      {"banners", std::vector<std::string>(report.banners().begin(), report.banners().end())},
      {"view", report.view()}};
  {
    const tae::v1::ReportCorrection& c = report.correction();
    nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
    for (int i = 0; i < c.metrics_size() && i < c.comparisons_size(); ++i) {
      sizes[c.metrics(i)] = c.comparisons(i);
    }
    out["correction"] = {{"method", c.method()},
                         {"alpha", c.alpha()},
                         {"controlled", c.controlled()},
                         {"family", c.family()},
                         {"comparisons", sizes}};
  }
  if (report.no_metrics()) {
    out["no_metrics"] = {{"hint", NoMetricsHint()},
                         {"sample_run", report.sample_run()},
                         {"sample_output", std::vector<std::string>(report.sample_output().begin(),
                                                                    report.sample_output().end())}};
  }
  if (report.view() == "tuned") {
    out["search"] = {{"metric", report.search_metric()},
                     {"goal", report.search_goal()},
                     {"confirm", report.search_confirm()}};
    out["estimates"] = report.estimates();
  }
  if (report.experiment().has_search_savings()) {
    out["savings"] = SavingsJson(report.experiment().search_savings());
  }
  if (report.search_decisions_size() > 0) {
    nlohmann::ordered_json decisions = nlohmann::ordered_json::array();
    for (const tae::v1::SearchDecision& d : report.search_decisions()) {
      decisions.push_back(
          {{"point", d.point()},
           {"group", d.group()},
           {"rung", d.rung()},
           {"step", d.step()},
           {"value", d.has_value() ? nlohmann::ordered_json(d.value()) : nlohmann::ordered_json()},
           {"seeds", d.seeds()},
           {"verdict", d.verdict()},
           {"rank", d.rank()},
           {"competitors", d.competitors()},
           {"keeps", d.keeps()},
           {"reason", d.reason()}});
    }
    out["decisions"] = decisions;
  }
  if (report.has_frontier()) {
    out["frontier"] = FrontierJson(report.frontier());
  }
  if (report.scale_size() == 1) {
    out["scale"] = ScaleJson(report.scale(0));
  } else if (report.scale_size() > 1) {  // a ladder with a [grid]: one fit per grid point
    out["scale"] = nlohmann::ordered_json::array();
    for (const tae::v1::ScaleFit& fit : report.scale()) {
      out["scale"].push_back(ScaleJson(fit));
    }
  }
  out["rows"] = rows;
  return out;
}

nlohmann::ordered_json ScaleJson(const tae::v1::ScaleFit& fit) {
  auto number = [](double x) {
    return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json();
  };
  auto estimate = [&](const tae::v1::ScaleEstimate& e) {
    const bool interval = std::isfinite(e.lo()) && std::isfinite(e.hi());
    return nlohmann::ordered_json{
        {"value", number(e.value())},
        {"ci95", interval ? nlohmann::ordered_json({e.lo(), e.hi()}) : nlohmann::ordered_json()}};
  };
  nlohmann::ordered_json rungs = nlohmann::ordered_json::array();
  for (const tae::v1::ScaleRung& r : fit.rungs()) {
    rungs.push_back({{"rung", r.rung()},
                     {"overrides", r.overrides()},
                     {"params", number(r.size())},
                     {"params_from", r.size_source()}});
  }
  nlohmann::ordered_json variants = nlohmann::ordered_json::array();
  for (const tae::v1::ScaleVariant& v : fit.variants()) {
    nlohmann::ordered_json effects = nlohmann::ordered_json::array();
    for (const tae::v1::ScaleRungEffect& e : v.rungs()) {
      const bool interval = std::isfinite(e.delta_lo()) && std::isfinite(e.delta_hi());
      effects.push_back(
          {{"rung", e.rung()},
           {"n", e.n()},
           {"mean", number(e.mean())},
           {"ci95", number(e.ci95())},
           {"delta", number(e.delta())},
           {"delta_ci", interval ? nlohmann::ordered_json({e.delta_lo(), e.delta_hi()})
                                 : nlohmann::ordered_json()},
           {"decision",
            e.decision().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.decision())},
           {"mark", e.mark()},
           {"note",
            e.note().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.note())}});
    }
    nlohmann::ordered_json variant = {
        {"variant", v.variant()},
        {"multiplier", estimate(v.multiplier())},
        {"slope", estimate(v.slope())},
        {"trend", v.trend().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(v.trend())},
        {"crossing", number(v.crossing())},
        {"rungs", effects}};
    if (v.skipped() > 0) {
      variant["skipped"] = {{"runs", v.skipped()},
                            {"why", v.skipped_why()},
                            {"accelerator_hours", v.skipped_hours()}};
    }
    if (fit.at() > 0 && v.variant() != fit.variants(0).variant()) {
      variant["at"] = v.at_ok()
                          ? nlohmann::ordered_json{{"effect", estimate(v.at_effect())},
                                                   {"model", v.at_trend() ? "trend" : "constant"}}
                          : nlohmann::ordered_json{{"refused", v.at_refused()}};
    }
    variants.push_back(std::move(variant));
  }
  nlohmann::ordered_json out = {
      {"metric", fit.metric()},
      {"point",
       fit.point().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(fit.point())},
      {"ok", fit.ok()},
      {"why", fit.why().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(fit.why())},
      {"law", "L = E + A * (m * N)^-alpha"},
      {"rungs", rungs},
      {"exponent", estimate(fit.exponent())},
      {"irreducible", estimate(fit.irreducible())},
      {"coefficient", number(fit.coefficient())},
      {"variants", variants},
      {"intervals", fit.intervals()},
      {"draws", fit.draws()},
      {"failed_draws", fit.failed_draws()},
      {"trend_level", number(fit.trend_level())},
      {"warnings", std::vector<std::string>(fit.warnings().begin(), fit.warnings().end())},
      {"controls", fit.controls()}};
  if (fit.at() > 0) {
    out["at"] = {{"params", fit.at()}, {"baseline", estimate(fit.at_baseline())}};
  }
  return out;
}

nlohmann::ordered_json FrontierJson(const tae::v1::ReportFrontier& frontier) {
  auto number = [](double x) {
    return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json();
  };
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  nlohmann::ordered_json cheapest;
  for (const tae::v1::FrontierPoint& p : frontier.points()) {
    points.push_back({{"variant", p.variant()},
                      {"cost", number(p.cost())},
                      {"n", p.n()},
                      {"mean", number(p.mean())},
                      {"ci95", number(p.ci95())},
                      {"lo", number(p.lo())},
                      {"hi", number(p.hi())},
                      {"on_front", p.on_front()},
                      {"clears", p.clears()},
                      {"reached", p.reached()}});
    if (!frontier.cheapest().empty() && p.variant() == frontier.cheapest()) {
      cheapest = points.back();
    }
  }
  return {
      {"bar",
       {{"metric", frontier.metric()},
        {"op", frontier.op()},
        {"value", frontier.value()},
        {"goal", frontier.goal()}}},
      {"cost",
       {{"axis", frontier.cost()}, {"cheaper", frontier.lower_is_cheaper() ? "lower" : "higher"}}},
      {"cheapest", cheapest},
      // "as run", "confirmed", or "optimistic" (chosen on the same seeds: no variant named)
      {"estimates", frontier.estimates()},
      {"points", points}};
}

nlohmann::ordered_json HeadGridJson(int64_t run_id, const HeadGrid& grid) {
  auto values = [&](const std::vector<std::vector<std::optional<double>>>& grid_values) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& layer : grid_values) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (const std::optional<double>& value : layer) {
        row.push_back(value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json());
      }
      rows.push_back(row);
    }
    return rows;
  };
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const auto& layer : grid.kind) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (HeadCell kind : layer) {
      row.push_back(kind == HeadCell::kScored         ? "scored"
                    : kind == HeadCell::kPruned       ? "pruned"
                    : kind == HeadCell::kLayerRemoved ? "removed"
                                                      : "missing");
    }
    cells.push_back(row);
  }
  nlohmann::ordered_json out;
  out["run"] = run_id;
  out["layers"] = grid.layers;
  out["heads"] = grid.heads;
  out["masked"] = values(grid.masked);
  out["gradient"] = values(grid.gradient);
  out["cells"] = cells;
  return out;
}

}  // namespace tae::api
