#pragma once

// How the store is told what to change: a run's transitions are decided above the store, by
// server/lifecycle's pure functions, and handed to it as these values; the store reads the run,
// asks the decision and writes what it returns, in one transaction (docs/design.md §11). The
// store never names a decider, and a decider never sees storage.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/records.h"

namespace tae::model {

// How a job's process ended, as its agent reported it.
// Where a gang's ranks stand once a rank's exit is recorded: of `size` ranks of the attempt,
// `clean` exited 0 and `exited` exited at all (this one included).
struct GangTally {
  int clean = 0;
  int exited = 0;
  int size = 0;
};

struct RunExit {
  int attempt = 0;
  int exit_code = 0;
  int signal = 0;
  bool cancelled = false;
  bool interrupted = false;  // the agent stopped it as it shut down: the attempt is lost
  std::string text;          // the agent's reason, if it gave one
  double at = 0;
  bool infra = false;         // the worker failed it (staging, run dir, disk): the attempt is lost
  bool not_started = false;   // with infra: before the job's program ran (a start fault)
  bool by_other_job = false;  // with infra: another job on the worker caused it (filled its disk)
};

// One run's transition, decided from the run as stored at that moment (e.g. lifecycle::Lost(why,
// now) bound to what happened). nullopt: the event changes nothing (a run already final, a late
// report); an error refuses it, and the store writes nothing of that transaction.
using Decide = std::function<absl::StatusOr<std::optional<RunTransition>>(const RunRecord&)>;

// The decisions an ingest batch of agent events needs, one per kind of event that moves a run
// (lifecycle::IngestRules()).
struct IngestRules {
  // The process of `attempt` started as `pid` on `agent`.
  std::optional<RunTransition> (*started)(const RunRecord& run, int attempt, int64_t pid,
                                          const std::string& agent, double at) = nullptr;
  // A one-host run's process exited.
  std::optional<RunTransition> (*exited)(const RunRecord& run, const RunExit& exit) = nullptr;
  // Rank `rank` of a gang exited on `agent`; `tally`: where the attempt's ranks stand now.
  std::optional<RunTransition> (*gang_exited)(const RunRecord& run, int rank,
                                              const std::string& agent, const RunExit& exit,
                                              const GangTally& tally) = nullptr;
  // The exit code recorded for a gang's rank (0 only for a clean exit).
  int (*rank_exit_code)(const RunExit& exit) = nullptr;
};

}  // namespace tae::model
