#include "common/spec/notes.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace tae::spec {

namespace {

// Whether a command template names {train.seed} (a template that does not parse names nothing).
bool NamesSeed(std::string_view command) {
  absl::StatusOr<std::vector<std::string>> keys = CommandPlaceholders(command);
  return keys.ok() && std::find(keys->begin(), keys->end(), "train.seed") != keys->end();
}

}  // namespace

std::vector<std::string> DesignNotes(const Spec& spec) {
  std::vector<std::string> notes;
  // A command job's seeds: the program gets its seed only where the command passes it.
  if (!spec.job_command.empty() && (spec.seeds.size() > 1 || spec.seeds_design.adaptive) &&
      !NamesSeed(spec.job_command)) {
    notes.push_back(absl::StrCat(
        "job.command never uses {train.seed}: each run's seed reaches the program only as the "
        "environment variable TAE_SEED, so a script that seeds itself with a constant runs "
        "every seed alike; pass it (e.g. --seed={train.seed}) or read TAE_SEED in the script"));
  }
  if (!spec.search.asha() || spec.grid.empty()) {
    return notes;
  }
  const int64_t eta = spec.search.reduction;
  int64_t points = 1;
  for (const GridAxis& axis : spec.grid) {
    points *= static_cast<int64_t>(axis.values.size());
  }
  const bool study = spec.search.within == SearchWithin::kStudy;
  const int64_t competition =
      study ? points * static_cast<int64_t>(1 + spec.ablations.size()) : points;
  if (competition < eta * eta) {
    notes.push_back(absl::StrCat(
        "search: each competition has ", competition, " grid point", competition == 1 ? "" : "s",
        " (", study ? "search.within = \"study\"" : "one variant's [grid]",
        "), fewer than search.reduction^2 = ", eta * eta, ": rung 0 keeps the best ",
        std::max<int64_t>(1, competition / eta),
        " of them and later rungs judge one or two, so "
        "noise decides which of close points survives; use a larger [grid], a smaller "
        "search.reduction, or search.method = \"grid\""));
  }
  if (spec.job_command.empty()) {
    int64_t warmup = 0;
    for (const RunPlan& run : ExpandRuns(spec)) {
      warmup = std::max<int64_t>(warmup, run.config.value("train.warmup", int64_t{0}));
    }
    if (warmup > spec.search.min_steps) {
      notes.push_back(absl::StrCat(
          "search: rung 0 (search.min_steps = ", spec.search.min_steps,
          ") comes before train.warmup ends (step ", warmup,
          "): points are ranked while their learning rates still ramp up, which favours the "
          "larger rates; set search.min_steps >= ",
          warmup));
    }
  }
  return notes;
}

}  // namespace tae::spec
