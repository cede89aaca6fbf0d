#include "server/wire/wire.h"

#include <algorithm>

#include "server/report/report.h"

namespace tae::wire {

void ToProto(const model::ExperimentRecord& in, tae::v1::Experiment* out) {
  out->set_id(in.id);
  out->set_name(in.name);
  out->set_description(in.description);
  out->set_spec_hash(in.spec_hash);
  out->set_spec_path(in.spec_path);
  out->set_state(model::ExperimentState(in.counts));
  out->set_created_at(in.created_at);
  out->set_paused(in.paused);
  tae::v1::RunCounts* counts = out->mutable_counts();
  counts->set_total(in.counts.total);
  counts->set_queued(in.counts.queued);
  counts->set_running(in.counts.running);
  counts->set_succeeded(in.counts.succeeded);
  counts->set_failed(in.counts.failed);
  counts->set_cancelled(in.counts.cancelled);
  counts->set_lost(in.counts.lost);
  counts->set_pruned(in.counts.pruned);
  for (const std::string& variant : in.variants) {
    out->add_variants(variant);
  }
  for (const std::string& metric : in.report.metrics) {
    out->add_report_metrics(metric);
  }
  for (const auto& [metric, goal] : in.report.goal) {
    (*out->mutable_report_goal())[metric] = goal;
  }
}

tae::v1::RunState ToProto(model::RunState state) {
  switch (state) {
    case model::RunState::kQueued:
      return tae::v1::RUN_STATE_QUEUED;
    case model::RunState::kAssigned:
      return tae::v1::RUN_STATE_ASSIGNED;
    case model::RunState::kRunning:
      return tae::v1::RUN_STATE_RUNNING;
    case model::RunState::kSucceeded:
      return tae::v1::RUN_STATE_SUCCEEDED;
    case model::RunState::kFailed:
      return tae::v1::RUN_STATE_FAILED;
    case model::RunState::kCancelled:
      return tae::v1::RUN_STATE_CANCELLED;
    case model::RunState::kLost:
      return tae::v1::RUN_STATE_LOST;
    case model::RunState::kPruned:
      return tae::v1::RUN_STATE_PRUNED;
  }
  return tae::v1::RUN_STATE_UNSPECIFIED;
}

tae::v1::AgentState ToProto(registry::AgentState state) {
  switch (state) {
    case registry::AgentState::kReady:
      return tae::v1::AGENT_STATE_READY;
    case registry::AgentState::kBusy:
      return tae::v1::AGENT_STATE_BUSY;
    case registry::AgentState::kDraining:
      return tae::v1::AGENT_STATE_DRAINING;
    case registry::AgentState::kLost:
      return tae::v1::AGENT_STATE_LOST;
    case registry::AgentState::kRevoked:
      return tae::v1::AGENT_STATE_REVOKED;
  }
  return tae::v1::AGENT_STATE_UNSPECIFIED;
}

void ToProto(const model::RunRecord& in, tae::v1::Run* out) {
  out->set_id(in.id);
  out->set_experiment_id(in.experiment_id);
  out->set_variant(in.variant);
  out->set_seed(in.seed);
  out->set_state(ToProto(in.state));
  out->set_attempt(in.attempt);
  out->set_agent_id(in.agent_id);
  out->set_exit_code(in.exit_code.value_or(0));
  out->set_reason(in.reason);
  out->set_created_at(in.created_at);
  out->set_started_at(in.started_at.value_or(0));
  out->set_finished_at(in.finished_at.value_or(0));
  out->set_config_json(in.config_json);
  out->set_pid(in.pid);
  out->set_confirm(in.confirm);
  for (const auto& [key, value] : in.meta) {
    (*out->mutable_meta())[key] = value;
  }
}

void ToProto(const model::TransitionRecord& in, tae::v1::Transition* out) {
  out->set_attempt(in.attempt);
  out->set_from_state(in.from_state);
  out->set_to_state(in.to_state);
  out->set_reason(in.reason);
  out->set_at(in.at);
}

void ToProto(const registry::Agent& in, tae::v1::AgentInfo* out) {
  out->set_id(in.id);
  out->set_host(in.host);
  out->set_state(ToProto(in.state()));
  out->set_slots(in.slots);
  out->set_busy_slots(in.busy_slots());
  for (const auto& [key, value] : in.labels) {
    (*out->mutable_labels())[key] = value;
  }
  out->set_version(in.version);
  out->set_connected_at(in.connected_at);
  out->set_last_seen(in.last_seen);
  for (const auto& [run_id, slots] : in.runs) {
    out->add_run_ids(run_id);
  }
  *out->mutable_facts() = in.facts;
  out->set_quarantine(in.quarantine);
  out->set_drained(in.draining || !in.quarantine.empty());
  out->set_revoked(in.revoked);
}

void ToProto(const provider::CloudVm& in, tae::v1::CloudVm* out) {
  out->set_provider(in.provider);
  out->set_pool(in.pool);
  out->set_name(in.name);
  out->set_zone(in.zone);
  out->set_state(in.state);
  out->set_detail(in.detail);
}

void ToProto(const provider::ProviderEvent& in, tae::v1::ProviderEvent* out) {
  out->set_time(in.time);
  out->set_provider(in.provider);
  out->set_subject(in.subject);
  out->set_event(in.event);
  out->set_detail(in.detail);
}

void ToProto(const query::RunView& in, tae::v1::Run* out) {
  ToProto(in.run, out);
  int64_t last_step = 0;
  for (const model::MetricSummary& s : in.summaries) {
    tae::v1::Scalar* scalar = out->add_final_metrics();
    scalar->set_key(s.key);
    scalar->set_value(s.last_value);
    last_step = std::max(last_step, s.last_step);
  }
  out->set_last_step(last_step);
}

void ToProto(const query::RunDetail& in, tae::v1::GetRunResponse* out) {
  ToProto(in.view, out->mutable_run());
  for (const model::TransitionRecord& t : in.transitions) {
    ToProto(t, out->add_transitions());
  }
  for (const std::string& key : in.command_keys) {
    out->add_command_keys(key);
  }
  for (const std::string& warning : in.warnings) {
    out->add_warnings(warning);
  }
}

void ToProto(const query::LogPage& in, tae::v1::LogsResponse* out) {
  for (const model::LogRecord& line : in.lines) {
    tae::v1::LogEntry* entry = out->add_lines();
    entry->set_cursor(line.cursor);
    entry->set_attempt(line.attempt);
    entry->set_stream(line.stream);
    entry->set_text(line.text);
    entry->set_wall_time(line.wall_time);
  }
  out->set_next(in.next);
  out->set_run_finished(in.run_finished);
}

void ToProto(const query::MetricSeries& in, tae::v1::MetricSeries* out) {
  ToProto(in.run, out->mutable_run());
  out->set_key(in.key);
  for (const model::MetricPoint& p : in.points) {
    tae::v1::MetricPoint* point = out->add_points();
    point->set_step(p.step);
    point->set_value(p.value);
    point->set_min(p.min);
    point->set_max(p.max);
    point->set_wall_time(p.wall_time);
    point->set_count(p.count);
  }
}

void ToProto(const model::CheckpointRecord& in, tae::v1::Checkpoint* out) {
  out->set_run_id(in.run_id);
  out->set_attempt(in.attempt);
  out->set_step(in.step);
  out->set_id(in.manifest_id);
  out->set_files(in.files);
  out->set_bytes(in.bytes);
  out->set_created_at(in.created_at);
  out->set_manifest(in.manifest);
  out->set_artifact(in.artifact);
}

void ToProto(const query::SnapshotView& in, tae::v1::Snapshot* out) {
  out->set_id(in.snapshot.id);
  out->set_files(in.snapshot.files);
  out->set_bytes(in.snapshot.bytes);
  out->set_source(in.snapshot.source);
  out->set_created_at(in.snapshot.created_at);
  out->set_runs(static_cast<int32_t>(in.usage.runs));
  out->set_active_runs(static_cast<int32_t>(in.usage.active_runs));
}

namespace {

void SetEstimate(const stats::Estimate& in, tae::v1::ScaleEstimate* out) {
  out->set_value(in.value);
  out->set_lo(in.lo);
  out->set_hi(in.hi);
}

}  // namespace

void ToProto(const report::ScaleFit& in, tae::v1::ScaleFit* out) {
  out->set_metric(in.metric);
  out->set_point(in.point);
  out->set_ok(in.ok);
  out->set_why(in.why);
  for (const report::ScaleRung& rung : in.rungs) {
    tae::v1::ScaleRung* r = out->add_rungs();
    r->set_rung(rung.rung);
    r->set_overrides(rung.overrides);
    r->set_size(rung.size);
    r->set_size_source(rung.size_source);
  }
  SetEstimate(in.exponent, out->mutable_exponent());
  SetEstimate(in.irreducible, out->mutable_irreducible());
  out->set_coefficient(in.coefficient);
  out->set_curve_log_size_ref(in.curve_log_size_ref);
  for (const report::ScaleVariant& variant : in.variants) {
    tae::v1::ScaleVariant* v = out->add_variants();
    v->set_variant(variant.variant);
    SetEstimate(variant.multiplier, v->mutable_multiplier());
    SetEstimate(variant.slope, v->mutable_slope());
    v->set_trend(variant.trend);
    v->set_crossing(variant.crossing);
    v->set_curve_log_multiplier(variant.curve_log_multiplier);
    v->set_curve_slope(variant.curve_slope);
    for (const report::ScaleRungEffect& effect : variant.rungs) {
      tae::v1::ScaleRungEffect* e = v->add_rungs();
      e->set_rung(effect.rung);
      e->set_n(effect.n);
      e->set_mean(effect.mean);
      e->set_ci95(effect.ci95);
      e->set_delta(effect.delta);
      e->set_delta_lo(effect.delta_lo);
      e->set_delta_hi(effect.delta_hi);
      e->set_decision(effect.decision);
      e->set_mark(effect.mark);
      e->set_note(effect.note);
    }
    v->set_at_ok(variant.at_ok);
    SetEstimate(variant.at_effect, v->mutable_at_effect());
    v->set_at_trend(variant.at_trend);
    v->set_at_refused(variant.at_refused);
    v->set_skipped(variant.skipped);
    v->set_skipped_why(variant.skipped_why);
    v->set_skipped_hours(variant.skipped_hours);
  }
  out->set_intervals(in.intervals);
  out->set_draws(in.draws);
  out->set_failed_draws(in.failed_draws);
  out->set_trend_level(in.trend_level);
  for (const std::string& warning : in.warnings) {
    out->add_warnings(warning);
  }
  out->set_at(in.at);
  SetEstimate(in.at_baseline, out->mutable_at_baseline());
  out->set_controls(in.controls);
}

void ToProto(const query::ReportResult& in, tae::v1::ReportResponse* out) {
  ToProto(in.experiment, out->mutable_experiment());
  for (const std::string& metric : in.metrics) {
    out->add_metrics(metric);
  }
  out->set_baseline(in.baseline);
  out->set_metrics_source(in.metrics_source);
  out->set_no_metrics(in.no_metrics);
  out->set_sample_run(in.sample_run);
  for (const std::string& line : in.sample_output) {
    out->add_sample_output(line);
  }
  for (const report::Row& row : in.rows) {
    tae::v1::ReportRow* r = out->add_rows();
    r->set_variant(row.variant);
    r->set_runs(row.runs);
    r->set_runs_total(row.runs_total);
    r->set_baseline(row.baseline);
    r->set_params(row.params);
    r->set_flops_per_token(row.flops_per_token);
    r->set_tokens_per_s(row.tokens_per_s);
    r->set_ablation(row.ablation);
    r->set_point(row.point);
    r->set_points(row.points);
    r->set_candidates(row.candidates);
    r->set_runs_pruned(row.runs_pruned);
    r->set_runs_failed(row.runs_failed);
    r->set_confirm_runs(row.confirm_runs);
    r->set_confirm_pending(row.confirm_pending);
    for (const report::Cell& cell : row.cells) {
      tae::v1::ReportCell* c = r->add_cells();
      c->set_metric(cell.metric);
      c->set_n(cell.n);
      c->set_mean(cell.mean);
      c->set_std(cell.std);
      c->set_ci95(cell.ci95);
      c->set_best(cell.best);
      c->set_has_delta(cell.has_delta);
      c->set_delta(cell.delta);
      c->set_rel_delta(cell.rel_shown ? cell.rel_delta : report::kNaN);
      c->set_has_test(cell.has_test);
      c->set_p_value(cell.p_value);
      c->set_mark(cell.mark);
      c->set_decision(cell.decision);
      c->set_decision_n(cell.decision_n);
      c->set_decision_final(cell.decision_final);
      c->set_decision_futile(cell.decision_futile);
      c->set_decision_held(cell.decision_held);
      c->set_margin(cell.margin);
      c->set_level_kind(cell.level_kind);
      c->set_level(cell.level);
      c->set_level_what(cell.level_what);
      c->set_diverged(cell.diverged);
      c->set_diverged_step(cell.diverged_step);
      c->set_p_adjusted(cell.p_adjusted);
      c->set_delta_lo(cell.delta_lo);
      c->set_delta_hi(cell.delta_hi);
      c->set_delta_level(cell.delta_level);
      c->set_detectable(cell.detectable);
      c->set_note(cell.note);
    }
    r->set_seeds_identical(row.seeds_identical);
  }
  for (const std::string& banner : in.banners) {
    out->add_banners(banner);
  }
  out->set_adaptive(in.adaptive);
  out->set_view(in.view);
  out->set_search_metric(in.search_metric);
  out->set_search_goal(in.search_goal);
  if (in.frontier) {
    const report::Frontier& f = *in.frontier;
    tae::v1::ReportFrontier* frontier = out->mutable_frontier();
    frontier->set_metric(f.bar.metric);
    frontier->set_op(report::OpText(f.bar.op));
    frontier->set_value(f.bar.value);
    frontier->set_cost(report::CostName(f.cost));
    frontier->set_lower_is_cheaper(report::LowerIsCheaper(f.cost));
    frontier->set_goal(f.maximize ? "max" : "min");
    for (const report::FrontierPoint& p : f.points) {
      tae::v1::FrontierPoint* point = frontier->add_points();
      point->set_variant(p.variant);
      point->set_cost(p.cost);
      point->set_n(p.n);
      point->set_mean(p.mean);
      point->set_ci95(p.ci95);
      point->set_lo(p.lo);
      point->set_hi(p.hi);
      point->set_on_front(p.on_front);
      point->set_clears(report::ClearsName(p.clears));
      point->set_reached(p.reached);
    }
    if (f.cheapest) {
      frontier->set_cheapest(f.points[*f.cheapest].variant);
    }
    frontier->set_estimates(f.estimates);
  }
  for (const report::ScaleFit& fit : in.scale) {
    ToProto(fit, out->add_scale());
  }
  tae::v1::ReportCorrection* correction = out->mutable_correction();
  correction->set_method(in.correction.method);
  correction->set_alpha(in.correction.alpha);
  correction->set_family(in.correction.family);
  correction->set_controlled(in.correction.controlled);
  for (const auto& [metric, k] : in.correction.comparisons) {
    correction->add_metrics(metric);
    correction->add_comparisons(k);
  }
  out->set_search_confirm(in.search_confirm);
  out->set_estimates(in.estimates);
  if (in.savings) {
    ToProto(*in.savings, out->mutable_experiment()->mutable_search_savings());
  }
  for (const model::SearchDecisionRecord& decision : in.decisions) {
    tae::v1::SearchDecision* d = out->add_search_decisions();
    d->set_point(decision.point);
    d->set_group(decision.group);
    d->set_rung(decision.rung);
    d->set_step(decision.step);
    d->set_has_value(decision.value.has_value());
    d->set_value(decision.value.value_or(0));
    d->set_seeds(decision.seeds);
    d->set_verdict(decision.verdict);
    d->set_rank(decision.rank);
    d->set_competitors(decision.competitors);
    d->set_keeps(decision.keeps);
    d->set_reason(decision.reason);
  }
}

void ToProto(const report::SearchSavings& in, tae::v1::SearchSavings* out) {
  out->set_steps_run(in.steps_run);
  out->set_steps_full(in.steps_full);
  out->set_runs(in.runs);
  out->set_runs_without_steps(in.runs_without_steps);
  out->set_points_pruned(in.points_pruned);
  for (const report::RungSavings& rung : in.rungs) {
    tae::v1::SearchRung* r = out->add_rungs();
    r->set_rung(rung.rung);
    r->set_step(rung.step);
    r->set_judged(rung.judged);
    r->set_pruned(rung.pruned);
    r->set_nodata(rung.nodata);
  }
}

}  // namespace tae::wire
