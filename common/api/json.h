#pragma once

// The JSON shapes of the Control API's messages: what taectl prints with --json (docs/cli.md) and
// what taed's dashboard endpoints answer (docs/dashboard.md), from one implementation.

#include "absl/functional/function_ref.h"
#include "common/api/head_grid.h"
#include "nlohmann/json.hpp"
#include "tae/v1/control.pb.h"

namespace tae::api {

nlohmann::ordered_json ExperimentJson(const tae::v1::Experiment& exp);
nlohmann::ordered_json RunJson(const tae::v1::Run& run);
// RunJson's fields one by one, in its order, without the object: field(name, value) for each;
// without `config` the config is not parsed and not given (a reader that has it another way).
void RunFields(const tae::v1::Run& run,
               absl::FunctionRef<void(const char* name, nlohmann::ordered_json value)> field,
               bool config = true);
nlohmann::ordered_json AgentJson(const tae::v1::AgentInfo& agent);
// {"agents": [AgentJson], "provider_events": [{time, provider, subject, event, detail}],
//  "vms": [{provider, pool, name, zone, state}]}
nlohmann::ordered_json FleetJson(const tae::v1::ListAgentsResponse& response);
// `view` ("tuned" | "grid"), each row's chosen `point` ({"lr": 0.001}; null in the grid view)
// and, for an asha [search], `savings` (SavingsJson). The tuned view also has "search":
// {"metric", "goal", "confirm"} and "estimates" (report::TunedEstimates: "optimistic: chosen on
// the same seeds", "confirmed: 3 fresh seeds", "pending: ..."); with search.confirm its rows have
// "confirm_runs" and "confirm_pending".
// With a frontier (ReportRequest.frontier), also `frontier`: FrontierJson; with a ladder fit
// (ReportRequest.scale), `scale`: ScaleJson (an array of them for a ladder with a [grid]).
// Why an experiment's table is empty when no run reported a metric (ReportResponse.no_metrics):
// the ways a command job reports, one per line. The report's JSON carries it as
// no_metrics.hint, with the sample run's last lines.
std::string NoMetricsHint();
// The ways themselves (NoMetricsHint without its first sentence), for submit --dry-run.
std::string WaysToReport();

nlohmann::ordered_json ReportJson(const tae::v1::ReportResponse& report);

// A cell's interval of delta is set (delta_lo, delta_hi at two-sided delta_level): a level in
// (0, 1) and finite bounds. Absent fields read 0 (a peer that does not send them): not set.
bool HasDeltaInterval(const tae::v1::ReportCell& cell);
// Its smallest detectable effect is set (positive and finite).
bool HasDetectable(const tae::v1::ReportCell& cell);
// A [scale] ladder fit (ReportResponse.scale): the law, each rung's N, the exponent and each
// variant's multiplier with their 95% intervals ("ci95": [lo, hi], null without one), its trend
// and per-rung effects, and with an `at` size the extrapolated effects.
nlohmann::ordered_json ScaleJson(const tae::v1::ScaleFit& fit);

// The cost frontier (server/report/frontier.h):
// {"bar": {"metric", "op", "value", "goal"}, "cost": {"axis", "cheaper": "lower"|"higher"},
//  "cheapest": FrontierPoint | null, "points": [{"variant", "cost", "n", "mean", "ci95", "lo",
//  "hi", "on_front", "clears"}]}; points cheapest first, unknown numbers null.
nlohmann::ordered_json FrontierJson(const tae::v1::ReportFrontier& frontier);
// {"steps_run", "steps_full", "fraction", "runs", "runs_without_steps", "points_pruned",
//  "rungs": [{"rung", "step", "judged", "pruned", "nodata"}]}; fraction null without steps_full.
nlohmann::ordered_json SavingsJson(const tae::v1::SearchSavings& savings);
// "layers=2,lr=0.001" -> {"layers": 2, "lr": 0.001}: values that read as JSON keep their type,
// the others are strings. In the order of the name.
nlohmann::ordered_json PointJson(const std::string& point);
// {"run": 12, "layers": L, "heads": H, "masked": [[..]], "gradient": [[..]],
//  "cells": [["scored"|"pruned"|"removed"|"missing", ...], ...]}; unscored values are null.
nlohmann::ordered_json HeadGridJson(int64_t run_id, const HeadGrid& grid);

}  // namespace tae::api
