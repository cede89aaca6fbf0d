#pragma once

// How the records of server/model/records.h are read from and written to their rows: the one
// place that knows a table's column order, shared by the store (writes and the reads its callers'
// decisions need) and server/query (what is shown). Internal to those two.

#include <string>

#include "server/model/records.h"
#include "server/store/db.h"

namespace tae::store::rows {

// Labels and run metadata are stored as a JSON object of strings.
std::string LabelsToJson(const model::Labels& labels);
model::Labels LabelsFromJson(const std::string& text);
// An experiment's [report] as stored ({"metrics": [...], "goal": {...}}); empty for bad text.
std::string ReportToJson(const model::ExperimentReport& report);
model::ExperimentReport ReportFromJson(const std::string& text);

// experiments columns, in the order ReadExperiment reads them.
inline constexpr const char* kExperimentColumns =
    "id, name, description, spec_hash, spec_path, created_at, paused, report";
// One experiments row selected with kExperimentColumns; counts and variants are filled apart.
model::ExperimentRecord ReadExperiment(const Statement& stmt);

// runs columns, in the order ReadRun reads them.
extern const char* const kRunColumns;
model::RunRecord ReadRun(const Statement& stmt);

// Adds n runs in `state` to the experiment's counts.
void AddToCounts(model::RunState state, int n, model::RunCounts* counts);

}  // namespace tae::store::rows
